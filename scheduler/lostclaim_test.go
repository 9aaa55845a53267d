package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// lostAnswer is a store whose next claim that takes runs commits and then
// answers with an error, while lose is set: PostgreSQL restarting or
// failing over while a claim commits. The nemesis run (make nemesis) found
// runs claimed so left running for good on a live node that did not know
// it had them: nothing ran them, and nothing recovered them.
type lostAnswer struct {
	store.Store
	lose atomic.Bool
	// hold, when set, holds the writes of attempts' results until release
	// closes; held is sent a value when one is held.
	hold    atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (l *lostAnswer) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	if l.hold.Load() {
		select {
		case l.held <- struct{}{}:
		default:
		}
		<-l.release
	}
	return l.Store.RunTransitionMany(ctx, ts)
}

func (l *lostAnswer) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	runs, err := l.Store.RunsClaim(ctx, p)
	if err == nil && len(runs) > 0 && l.lose.CompareAndSwap(true, false) {
		return nil, errors.New("claim runs: unexpected EOF (injected: the claim committed and its answer was lost)")
	}
	return runs, err
}

func withLostAnswer(lost *lostAnswer) func(h *harness) {
	return func(h *harness) {
		h.wrap = func(st store.Store) store.Store {
			lost.Store = st
			return lost
		}
	}
}

// TestClaimWithLostAnswer: a run taken by a claim whose answer was lost is
// still run, once, by the node that claimed it, and ends.
func TestClaimWithLostAnswer(t *testing.T) {
	lost := &lostAnswer{}
	h := newHarnessWith(t, withLostAnswer(lost), func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("work", h.succeed)}
	})
	lost.lose.Store(true)
	r, err := h.s.Trigger(context.Background(), "work", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	if lost.lose.Load() {
		t.Fatal("no claim took the run")
	}
	h.handled(1)
	h.attemptsDone(1)
	got := h.run(r.ID)
	if got.Status != jobs.StatusCompleted || got.Attempt != 1 || got.Node != "node-a" {
		t.Fatalf("run after a claim whose answer was lost: %s attempt %d on %q, want completed at attempt 1 on node-a", got.Status, got.Attempt, got.Node)
	}
	h.loop()
	if list, _ := h.calls.snapshot(); len(list) != 1 {
		t.Fatalf("handler called %d times, want once", len(list))
	}
}

// TestClaimAheadWithLostAnswer: a run claimed ahead of its tick by a claim
// whose answer was lost starts at its tick, not before, once.
func TestClaimAheadWithLostAnswer(t *testing.T) {
	lost := &lostAnswer{}
	h, run, tick := reportClaimedAheadWith(t, withLostAnswer(lost), func(*harness) { lost.lose.Store(true) })
	if lost.lose.Load() {
		t.Fatal("no claim took the run ahead of its tick")
	}
	h.loop()
	if list, _ := h.calls.snapshot(); len(list) != 0 {
		t.Fatalf("handler ran before the tick: %+v", list)
	}
	h.clock.Set(tick)
	h.handled(1)
	h.attemptsDone(1)
	if _, at := h.calls.snapshot(); len(at) != 1 || !at[0].Equal(tick) {
		t.Fatalf("handler calls at %v, want one at the tick %s", at, tick)
	}
	if got := h.run(run.ID); got.Status != jobs.StatusCompleted || got.Attempt != 1 {
		t.Fatalf("run: %s attempt %d, want completed at attempt 1", got.Status, got.Attempt)
	}
}

// TestLostClaimLeavesEndingAttemptsAlone: after a claim whose answer was
// lost, the node starts the runs the store holds running on it that it
// does not know of; a run whose attempt has ended here and whose result is
// still being written is running in the store, and is not started again.
func TestLostClaimLeavesEndingAttemptsAlone(t *testing.T) {
	lost := &lostAnswer{held: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarnessWith(t, withLostAnswer(lost), func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("first", h.succeed), job("second", h.succeed)}
	})
	lost.hold.Store(true)
	first, err := h.s.Trigger(context.Background(), "first", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	select {
	case <-lost.held:
	case <-time.After(signalWait):
		t.Fatal("the result of the first run was not written")
	}
	if got := h.run(first.ID); got.Status != jobs.StatusRunning {
		t.Fatalf("first run while its result is held: %s, want running", got.Status)
	}
	lost.lose.Store(true)
	second, err := h.s.Trigger(context.Background(), "second", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	if lost.lose.Load() {
		t.Fatal("no claim took the second run")
	}
	h.handled(1)
	close(lost.release)
	h.attemptsDone(2)
	h.stop() // every attempt started has ended
	perRun := map[string]int{}
	list, _ := h.calls.snapshot()
	for _, info := range list {
		perRun[info.RunID]++
	}
	if perRun[first.ID] != 1 || perRun[second.ID] != 1 || len(list) != 2 {
		t.Fatalf("handler calls by run: %v, want one for %s and one for %s", perRun, first.ID, second.ID)
	}
	for _, id := range []string{first.ID, second.ID} {
		if got := h.run(id); got.Status != jobs.StatusCompleted || got.Attempt != 1 {
			t.Errorf("run %s: %s at attempt %d, want completed at attempt 1", id, got.Status, got.Attempt)
		}
	}
	if adopted := h.logged.with("claim whose answer was lost"); len(adopted) != 1 || !strings.Contains(adopted[0], second.ID) {
		t.Errorf("runs started after the lost claim: %q, want the second run's alone", adopted)
	}
}
