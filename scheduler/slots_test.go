package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// heldWrites is a store whose RunTransitionMany (the completer's batched
// writes of results) wait while held: a store slow to write results.
type heldWrites struct {
	store.Store
	held    atomic.Bool
	entered chan int // the size of each batch that waits
	release chan struct{}
}

func (s *heldWrites) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	if s.held.Load() {
		s.entered <- len(ts)
		<-s.release
	}
	return s.Store.RunTransitionMany(ctx, ts)
}

// TestEndedAttemptFreesItsSlotBeforeItsResultIsWritten: with concurrency 1,
// a run starts as soon as the attempt before it has ended, while that
// attempt's result is still being written; but no more than concurrency
// results wait for their write, so a store that writes slowly holds claims
// back. Every result is written in the end.
func TestEndedAttemptFreesItsSlotBeforeItsResultIsWritten(t *testing.T) {
	var st *heldWrites
	// The first attempt ends at once; the later ones run until later is
	// closed. An attempt's end wakes the loop, which may start the next
	// run before the completer takes the first result: had that attempt
	// ended at once too, both results could share the first write.
	later := make(chan struct{})
	var calls atomic.Int32
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = 1
		h.wrap = func(s store.Store) store.Store {
			st = &heldWrites{Store: s, entered: make(chan int), release: make(chan struct{})}
			return st
		}
	}, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("work", func(ctx context.Context) error {
			if calls.Add(1) == 1 {
				return h.succeed(ctx)
			}
			return h.blockUntil(later)(ctx)
		})}
	})
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
	laterOnce := sync.OnceFunc(func() { close(later) })
	t.Cleanup(laterOnce)
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
	// One result waits and one attempt runs: the third run must wait.
	h.loop()
	var third string
	for _, id := range ids {
		if id != first.RunID && id != second.RunID {
			third = id
		}
	}
	if got := h.run(third).Status; got != jobs.StatusPending {
		t.Fatalf("third run is %s with a result unwritten and an attempt running at concurrency 1, want pending", got)
	}
	if n := h.s.Running(); n != 2 {
		t.Fatalf("Running() = %d with a result unwritten and an attempt running, want 2", n)
	}

	laterOnce()
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

// sideBySideWrites is a store that writes transactions side by side
// (store.ConcurrentWriter) and holds its first RunTransitionMany until a
// second one has begun, or 10 s: overlapped says which came first.
type sideBySideWrites struct {
	store.Store
	calls      atomic.Int32
	second     chan struct{}
	overlapped chan bool
}

func (*sideBySideWrites) ConcurrentWrites() {}

func (s *sideBySideWrites) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	switch s.calls.Add(1) {
	case 1:
		select {
		case <-s.second:
			s.overlapped <- true
		case <-time.After(signalWait):
			s.overlapped <- false
		}
	case 2:
		close(s.second)
	}
	return s.Store.RunTransitionMany(ctx, ts)
}

// TestTwoCompletersSideBySide: on a store that writes side by side, with
// more results possibly waiting than one batch holds, a batch of results
// is written while another is; every result is written once.
func TestTwoCompletersSideBySide(t *testing.T) {
	const n = 1200
	var st *sideBySideWrites
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = completionBatch + 500
		h.wrap = func(s store.Store) store.Store {
			st = &sideBySideWrites{Store: s, second: make(chan struct{}), overlapped: make(chan bool, 1)}
			return st
		}
	}, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	ctx := context.Background()
	ps := make([]store.RunInsertParams, n)
	for i := range ps {
		ps[i] = store.RunInsertParams{Job: "work", Trigger: jobs.TriggerManual, Retry: jobs.RetryPolicy{MaxAttempts: 1},
			Now: h.clock.Now()}
	}
	if _, err := h.st.RunInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	h.loop()
	if !<-st.overlapped {
		t.Fatal("the first batch of results was written alone for 10 s: no second completer")
	}
	h.attemptsDone(n)
	seen := map[string]bool{}
	for _, info := range h.handled(n) {
		if seen[info.RunID] {
			t.Fatalf("run %s handled twice", info.RunID)
		}
		seen[info.RunID] = true
	}
	runs := h.runs("work")
	if len(runs) != n {
		t.Fatalf("%d runs, want %d", len(runs), n)
	}
	for _, r := range runs {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Fatalf("run %s is %s at attempt %d, want completed at 1", r.ID, r.Status, r.Attempt)
		}
		if a, err := h.st.RunAttempts(ctx, r.ID); err != nil || len(a) != 1 {
			t.Fatalf("run %s: %d attempts, %v; want 1", r.ID, len(a), err)
		}
	}
}
