package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/schedulerd/schedulerd/jobs"
)

// TestLiveOutputBounded: a follower from the start gets the head, a
// marker for what was not kept, and the kept tail; one that keeps up
// gets every byte; Next reports done once the end has been read.
func TestLiveOutputBounded(t *testing.T) {
	ctx := context.Background()
	l := newLiveOutput(4)
	l.write([]byte("abc"))
	data, next, done, err := l.Next(ctx, 0)
	if string(data) != "abc" || next != 3 || done || err != nil {
		t.Fatalf("first read: %q %d %v %v", data, next, done, err)
	}
	for _, p := range []string{"def", "ghi", "jkl"} {
		l.write([]byte(p))
		data, next, _, _ = l.Next(ctx, next)
		if string(data) != p {
			t.Fatalf("a follower that keeps up read %q, want %q", data, p)
		}
	}
	l.write([]byte("mnopqrstuvwxyz"))
	l.end()
	data, next, done, _ = l.Next(ctx, 0)
	if !strings.HasPrefix(string(data), "abcd\n[... ") || !strings.HasSuffix(string(data), " bytes not kept ...]\nwxyz") ||
		next != 26 || !done {
		t.Fatalf("a late follower: %q next %d done %v", data, next, done)
	}
	if _, _, done, _ := l.Next(ctx, 26); !done {
		t.Fatal("after the end, Next does not say done")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, _, err := newLiveOutput(4).Next(cctx, 0); err == nil {
		t.Fatal("Next of a quiet attempt ignores its context")
	}
}

// TestLiveOutputOfARunningCommand: a command job's output is seen by a
// follower while the attempt runs, before it ends, and the follower is
// told when it ends.
func TestLiveOutputOfARunningCommand(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mk := func(h *harness) []*jobs.Definition {
		d := &jobs.Definition{Name: "talk", Shell: `echo first; read x < "$FIFO"; echo second`, Env: map[string]string{"FIFO": fifo},
			Retry: jobs.RetryPolicy{MaxAttempts: 1, Backoff: jobs.BackoffFixed}}
		d.WithDefaults()
		return []*jobs.Definition{d}
	}
	h := newHarness(t, mk)
	r, err := h.s.Trigger(context.Background(), "talk", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	live, ok := h.s.LiveOutput(r.ID)
	if !ok {
		t.Fatal("no live output for the running attempt")
	}
	ctx, cancel := context.WithTimeout(context.Background(), signalWait)
	defer cancel()
	data, next, done, err := live.Next(ctx, 0)
	if string(data) != "first\n" || done || err != nil {
		t.Fatalf("while it runs: %q done %v %v", data, done, err)
	}
	if err := os.WriteFile(fifo, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var rest []byte
	for !done {
		data, next, done, err = live.Next(ctx, next)
		if err != nil {
			t.Fatalf("follow to the end: %v (got %q)", err, rest)
		}
		rest = append(rest, data...)
	}
	if string(rest) != "second\n" {
		t.Fatalf("after the job went on: %q", rest)
	}
	h.attemptsDone(1)
	if _, ok := h.s.LiveOutput(r.ID); ok {
		t.Fatal("live output of an attempt that has ended")
	}
}
