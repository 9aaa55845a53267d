package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// reportClaimedAhead starts a harness with a job "report" firing every
// minute, and brings the clock to where the run of its next tick is
// claimed ahead (see claimedAhead).
func reportClaimedAhead(t *testing.T) (*harness, *jobs.Run, time.Time) {
	t.Helper()
	return reportClaimedAheadWith(t, nil, nil)
}

// reportClaimedAheadWith is reportClaimedAhead with setup for the harness,
// and before, when set, called before the tick is fired ahead.
func reportClaimedAheadWith(t *testing.T, setup, before func(h *harness)) (*harness, *jobs.Run, time.Time) {
	t.Helper()
	h := newHarnessWith(t, setup, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{minutely(t, "report", h.succeed)}
	})
	if before != nil {
		before(h)
	}
	tick := t0.Add(time.Minute)
	run := firedAhead(h, "report", tick)
	claimedAhead(h, run, tick)
	return h, run, tick
}

// claimedAhead checks that the loop sleeps until ClaimLead before tick,
// moves the clock there, and checks that the run is this node's, running
// from the tick.
func claimedAhead(h *harness, run *jobs.Run, tick time.Time) {
	h.t.Helper()
	sleepsUntil(h, tick.Add(-claimLead))
	h.advanceTo(tick.Add(-claimLead))
	if r := h.run(run.ID); r.Status != jobs.StatusRunning || !r.StartedAt.Equal(tick) {
		h.t.Fatalf("run %s at ClaimLead before its tick: %s, started_at %s; want running from %s", run.ID, r.Status, r.StartedAt, tick)
	}
}

// TestClaimAheadRoundInOneClaim: the runs of a round of many jobs fired
// ahead are claimed ClaimLead before their tick, in one claim of them all
// with the tick as its time, and every handler starts at the tick, once.
func TestClaimAheadRoundInOneClaim(t *testing.T) {
	const n = 3*splitRound + 5
	h, st := manyJobsDueClaims(t, n)
	tick := t0.Add(time.Minute)
	h.advanceTo(tick.Add(-lead))
	sleepsUntil(h, tick.Add(-claimLead))
	h.advanceTo(tick.Add(-claimLead))
	st.mu.Lock()
	limits := slices.Clone(st.limits)
	st.mu.Unlock()
	if !slices.Equal(limits, []int{n}) {
		t.Fatalf("claims marked Due ClaimLead before the tick: limits %v, want one of %d", limits, n)
	}
	for i := range n {
		runs := h.runs(fmt.Sprintf("job-%03d", i))
		if len(runs) != 1 || runs[0].Status != jobs.StatusRunning || !runs[0].StartedAt.Equal(tick) {
			t.Fatalf("job-%03d before its tick: %v %v", i, ticksOf(runs), statusOf(runs))
		}
	}
	if got := len(h.calls.ch); got != 0 {
		t.Fatalf("%d handlers called before the tick", got)
	}
	h.clock.Set(tick)
	handledOnceEach(h, n, tick)
	_, at := h.calls.snapshot()
	for i, a := range at {
		if !a.Equal(tick) {
			t.Fatalf("handler call %d at %s, want the tick %s", i, a, tick)
		}
	}
	h.attemptsDone(n)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Equal(st.limits, limits) {
		t.Fatalf("claims marked Due: %v, want only the one ahead of the tick", st.limits)
	}
}

// TestClaimAheadCancelledBeforeTick: a run claimed ahead and cancelled
// before its tick ends cancelled, and its handler never runs.
func TestClaimAheadCancelledBeforeTick(t *testing.T) {
	h, run, tick := reportClaimedAhead(t)
	if _, err := h.s.Cancel(context.Background(), run.ID, ""); err != nil {
		t.Fatal(err)
	}
	h.attemptsDone(1)
	h.clock.Set(tick)
	h.loop()
	r := h.run(run.ID)
	if r.Status != jobs.StatusCancelled || r.Reason != jobs.ReasonCancelled {
		t.Fatalf("run after its cancel before the tick: %s (%s), want cancelled", r.Status, r.Reason)
	}
	if list, _ := h.calls.snapshot(); len(list) != 0 {
		t.Fatalf("handler ran for a run cancelled before its tick: %+v", list)
	}
}

// TestClaimAheadStartsAtTickDuringShutdown: a node stopped between the
// claim ahead and the tick starts the attempt at its tick, inside the
// shutdown grace, as it lets every running attempt finish.
func TestClaimAheadStartsAtTickDuringShutdown(t *testing.T) {
	h, run, tick := reportClaimedAhead(t)
	stopped := make(chan struct{})
	go func() {
		h.s.Stop(context.Background())
		close(stopped)
	}()
	// Stop waits for the attempt: its grace timer is set.
	sleepsUntil(h, tick.Add(-claimLead).Add(h.cfg.ShutdownGrace))
	h.clock.Set(tick)
	info := h.handled(1)[0]
	<-stopped
	h.closed = true
	if err := h.st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, at := h.calls.snapshot(); info.RunID != run.ID || !at[0].Equal(tick) {
		t.Fatalf("handler call %+v at %s, want run %s at %s", info, at[0], run.ID, tick)
	}
	if r := h.run(run.ID); r.Status != jobs.StatusCompleted {
		t.Fatalf("run after the shutdown: %s (%s)", r.Status, r.Reason)
	}
}

// frozenAfterClaimAhead is reportClaimedAhead on a node whose heartbeats
// are every 40 s (the last at t0+40s, none due at the tick) that then
// looks frozen since long before the tick: its last successful heartbeat
// is set back to two minutes before the tick, past inactive_threshold -
// heartbeat_interval (80 s), as after a SIGSTOP whose end lets the tick's
// timer run before the heartbeat's. (The real-process test of a freeze is
// cmd/schedulerd's TestClusterFrozenBetweenClaimAndTick.)
func frozenAfterClaimAhead(t *testing.T) (*harness, *jobs.Run, time.Time) {
	t.Helper()
	h, run, tick := reportClaimedAheadWith(t, func(h *harness) {
		h.cfg.HeartbeatInterval, h.cfg.InactiveThreshold = 40*time.Second, 2*time.Minute
	}, func(h *harness) {
		h.heartbeatAt(t0.Add(40 * time.Second))
	})
	h.s.lease.lastHeartbeat.Store(tick.Add(-2 * time.Minute).UnixNano())
	return h, run, tick
}

// TestClaimedAheadTakenWhileFrozen: a run claimed ahead whose node then
// goes silent past inactive_threshold is recovered by another node; when
// the frozen node's tick timer fires, the node must prove it is alive
// before it starts the attempt. The store refuses its heartbeat (its
// registration was pruned), so it fences itself and the handler never runs:
// the run is the other node's now.
func TestClaimedAheadTakenWhileFrozen(t *testing.T) {
	h, run, tick := frozenAfterClaimAhead(t)
	ctx := context.Background()
	r := h.run(run.ID)
	f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
	lost := jobs.FailAttempt(r, f, "node-b", jobs.Result{Err: errors.New("node node-a silent")}, jobs.ReasonNodeLost,
		tick.Add(-claimLead/2), h.cfg.Rand)
	if _, err := h.st.RunTransition(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if err := h.st.NodeDelete(ctx, store.NodeDeleteParams{ID: "node-a", Incarnation: r.Incarnation}); err != nil {
		t.Fatal(err)
	}

	h.clock.Set(tick)
	h.attemptsDone(1)
	if list, _ := h.calls.snapshot(); len(list) != 0 {
		t.Fatalf("the frozen node ran the handler of a run taken from it: %+v", list)
	}
	if !h.s.lease.fenced.Load() {
		t.Fatal("the node did not fence itself when the store refused its heartbeat")
	}
	got := h.run(run.ID)
	if got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonNodeLost || got.Attempt != 1 {
		t.Fatalf("run after the frozen node's tick: %s (%s) attempt %d, want retrying node_lost attempt 1",
			got.Status, got.Reason, got.Attempt)
	}
	for _, e := range h.events(run.ID) {
		if e.Node == "node-a" && e.From == jobs.StatusRunning {
			t.Errorf("the frozen node's write of its attempt was accepted: %+v", e)
		}
	}
}

// TestClaimedAheadProvenAliveAfterFreeze: the same freeze with the run
// still the node's: the heartbeat before the start succeeds, and the
// attempt starts at its tick.
func TestClaimedAheadProvenAliveAfterFreeze(t *testing.T) {
	h, run, tick := frozenAfterClaimAhead(t)
	h.clock.Set(tick)
	info := h.handled(1)[0]
	if _, at := h.calls.snapshot(); info.RunID != run.ID || !at[0].Equal(tick) {
		t.Fatalf("handler call %+v at %s, want run %s at %s", info, at[0], run.ID, tick)
	}
	if h.s.lease.fenced.Load() {
		t.Fatal("a node whose registration is still its own fenced itself")
	}
	if last := time.Unix(0, h.s.lease.lastHeartbeat.Load()); !last.Equal(tick) {
		t.Fatalf("last heartbeat %s, want the one made at the tick", last)
	}
	nodes, err := h.st.NodesList(context.Background(), true)
	if err != nil || len(nodes) != 1 || !nodes[0].HeartbeatAt.Equal(tick) {
		t.Fatalf("nodes: %+v %v; want node-a's heartbeat at the tick", nodes, err)
	}
}

// sleepsUntil waits, at most 10 s, until the clock has a timer due at t:
// the loop's, when nothing else sets one then.
func sleepsUntil(h *harness, t time.Time) {
	h.t.Helper()
	for deadline := time.Now().Add(signalWait); !h.clock.HasTimerAt(t); {
		if time.Now().After(deadline) {
			next, _ := h.clock.NextTimer()
			h.t.Fatalf("no timer at %s; the next is at %s", t, next)
		}
		select {
		case <-h.clock.TimerAdded():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestClaimAheadRoundLargerThanSlots: a round that the free slots cannot
// take whole is not claimed ahead: it is claimed at its tick, as far as
// the slots go, and the rest as they free up.
func TestClaimAheadRoundLargerThanSlots(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		var defs []*jobs.Definition
		for i := range 6 { // more than the 4 slots
			defs = append(defs, minutely(t, fmt.Sprintf("job-%d", i), h.succeed))
		}
		return defs
	})
	tick := t0.Add(time.Minute)
	h.advanceTo(tick.Add(-lead))
	h.advanceTo(tick.Add(-claimLead))
	for i := range 6 {
		if runs := h.runs(fmt.Sprintf("job-%d", i)); len(runs) != 1 || runs[0].Status != jobs.StatusPending {
			t.Fatalf("job-%d at ClaimLead before the tick: %v %v", i, ticksOf(runs), statusOf(runs))
		}
	}
	h.clock.Set(tick)
	handledOnceEach(h, 6, tick)
	h.attemptsDone(6)
}

// TestClaimAheadLeavesJobAtItsLimit: the run of a job at its concurrency
// limit is left pending by the claim ahead, and starts once the job has
// room.
func TestClaimAheadLeavesJobAtItsLimit(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{minutely(t, "sync", h.blockUntil(release), func(d *jobs.Definition) {
			d.Overlap, d.MaxConcurrency = jobs.OverlapQueue, 1
		})}
	})
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	first := firedAhead(h, "sync", t1)
	claimedAhead(h, first, t1)
	h.clock.Set(t1)
	h.handled(1)

	h.advanceTo(t2.Add(-lead))
	h.advanceTo(t2.Add(-claimLead))
	runs := h.runs("sync")
	if len(runs) != 2 || runs[1].Status != jobs.StatusPending || !runs[1].ScheduledAt.Equal(t2) {
		t.Fatalf("sync at ClaimLead before t2: %v %v", ticksOf(runs), statusOf(runs))
	}
	h.advanceTo(t2)
	if runs := h.runs("sync"); runs[1].Status != jobs.StatusPending {
		t.Fatalf("sync's second run started while its first runs: %v", statusOf(runs))
	}
	close(release)
	h.attemptsDone(1)
	info := h.handled(1)[0]
	if info.RunID != runs[1].ID {
		t.Fatalf("call after the release: %+v, want run %s", info, runs[1].ID)
	}
	h.attemptsDone(1)
	if runs := h.runs("sync"); len(runs) != 2 || runs[0].Status != jobs.StatusCompleted || runs[1].Status != jobs.StatusCompleted {
		t.Fatalf("sync: %v %v", ticksOf(runs), statusOf(runs))
	}
}
