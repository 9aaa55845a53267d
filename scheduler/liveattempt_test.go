package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// TestLiveAttemptNumbersTheAttempt: the live output of a run is that of
// its attempt running now, numbered: after attempt 1 failed, the output
// followed is attempt 2's, and says so.
func TestLiveAttemptNumbersTheAttempt(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mk := func(h *harness) []*jobs.Definition {
		// Attempt 1 fails at once; attempt 2 waits for the test.
		d := &jobs.Definition{Name: "again", Env: map[string]string{"FIFO": fifo, "MARK": filepath.Join(dir, "mark")},
			Shell: `if [ ! -e "$MARK" ]; then : > "$MARK"; echo one; exit 1; fi; echo two; read x < "$FIFO"`,
			Retry: jobs.RetryPolicy{MaxAttempts: 2, Backoff: jobs.BackoffFixed, InitialDelay: 10 * time.Second}}
		d.WithDefaults()
		return []*jobs.Definition{d}
	}
	h := newHarness(t, mk)
	r, err := h.s.Trigger(context.Background(), "again", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	if _, _, ok := h.s.LiveAttempt(r.ID); ok {
		t.Fatal("a live output while the run waits to retry")
	}
	h.advanceTo(h.clock.Now().Add(10 * time.Second))
	live, n, ok := h.s.LiveAttempt(r.ID)
	if !ok || n != 2 {
		t.Fatalf("live output of the retry: attempt %d, %v", n, ok)
	}
	if l, _ := h.s.LiveOutput(r.ID); l != live {
		t.Fatal("LiveAttempt and LiveOutput differ")
	}
	ctx, cancel := context.WithTimeout(context.Background(), signalWait)
	defer cancel()
	if data, _, _, err := live.Next(ctx, 0); string(data) != "two\n" || err != nil {
		t.Fatalf("output of attempt 2: %q %v", data, err)
	}
	if err := os.WriteFile(fifo, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.attemptsDone(1)
	if _, _, ok := h.s.LiveAttempt(r.ID); ok {
		t.Fatal("a live output of a run that has ended")
	}
}
