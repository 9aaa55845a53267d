package command

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestStdin: a process reads Spec.Stdin on its standard input, all of it,
// and without it reads /dev/null (end of input at once).
func TestStdin(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20) // more than a pipe holds
	res := runBounded(t, context.Background(), Spec{Argv: []string{"wc", "-c"}, Stdin: big})
	if got := strings.TrimSpace(res.Output.String()); got != "1048576" {
		t.Errorf("wc -c read %q, want 1048576", got)
	}
	res = runBounded(t, context.Background(), Spec{Shell: "cat; echo end", Stdin: []byte(`{"event":"dead_letter"}`)})
	if got := res.Output.String(); got != "{\"event\":\"dead_letter\"}end\n" {
		t.Errorf("output %q", got)
	}
	res = runBounded(t, context.Background(), Spec{Shell: "cat; echo end"})
	if got := res.Output.String(); got != "end\n" {
		t.Errorf("without Stdin: output %q", got)
	}
}

// TestStdinNotRead: a process that exits without reading its input is not
// waited for, and neither is one that never reads, past its timeout.
func TestStdinNotRead(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	res := runBounded(t, context.Background(), Spec{Argv: []string{"true"}, Stdin: big})
	if res.ExitCode != 0 || res.StartErr != nil {
		t.Errorf("true with unread input: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res = runBounded(t, ctx, Spec{Argv: []string{"sleep", "60"}, Stdin: big, KillGrace: 100 * time.Millisecond})
	if !res.Stopped {
		t.Errorf("a process that never reads was not stopped: %+v", res)
	}
}
