package scheduler

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// heldWrites is a store whose RunTransitions (the completer's batched
// writes of results) wait while held: a store slow to write results.
type heldWrites struct {
	store.Store
	held    atomic.Bool
	entered chan int // the size of each batch that waits
	release chan struct{}
}

func (s *heldWrites) RunTransitions(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	if s.held.Load() {
		s.entered <- len(ts)
		<-s.release
	}
	return s.Store.RunTransitions(ctx, ts)
}

// TestEndedAttemptFreesItsSlotBeforeItsResultIsWritten: with concurrency 1,
// a run starts as soon as the attempt before it has ended, while that
// attempt's result is still being written; but no more than concurrency
// results wait for their write, so a store that writes slowly holds claims
// back. Every result is written in the end.
func TestEndedAttemptFreesItsSlotBeforeItsResultIsWritten(t *testing.T) {
	var st *heldWrites
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = 1
		h.wrap = func(s store.Store) store.Store {
			st = &heldWrites{Store: s, entered: make(chan int), release: make(chan struct{})}
			return st
		}
	}, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	ctx := context.Background()
	st.held.Store(true)
	released := false
	releaseWrites := func() {
		if !released {
			released = true
			st.held.Store(false)
			close(st.release)
		}
	}
	t.Cleanup(releaseWrites) // before the harness stops, should the test fail
	var ids []string
	for range 3 {
		r, err := h.s.Trigger(ctx, "work", TriggerParams{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}

	h.loop()
	first := h.handled(1)[0]
	if n := <-st.entered; n != 1 {
		t.Fatalf("the first write holds %d results, want 1", n)
	}
	// The first result waits for its write; the slot is free all the same.
	h.loop()
	second := h.handled(1)[0]
	if first.RunID == second.RunID {
		t.Fatalf("run %s started twice", first.RunID)
	}
	if got := h.run(first.RunID).Status; got != jobs.StatusRunning {
		t.Fatalf("first run is %s while its result waits, want running", got)
	}
	// Two results now wait (or one waits and one attempt runs): the third
	// run must wait for the writes.
	h.loop()
	var third string
	for _, id := range ids {
		if id != first.RunID && id != second.RunID {
			third = id
		}
	}
	if got := h.run(third).Status; got != jobs.StatusPending {
		t.Fatalf("third run is %s with two results unwritten at concurrency 1, want pending", got)
	}
	if n := h.s.Running(); n != 2 {
		t.Fatalf("Running() = %d with two results unwritten, want 2", n)
	}

	releaseWrites()
	h.attemptsDone(2)
	h.loop()
	if info := h.handled(1)[0]; info.RunID != third {
		t.Fatalf("started run %s, want %s", info.RunID, third)
	}
	h.attemptsDone(1)
	for _, id := range ids {
		if r := h.run(id); r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Errorf("run %s is %s at attempt %d, want completed at 1", id, r.Status, r.Attempt)
		}
	}
}
