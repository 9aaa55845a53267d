package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestRunsShowEscapesJobText: a job's output, progress message, error and
// the caller's payload and dedup id reach the operator's terminal escaped
// by `runs show`, and as stored with --raw.
func TestRunsShowEscapesJobText(t *testing.T) {
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf(`[[job]]
name = "evil"
shell = '''
printf 'title\033]0;pwned\007 clear\033[2J forged\rline\n'
"$SD_BIN" progress 50 "$(printf 'msg\033[31mred')"
exit 0
'''
env = { SD_BIN = %q }
`, binary))
	d := e.start(true)
	defer d.stop()
	payload := "pay\x1b[1Aload"
	id := jsonLines(t, e.ok("trigger", "evil", "--payload", payload, "--dedup-id", "d\x1b[Kd", "--wait", "--json"))[0]["id"].(string)

	shown := e.ok("runs", "show", id)
	if strings.ContainsAny(shown, "\x1b\x07\r") {
		t.Errorf("runs show printed terminal control characters:\n%q", shown)
	}
	for _, want := range []string{`title\x1b]0;pwned\x07 clear\x1b[2J forged\rline`, `msg\x1b[31mred`, `pay\x1b[1Aload`, `d\x1b[Kd`} {
		if !strings.Contains(shown, want) {
			t.Errorf("runs show lacks the escaped %s:\n%s", want, shown)
		}
	}
	raw := e.ok("runs", "show", id, "--raw")
	for _, want := range []string{"title\x1b]0;pwned\x07 clear\x1b[2J forged\rline", "msg\x1b[31mred", payload} {
		if !strings.Contains(raw, want) {
			t.Errorf("runs show --raw lacks %q:\n%q", want, raw)
		}
	}
}
