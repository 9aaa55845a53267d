package scheduler

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// outage is a store whose calls fail while down is set: a store that cannot
// be reached. It never invents results.
type outage struct {
	store.Store
	down atomic.Bool
}

var errUnreachable = errors.New("store unreachable (injected outage)")

func (o *outage) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	if o.down.Load() {
		return errUnreachable
	}
	return o.Store.NodeHeartbeat(ctx, p)
}

func (o *outage) NodeRegister(ctx context.Context, p store.NodeRegisterParams) (*store.Node, error) {
	if o.down.Load() {
		return nil, errUnreachable
	}
	return o.Store.NodeRegister(ctx, p)
}

func (o *outage) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if o.down.Load() {
		return nil, errUnreachable
	}
	return o.Store.RunsClaim(ctx, p)
}

// otherNodeRunning registers node-b (heartbeat at hb) and makes it claim one
// run of job, as a node that then died would leave it.
func otherNodeRunning(t *testing.T, st store.Store, job string, hb time.Time) *jobs.Run {
	t.Helper()
	ctx := context.Background()
	if _, err := st.NodeRegister(ctx, store.NodeRegisterParams{ID: "node-b", Incarnation: "b-1", Host: "elsewhere", PID: 1, Now: hb}); err != nil {
		t.Fatal(err)
	}
	return claimAs(t, st, job, "node-b", "b-1", hb)
}

// TestRecoverSilentNode: the runs of a node silent past inactive_threshold
// go through the retry flow with reason node_lost, once this node has itself
// been connected for the threshold; the dead node's late write is rejected.
func TestRecoverSilentNode(t *testing.T) {
	var r *jobs.Run
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("work", h.blockUntil(nil))}
	})
	h.stop()
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	// node-b heartbeated 10 minutes ago: long silent, but node-a has only
	// just come up, so it must first see node-b stay silent for itself.
	r = otherNodeRunning(t, st, "work", t0.Add(-10*time.Minute))
	st.Close()
	h.cfg.InactiveThreshold = 2 * time.Minute
	h.start([]*jobs.Definition{job("work", h.blockUntil(nil))})

	for i := 1; i <= 4; i++ { // heartbeats at 30s..2m: connected since 30s, for 1m30s at most
		h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second))
		if got := h.run(r.ID); got.Status != jobs.StatusRunning {
			t.Fatalf("recovered after %d heartbeats, before node-a was connected for the threshold: %s", i, got.Status)
		}
	}
	h.heartbeatAt(t0.Add(150 * time.Second)) // connected for 2m
	got := h.run(r.ID)
	if got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonNodeLost {
		t.Fatalf("status %s reason %s, want retrying node_lost", got.Status, got.Reason)
	}
	nodes, err := h.st.NodesList(context.Background(), true)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "node-a" {
		t.Fatalf("nodes after recovery: %v %v", nodes, err)
	}
	// The dead node comes back and tries to finish its attempt: rejected.
	_, err = h.st.RunTransition(context.Background(), jobs.Complete(jobs.Fence{RunID: r.ID, Attempt: 1, Incarnation: "b-1"}, "node-b", jobs.Result{}, t0))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("late write of the lost node: %v", err)
	}
	// The run is retried here and counts the lost attempt.
	h.advanceTo(got.NotBefore)
	h.handled(1)
	if got := h.run(r.ID); got.Status != jobs.StatusRunning || got.Attempt != 2 || got.Node != "node-a" {
		t.Fatalf("retry: status %s attempt %d node %s", got.Status, got.Attempt, got.Node)
	}
}

// TestHeartbeatWakesTheLoopOnlyForASilentNode: a heartbeat round that
// judges the other nodes and finds none silent leaves the scheduling loop
// asleep (an idle node's loop woke at every round for nothing); one that
// recovers a silent node's runs wakes it, since they may be due here now.
func TestHeartbeatWakesTheLoopOnlyForASilentNode(t *testing.T) {
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.PollInterval = time.Hour // no iteration but those woken
		h.cfg.InactiveThreshold = 2 * time.Minute
	}, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.blockUntil(nil))} })
	gate := make(chan struct{})
	h.gate.Store(&gate)
	t.Cleanup(func() { close(gate) }) // before the harness stops
	// The loop is held at the end of this iteration from now on.
	h.loop()
	// From 2m30s node-a has been connected for the threshold: each round
	// lists the nodes and judges the others. There are none.
	for i := 1; i <= 6; i++ {
		h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second))
	}
	if len(h.s.wake) != 0 {
		t.Fatal("a heartbeat round that found no silent node woke the scheduling loop")
	}
	r := otherNodeRunning(t, h.st, "work", t0.Add(-10*time.Minute))
	h.heartbeatAt(t0.Add(210 * time.Second))
	if got := h.run(r.ID); got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonNodeLost {
		t.Fatalf("run of the silent node: %s (%s), want retrying (node_lost)", got.Status, got.Reason)
	}
	if len(h.s.wake) != 1 {
		t.Fatal("the heartbeat round that recovered a silent node's run did not wake the scheduling loop")
	}
}

// wakesDuringList is a store on which node-b heartbeats (wake) just after
// a NodesList has read it: a node that was silent wakes up while another
// node judges it.
type wakesDuringList struct {
	store.Store
	wake atomic.Pointer[func()]
}

func (w *wakesDuringList) NodesList(ctx context.Context, withJobs bool) ([]*store.Node, error) {
	nodes, err := w.Store.NodesList(ctx, withJobs)
	if f := w.wake.Swap(nil); f != nil {
		(*f)()
	}
	return nodes, err
}

// TestSilentNodeWakingDuringRecoveryKeepsItsRuns: node-b, silent past the
// threshold, heartbeats after node-a has listed it as silent and before
// node-a recovers its runs. node-a marks a node lost by compare-and-set on
// the heartbeat it judged, so it finds node-b alive and leaves its run
// running; node-b's registration stays its own.
func TestSilentNodeWakingDuringRecoveryKeepsItsRuns(t *testing.T) {
	var w *wakesDuringList
	h := newHarnessWith(t, func(h *harness) {
		h.wrap = func(st store.Store) store.Store { w = &wakesDuringList{Store: st}; return w }
	}, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.blockUntil(nil))} })
	h.stop()
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	r := otherNodeRunning(t, st, "work", t0.Add(-10*time.Minute))
	st.Close()
	h.cfg.InactiveThreshold = 2 * time.Minute
	h.start([]*jobs.Definition{job("work", h.blockUntil(nil))})
	for i := 1; i <= 4; i++ { // connected for 1m30s at most: no recovery yet
		h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second))
	}
	woke := t0.Add(150 * time.Second)
	wake := func() {
		if err := h.st.NodeHeartbeat(context.Background(), store.NodeHeartbeatParams{ID: "node-b", Incarnation: "b-1", Now: woke}); err != nil {
			t.Error(err)
		}
	}
	w.wake.Store(&wake)
	h.heartbeatAt(woke) // connected for 2m: node-a judges node-b, which wakes
	if w.wake.Load() != nil {
		t.Fatal("the heartbeat round did not list the nodes")
	}
	if got := h.run(r.ID); got.Status != jobs.StatusRunning || got.Incarnation != "b-1" {
		t.Fatalf("run of the node that woke during its recovery: %s (%s) on %s, want running on b-1", got.Status, got.Reason, got.Incarnation)
	}
	nodes, err := h.st.NodesList(context.Background(), false)
	if err != nil || len(nodes) != 2 || nodes[1].ID != "node-b" || nodes[1].Incarnation != "b-1" {
		t.Fatalf("nodes: %+v %v; want node-b still b-1", nodes, err)
	}
	if err := h.st.NodeHeartbeat(context.Background(), store.NodeHeartbeatParams{ID: "node-b", Incarnation: "b-1", Now: woke.Add(time.Second)}); err != nil {
		t.Fatalf("node-b's next heartbeat: %v", err)
	}
}

// newcomerDuringRecovery is a store on which, at the first RunsRunning of
// node-b, a new process of node-b (incarnation b-2) takes the id over from
// the lost mark and claims a run: it comes back while node-a recovers the
// runs of its lost incarnation.
type newcomerDuringRecovery struct {
	store.Store
	t    *testing.T
	once sync.Once
	run  atomic.Pointer[jobs.Run]
}

func (n *newcomerDuringRecovery) RunsRunning(ctx context.Context, node string) ([]*jobs.Run, error) {
	if node == "node-b" {
		n.once.Do(func() {
			at := t0.Add(150 * time.Second)
			if _, err := n.Store.NodeRegister(ctx, store.NodeRegisterParams{ID: "node-b", Incarnation: "b-2", Host: "elsewhere",
				PID: 2, Replace: store.LostIncarnation("b-1"), Now: at}); err != nil {
				n.t.Error(err)
				return
			}
			n.run.Store(claimAs(n.t, n.Store, "work", "node-b", "b-2", at))
		})
	}
	return n.Store.RunsRunning(ctx, node)
}

// claimAs makes a run of job and claims it as node/incarnation.
func claimAs(t *testing.T, st store.Store, job, node, inc string, at time.Time) *jobs.Run {
	t.Helper()
	ctx := context.Background()
	r, err := st.RunInsert(ctx, store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: at, NotBefore: at,
		Retry: jobs.RetryPolicy{MaxAttempts: 2, Backoff: jobs.BackoffFixed, InitialDelay: time.Second}, Now: at})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.RunsClaim(ctx, store.ClaimParams{Node: node, Incarnation: inc, Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 1, Now: at})
	if err != nil || len(claimed) != 1 || claimed[0].ID != r.ID {
		t.Fatalf("claim as %s/%s: %v %v", node, inc, claimed, err)
	}
	return r
}

// TestRecoverLostNodeAcrossIncarnations: the recovery of a lost node
// fails the running attempts of its lost incarnation and of an older one
// (whose restart stopped part way), but not those of a new process that
// took the node id over while the recovery ran.
func TestRecoverLostNodeAcrossIncarnations(t *testing.T) {
	var nc *newcomerDuringRecovery
	h := newHarnessWith(t, func(h *harness) {
		h.wrap = func(st store.Store) store.Store { nc = &newcomerDuringRecovery{Store: st, t: t}; return nc }
	}, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.blockUntil(nil))} })
	h.stop()
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	older := claimAs(t, st, "work", "node-b", "b-0", t0.Add(-20*time.Minute))
	lost := otherNodeRunning(t, st, "work", t0.Add(-10*time.Minute)) // b-1
	st.Close()
	h.cfg.InactiveThreshold = 2 * time.Minute
	h.start([]*jobs.Definition{job("work", h.blockUntil(nil))})
	for i := 1; i <= 5; i++ { // connected for 2m at 150s: node-b is recovered then
		h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second))
	}
	newer := nc.run.Load()
	if newer == nil {
		t.Fatal("node-a did not read node-b's running runs")
	}
	for _, r := range []*jobs.Run{older, lost} {
		if got := h.run(r.ID); got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonNodeLost {
			t.Errorf("run %s of a dead incarnation (%s): %s (%s), want retrying node_lost", r.ID, h.run(r.ID).Incarnation, got.Status, got.Reason)
		}
	}
	if got := h.run(newer.ID); got.Status != jobs.StatusRunning || got.Incarnation != "b-2" {
		t.Errorf("run of the new process b-2: %s (%s) on %s, want running", got.Status, got.Reason, got.Incarnation)
	}
	nodes, err := h.st.NodesList(context.Background(), false)
	if err != nil || len(nodes) != 2 || nodes[1].Incarnation != "b-2" {
		t.Fatalf("nodes: %+v %v; want node-b held by b-2", nodes, err)
	}
}

// TestRejoinOverLostMark: a node whose registration another node marked
// lost (to recover its runs) has its heartbeat refused, fences itself,
// and rejoins over the mark as a new incarnation.
func TestRejoinOverLostMark(t *testing.T) {
	h := newHarnessWith(t, func(h *harness) { h.cfg.InactiveThreshold = 2 * time.Minute },
		func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	ctx := context.Background()
	old := h.s.Incarnation()
	nodes, err := h.st.NodesList(ctx, false)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	if _, err := h.st.NodeMarkLost(ctx, store.NodeMarkLostParams{ID: "node-a", Incarnation: old, HeartbeatAt: nodes[0].HeartbeatAt}); err != nil {
		t.Fatal(err)
	}
	h.heartbeatAt(t0.Add(30 * time.Second))
	if !h.s.lease.fenced.Load() {
		t.Fatal("a node marked lost did not fence itself at its heartbeat")
	}
	h.heartbeatAt(t0.Add(60 * time.Second))
	if h.s.lease.fenced.Load() || h.s.Incarnation() == old {
		t.Fatalf("after the next round: fenced %v, incarnation %s (was %s); want rejoined", h.s.lease.fenced.Load(), h.s.Incarnation(), old)
	}
	nodes, err = h.st.NodesList(ctx, false)
	if err != nil || len(nodes) != 1 || nodes[0].Incarnation != h.s.Incarnation() {
		t.Fatalf("nodes after the rejoin: %+v %v", nodes, err)
	}
}

// TestSilentForLessThanThresholdNotRecovered: a node whose heartbeat is late
// but within the threshold keeps its runs.
func TestSilentForLessThanThresholdNotRecovered(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	h.stop()
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	r := otherNodeRunning(t, st, "work", t0)
	st.Close()
	h.cfg.InactiveThreshold = 2 * time.Minute
	h.start([]*jobs.Definition{job("work", h.succeed)})
	for i := 1; i <= 6; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		if i == 3 { // node-b heartbeats at 1m30s: never silent for 2m until 3m30s
			if err := h.st.NodeHeartbeat(context.Background(), store.NodeHeartbeatParams{ID: "node-b", Incarnation: "b-1", Now: at}); err != nil {
				t.Fatal(err)
			}
		}
		h.heartbeatAt(at)
		if got := h.run(r.ID); got.Status != jobs.StatusRunning {
			t.Fatalf("recovered at %s while node-b was silent for less than the threshold", at.Sub(t0))
		}
	}
	h.heartbeatAt(t0.Add(210 * time.Second)) // silent since 1m30s: 2m, the threshold
	if got := h.run(r.ID); got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonNodeLost {
		t.Fatalf("status %s reason %s", got.Status, got.Reason)
	}
}

// TestSelfFenceAndRejoin: a node whose heartbeats fail for
// inactive_threshold - heartbeat_interval stops claiming and stops its
// attempts, and rejoins as a new incarnation when the store is back.
func TestSelfFenceAndRejoin(t *testing.T) {
	var o *outage
	h := &harness{}
	_ = h
	h = newHarnessWith(t, func(h *harness) {
		h.cfg.InactiveThreshold = 2 * time.Minute
		h.wrap = func(st store.Store) store.Store { o = &outage{Store: st}; return o }
	}, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("work", h.blockUntil(nil))}
	})
	ctx := context.Background()
	r, err := h.s.Trigger(ctx, "work", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	oldInc := h.s.Incarnation()

	o.down.Store(true)
	h.heartbeatAt(t0.Add(30 * time.Second))
	h.heartbeatAt(t0.Add(60 * time.Second))
	if h.s.lease.fenced.Load() {
		t.Fatal("fenced after 60s without a heartbeat; the limit is 90s")
	}
	h.heartbeatAt(t0.Add(90 * time.Second))
	if !h.s.lease.fenced.Load() {
		t.Fatal("not fenced after 90s without a heartbeat")
	}
	h.attemptsDone(1) // the running attempt was stopped
	// While fenced it claims nothing, even with work due.
	if _, err := h.s.Trigger(ctx, "work", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	if n := h.s.Running(); n != 0 {
		t.Fatalf("a fenced node runs %d attempts", n)
	}
	got := h.run(r.ID)
	if got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonFenced {
		t.Fatalf("stopped attempt: status %s reason %s", got.Status, got.Reason)
	}

	o.down.Store(false)
	h.heartbeatAt(t0.Add(120 * time.Second))
	if h.s.lease.fenced.Load() {
		t.Fatal("still fenced after the store came back")
	}
	if h.s.Incarnation() == oldInc {
		t.Fatal("rejoined with the old incarnation")
	}
	h.advanceTo(t0.Add(10 * time.Minute))
	h.handled(2) // the retried run and the one triggered while fenced
	for _, run := range h.runs("work") {
		if run.Status != jobs.StatusRunning || run.Incarnation != h.s.Incarnation() {
			t.Errorf("run %s: status %s incarnation %s", run.ID, run.Status, run.Incarnation)
		}
	}
}

// TestLiveNodeIDRefused: a node id held by a live incarnation on another
// host makes the start fail; once that one is silent past the threshold the
// id is taken over.
func TestLiveNodeIDRefused(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	h.stop()
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.NodeRegister(context.Background(), store.NodeRegisterParams{ID: "node-a", Incarnation: "elsewhere-1",
		Host: "another-host", PID: 99, Replace: h.s.Incarnation(), Now: t0}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	cfg := h.cfg
	cfg.Clock, cfg.InactiveThreshold = h.clock, 2*time.Minute
	s, err := New(st2, cfg, []*jobs.Definition{job("work", h.succeed)})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Set(t0.Add(time.Minute))
	if err := s.Start(context.Background()); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("start with a live node id elsewhere: %v", err)
	}
	h.clock.Set(t0.Add(3 * time.Minute))
	s2, _ := New(st2, cfg, []*jobs.Definition{job("work", h.succeed)})
	if err := s2.Start(context.Background()); err != nil {
		t.Fatalf("start after the other incarnation went silent: %v", err)
	}
	s2.Stop(context.Background())
}

// TestHealthStaleAtTheLeaseBound: health reports the heartbeat stale from
// the moment the node no longer starts an attempt without heartbeating
// first (leaseHeld), not a moment later.
func TestHealthStaleAtTheLeaseBound(t *testing.T) {
	h := newHarness(t, func(*harness) []*jobs.Definition { return nil })
	now := h.clock.Now()
	bound := h.s.cfg.InactiveThreshold - h.s.cfg.HeartbeatInterval
	stale := func() bool {
		for _, p := range h.s.Health(context.Background()).Problems {
			if strings.HasPrefix(p, "heartbeat is stale") {
				return true
			}
		}
		return false
	}
	for _, tt := range []struct {
		age   time.Duration
		stale bool
	}{{0, false}, {bound - time.Microsecond, false}, {bound, true}, {bound + time.Second, true}} {
		h.s.lease.lastHeartbeat.Store(now.Add(-tt.age).UnixNano())
		if got, held := stale(), h.s.leaseHeld(now); got != tt.stale || held == tt.stale {
			t.Errorf("last heartbeat %s ago: stale %v, lease held %v; want stale %v", tt.age, got, held, tt.stale)
		}
	}
}

// transitionCalls is a store that records the transitions written one by
// one and the sizes of the batches, and fails the next batch when failNext
// is set (as an unreachable store would: nothing written).
type transitionCalls struct {
	store.Store
	mu       sync.Mutex
	single   int
	batches  []int
	failNext atomic.Bool
}

func (c *transitionCalls) RunTransition(ctx context.Context, t jobs.Transition) (*jobs.Run, error) {
	c.mu.Lock()
	c.single++
	c.mu.Unlock()
	return c.Store.RunTransition(ctx, t)
}

func (c *transitionCalls) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	if c.failNext.Swap(false) {
		return nil, errUnreachable
	}
	c.mu.Lock()
	c.batches = append(c.batches, len(ts))
	c.mu.Unlock()
	return c.Store.RunTransitionMany(ctx, ts)
}

// calls returns the transitions written one by one and the batch sizes.
func (c *transitionCalls) calls() (int, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.single, slices.Clone(c.batches)
}

// claimManyAs inserts n runs of job and claims them all as node/inc at at,
// as a process that then died would leave them.
func claimManyAs(t *testing.T, st store.Store, job, node, inc string, n int, at time.Time) {
	t.Helper()
	ctx := context.Background()
	for range n {
		if _, err := st.RunInsert(ctx, store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: at, NotBefore: at,
			Retry: jobs.RetryPolicy{MaxAttempts: 2, Backoff: jobs.BackoffFixed, InitialDelay: time.Second}, Now: at}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := st.RunsClaim(ctx, store.ClaimParams{Node: node, Incarnation: inc, Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: n, Now: at})
	if err != nil || len(claimed) != n {
		t.Fatalf("claim as %s/%s: %d runs, %v", node, inc, len(claimed), err)
	}
}

// recoveryHarness is a harness on a transitionCalls store whose file holds,
// before node-a starts, n runs of job "work" that died running as
// node/inc (node-b is registered with its last heartbeat at hb).
func recoveryHarness(t *testing.T, n int, node, inc string, hb time.Time) (*harness, *transitionCalls) {
	t.Helper()
	mk := func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.blockUntil(nil))} }
	h := newHarness(t, mk) // makes the file
	h.stop()
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if node == "node-b" {
		if _, err := st.NodeRegister(context.Background(), store.NodeRegisterParams{ID: "node-b", Incarnation: inc, Host: "elsewhere", PID: 1, Now: hb}); err != nil {
			t.Fatal(err)
		}
	}
	claimManyAs(t, st, "work", node, inc, n, hb)
	st.Close()
	h.cfg.InactiveThreshold = 2 * time.Minute
	calls := &transitionCalls{}
	h.wrap = func(st store.Store) store.Store { calls.Store = st; return calls }
	h.start(mk(h))
	return h, calls
}

// wantRecovered checks that every run is retrying with reason, and that
// they were written in batches of want, none one by one.
func wantRecovered(t *testing.T, h *harness, c *transitionCalls, reason jobs.Reason, want []int) {
	t.Helper()
	runs := h.runs("work")
	total := 0
	for _, k := range want {
		total += k
	}
	if len(runs) != total {
		t.Fatalf("%d runs, want %d", len(runs), total)
	}
	for _, r := range runs {
		if r.Status != jobs.StatusRetrying || r.Reason != reason || r.Attempt != 1 {
			t.Fatalf("run %s: %s %s at attempt %d, want retrying %s after attempt 1", r.ID, r.Status, r.Reason, r.Attempt, reason)
		}
	}
	if single, batches := c.calls(); single != 0 || !slices.Equal(batches, want) {
		t.Fatalf("transitions one by one: %d, in batches of %v; want none and %v", single, batches, want)
	}
}

// TestRecoverManyRunsInBatches: the running attempts of a silent node, and
// those this node's previous process left, are ended recoverBatch per
// transaction, each through the retry flow.
func TestRecoverManyRunsInBatches(t *testing.T) {
	const n = 2*recoverBatch + 100
	t.Run("silent node", func(t *testing.T) {
		h, calls := recoveryHarness(t, n, "node-b", "b-1", t0.Add(-10*time.Minute))
		for i := 1; i <= 5; i++ { // connected for 2m at the fifth
			h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second))
		}
		wantRecovered(t, h, calls, jobs.ReasonNodeLost, []int{recoverBatch, recoverBatch, 100})
		nodes, err := h.st.NodesList(context.Background(), false)
		if err != nil || len(nodes) != 1 || nodes[0].ID != "node-a" {
			t.Fatalf("nodes after recovery: %v %v", nodes, err)
		}
	})
	t.Run("previous process", func(t *testing.T) {
		h, calls := recoveryHarness(t, n, "node-a", "dead-process", t0)
		wantRecovered(t, h, calls, jobs.ReasonInterrupted, []int{recoverBatch, recoverBatch, 100})
	})
}

// TestSilentNodeKeptUntilItsRunsAreRecovered: when the write that recovers
// a silent node's runs fails, the node's row stays (marked lost) and its
// runs running; the next round recovers them, then deletes the row. (Were
// the row deleted, the runs would stay running with no node to judge.)
func TestSilentNodeKeptUntilItsRunsAreRecovered(t *testing.T) {
	h, calls := recoveryHarness(t, 3, "node-b", "b-1", t0.Add(-10*time.Minute))
	for i := 1; i <= 4; i++ {
		h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second))
	}
	calls.failNext.Store(true)
	h.heartbeatAt(t0.Add(150 * time.Second)) // connected for 2m: recovery, whose write fails
	for _, r := range h.runs("work") {
		if r.Status != jobs.StatusRunning || r.Node != "node-b" {
			t.Fatalf("run %s after the failed recovery: %s on %q, want running on node-b", r.ID, r.Status, r.Node)
		}
	}
	nodes, err := h.st.NodesList(context.Background(), false)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("nodes after the failed recovery: %v %v; want node-a and node-b", nodes, err)
	}
	h.heartbeatAt(t0.Add(180 * time.Second))
	wantRecovered(t, h, calls, jobs.ReasonNodeLost, []int{3})
	if nodes, err := h.st.NodesList(context.Background(), false); err != nil || len(nodes) != 1 || nodes[0].ID != "node-a" {
		t.Fatalf("nodes after recovery: %v %v", nodes, err)
	}
}
