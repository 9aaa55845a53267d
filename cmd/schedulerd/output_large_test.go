package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
)

// peakRSS returns the most resident memory process pid has had (VmHWM),
// in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestRunsShowLargeOutput: a job with the largest output_limit (16 MiB of
// head and of tail kept) writes 40 MiB of control bytes, which JSON
// escapes six times over, in each of two attempts: the attempts reply is
// about 384 MiB, more than a client reads whole. The daemon streams it
// (its peak memory grows far less than the reply; the reply built whole
// once took gigabytes), and `runs show` reads all of it.
func TestRunsShowLargeOutput(t *testing.T) {
	proctest.Long(t, "hundreds of MiB of output through a daemon")
	const written, limit = 40 << 20, 16 << 20
	e := newEnv(t)
	e.writeConfigWith(2, "", fmt.Sprintf(`[[job]]
name = "loud"
output_limit = %d
shell = 'head -c %d /dev/zero | tr "\000" "\001"; [ "$SCHEDULERD_ATTEMPT" -ge 2 ]'
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "1s" }
`, limit, written))
	d := e.start(true)
	r := e.ok("trigger", "loud", "--json")
	id := jsonField(t, r, "id")
	st := e.openStore()
	waitFor(t, "the run to finish", 2*time.Minute, func() bool {
		run, err := st.RunGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return run.Status.Terminal()
	})
	as, err := st.RunAttempts(context.Background(), id)
	if err != nil || len(as) != 2 || as[1].Status != jobs.StatusCompleted {
		t.Fatalf("attempts: %d %v", len(as), err)
	}
	// The output the store holds, without the truncation markers.
	stored := int64(strings.Count(as[0].Output, "\x01") + strings.Count(as[1].Output, "\x01"))
	if stored != 4*limit {
		t.Fatalf("the store holds %d bytes of output, want %d", stored, 4*limit)
	}
	as = nil

	before := peakRSS(t, d.cmd.Process.Pid)
	res := e.cli("runs", "show", id, "--raw") // bytes as stored, to count them
	if res.code != 0 {
		t.Fatalf("runs show: exit %d: %.2000s", res.code, res.stderr)
	}
	grew := peakRSS(t, d.cmd.Process.Pid) - before
	want := fmt.Sprintf("output (%d bytes, truncated: head and tail kept):", written)
	if n := strings.Count(res.stdout, want); n != 2 {
		t.Errorf("runs show printed %q %d times, want 2", want, n)
	}
	if n := int64(strings.Count(res.stdout, "\x01")); n != stored {
		t.Errorf("runs show printed %d bytes of output, the store holds %d", n, stored)
	}
	// The store's read of the attempts holds the output and passing copies
	// of it, and the collector lets the heap double: a few times the
	// output. The reply built whole took 23 times, 1.5 GiB here.
	t.Logf("%d MiB of output stored; the reply is about %d MiB; the daemon's peak memory grew by %d MiB serving it",
		stored>>20, 6*stored>>20, grew>>20)
	if grew > 8*stored {
		t.Errorf("the daemon's peak memory grew by %d MiB for a reply of %d MiB of output", grew>>20, stored>>20)
	}
	d.stop()
}
