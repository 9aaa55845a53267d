package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler/schedulertest"
	"github.com/schedulerd/schedulerd/store"
)

// lead and claimLead are the default FireLead and ClaimLead, which these
// tests run with.
const (
	lead      = defaultFireLead
	claimLead = defaultClaimLead
)

// minutely is a job firing at second 0 of every minute.
func minutely(t *testing.T, name string, h jobs.Handler, mod ...func(*jobs.Definition)) *jobs.Definition {
	return job(name, h, append([]func(*jobs.Definition){func(d *jobs.Definition) {
		d.Schedule = mustSchedule(t, "* * * * *")
	}}, mod...)...)
}

// firedAhead moves the clock to FireLead before tick, and checks that job
// then has one run: its tick's, pending, with not_before at the tick.
func firedAhead(h *harness, job string, tick time.Time) *jobs.Run {
	h.t.Helper()
	h.advanceTo(tick.Add(-lead))
	runs := h.runs(job)
	if len(runs) != 1 || !runs[0].ScheduledAt.Equal(tick) || !runs[0].NotBefore.Equal(tick) || runs[0].Status != jobs.StatusPending {
		h.t.Fatalf("runs of %s after the fire ahead of %s: %v %v", job, tick.Format(time.TimeOnly), ticksOf(runs), statusOf(runs))
	}
	return runs[0]
}

// TestFireAhead: a tick is fired FireLead before its time (its run waits,
// pending, with not_before at the tick); the loop wakes ClaimLead before
// the tick and claims the run, started_at the tick, and its handler starts
// at the tick, not before.
func TestFireAhead(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{minutely(t, "report", h.succeed)}
	})
	tick := t0.Add(time.Minute)
	h.advanceTo(tick.Add(-lead - time.Millisecond))
	if runs := h.runs("report"); len(runs) != 0 {
		t.Fatalf("fired before the lead: %v", ticksOf(runs))
	}
	run := firedAhead(h, "report", tick)
	if c := h.cursor("report"); !c.Last.Equal(tick) {
		t.Fatalf("cursor after the fire ahead: %s", c.Last)
	}
	if got := h.s.NextFire("report"); !got.Equal(tick) {
		t.Fatalf("NextFire while the tick is fired ahead = %s, want %s", got, tick)
	}
	h.advanceTo(tick.Add(-claimLead - time.Millisecond))
	if r := h.run(run.ID); r.Status != jobs.StatusPending {
		t.Fatalf("run fired ahead is %s before ClaimLead", r.Status)
	}
	// The loop sleeps until ClaimLead before the tick.
	sleepsUntil(h, tick.Add(-claimLead))
	h.advanceTo(tick.Add(-claimLead))
	if r := h.run(run.ID); r.Status != jobs.StatusRunning || !r.StartedAt.Equal(tick) || r.Node != "node-a" {
		t.Fatalf("run at ClaimLead before its tick: %s, started_at %s on %q; want running from the tick on node-a", r.Status, r.StartedAt, r.Node)
	}
	// The handler waits for the tick, which a timer of its own brings.
	h.clock.Set(tick.Add(-time.Millisecond))
	h.clock.Set(tick)
	info := h.handled(1)[0]
	if info.RunID != run.ID {
		t.Fatalf("handler ran %s, want %s", info.RunID, run.ID)
	}
	_, at := h.calls.snapshot()
	if !at[0].Equal(tick) {
		t.Fatalf("handler started at %s, want the tick %s", at[0], tick)
	}
	h.attemptsDone(1)
	if r := h.run(run.ID); r.Status != jobs.StatusCompleted {
		t.Fatalf("run is %s", r.Status)
	}
}

// TestFireAheadDeferredUntilTheTick: a skip job whose previous run is still
// active when its tick could be fired ahead is fired at the tick instead:
// a run that ends in between does not cost the tick, one still running at
// the tick does.
func TestFireAheadDeferredUntilTheTick(t *testing.T) {
	release := make(chan struct{})
	var fires *countFires
	h := newHarnessWith(t, func(h *harness) {
		h.wrap = func(s store.Store) store.Store { fires = &countFires{Store: s}; return fires }
	}, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{minutely(t, "sync", h.blockUntil(release), func(d *jobs.Definition) { d.Overlap = jobs.OverlapSkip })}
	})
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	h.advanceTo(t1.Add(-lead))
	h.clock.Set(t1)
	first := h.handled(1)[0]

	// Ahead of t2 the first run still runs: nothing is fired, the cursor stays.
	h.advanceTo(t2.Add(-lead))
	if runs := h.runs("sync"); len(runs) != 1 {
		t.Fatalf("fired ahead over an active run: %v", ticksOf(runs))
	}
	if c := h.cursor("sync"); !c.Last.Equal(t1) || c.Skipped != 0 {
		t.Fatalf("cursor after the deferred fire: %+v", c)
	}
	// The loop does not try again before the tick: an iteration in the
	// lead (the one the wake below makes, and any other the loop makes on
	// a timer that the clock's move fired) fires nothing.
	before := fires.n.Load()
	h.advanceTo(t2.Add(-lead / 2))
	if n := fires.n.Load() - before; n != 0 {
		t.Fatalf("%d fires in the lead of a deferred tick", n)
	}
	// It ends before the tick: the tick fires at its time.
	release <- struct{}{}
	h.attemptsDone(1)
	h.clock.Set(t2)
	second := h.handled(1)[0]
	if second.RunID == first.RunID || !second.ScheduledAt.Equal(t2) {
		t.Fatalf("second call: %+v", second)
	}

	// Still running at t3: skipped at t3, as without firing ahead.
	h.advanceTo(t3.Add(-lead))
	h.advanceTo(t3)
	runs := h.runs("sync")
	if len(runs) != 2 {
		t.Fatalf("runs: %v", ticksOf(runs))
	}
	if c := h.cursor("sync"); !c.Last.Equal(t3) || c.Skipped != 1 || !c.LastSkippedAt.Equal(t3) {
		t.Fatalf("cursor after the skip at the tick: %+v", c)
	}
	close(release)
	h.attemptsDone(1)
}

// TestFireAheadWithdrawnByPause: a pause between the fire ahead and the tick
// takes the tick back; a pause and a resume made through the store (another
// node) inside the lead, before the claim ahead, are found at the tick,
// which then fires.
func TestFireAheadWithdrawnByPause(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{minutely(t, "report", h.succeed)}
	})
	ctx := context.Background()
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)

	firedAhead(h, "report", t1)
	h.clock.Set(t1.Add(-lead / 2))
	if _, err := h.s.Pause(ctx, "report", ""); err != nil {
		t.Fatal(err)
	}
	if runs := h.runs("report"); len(runs) != 0 {
		t.Fatalf("the tick fired ahead of the pause still has a run: %v", ticksOf(runs))
	}
	h.advanceTo(t1)
	h.advanceTo(t1.Add(time.Second))
	if runs := h.runs("report"); len(runs) != 0 {
		t.Fatalf("a paused job fired: %v", ticksOf(runs))
	}
	if _, err := h.s.Resume(ctx, "report", ""); err != nil {
		t.Fatal(err)
	}

	// Elsewhere: paused and resumed through the store, in the lead of t2.
	ahead := firedAhead(h, "report", t2)
	pauseAt := t2.Add(-lead / 2)
	if _, err := h.st.SchedulePause(ctx, "report", true, pauseAt); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.SchedulePause(ctx, "report", false, pauseAt.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// The claim ahead of t2 finds no run; the loop looks again at t2.
	h.advanceTo(t2.Add(-claimLead))
	h.clock.Set(t2)
	info := h.handled(1)[0]
	if !info.ScheduledAt.Equal(t2) || info.RunID == ahead.ID {
		t.Fatalf("handler call at t2: %+v (the withdrawn run was %s)", info, ahead.ID)
	}
	h.attemptsDone(1)
	if runs := h.runs("report"); len(runs) != 1 {
		t.Fatalf("runs of t2: %v", ticksOf(runs))
	}
}

// TestFireAheadWithdrawnByReload: a reload inside the lead takes back the
// tick fired ahead under the old definition; the new schedule decides.
func TestFireAheadWithdrawnByReload(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{minutely(t, "report", h.succeed)}
	})
	t1 := t0.Add(time.Minute)
	firedAhead(h, "report", t1)
	h.clock.Set(t1.Add(-lead / 2))
	moved := job("report", h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "30 * * * * *") })
	if err := h.s.Reload(context.Background(), []*jobs.Definition{moved}); err != nil {
		t.Fatal(err)
	}
	if runs := h.runs("report"); len(runs) != 0 {
		t.Fatalf("the tick of the old schedule kept its run: %v", ticksOf(runs))
	}
	h.advanceTo(t1)
	h.advanceTo(t1.Add(time.Second))
	if runs := h.runs("report"); len(runs) != 0 {
		t.Fatalf("the old schedule fired: %v", ticksOf(runs))
	}
	next := t1.Add(30 * time.Second)
	h.advanceTo(next.Add(-lead))
	h.clock.Set(next)
	if info := h.handled(1)[0]; !info.ScheduledAt.Equal(next) {
		t.Fatalf("handler call: %+v, want the tick %s", info, next)
	}
	h.attemptsDone(1)
}

// TestFireAheadManyJobsOneTick: the runs of many jobs fired ahead of one
// tick are claimed at the tick, in parts, each once.
func TestFireAheadManyJobsOneTick(t *testing.T) {
	oneTickOfManyJobs(t, 3*splitRound+5, nil)
}

// manyJobs starts a harness with n jobs, job-000 on, firing every minute,
// and a slot for each twice over, on the store that wrap makes when it is
// set.
func manyJobs(t *testing.T, n int, wrap func(store.Store) store.Store) *harness {
	t.Helper()
	return newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = 2 * n
		h.wrap = wrap
	}, func(h *harness) []*jobs.Definition {
		var defs []*jobs.Definition
		for i := range n {
			defs = append(defs, minutely(t, fmt.Sprintf("job-%03d", i), h.succeed))
		}
		return defs
	})
}

// handledOnceEach waits for n handler calls and checks that each is of
// another job, for its tick.
func handledOnceEach(h *harness, n int, tick time.Time) {
	h.t.Helper()
	seen := map[string]bool{}
	for _, info := range h.handled(n) {
		if seen[info.Job] || !info.ScheduledAt.Equal(tick) {
			h.t.Fatalf("call %+v (seen before: %v)", info, seen[info.Job])
		}
		seen[info.Job] = true
	}
}

// oneTickOfManyJobs declares n jobs firing every minute (see manyJobs),
// lets them fire ahead of the next tick, sets the clock to it and checks
// that each job's tick ran once.
func oneTickOfManyJobs(t *testing.T, n int, wrap func(store.Store) store.Store) {
	t.Helper()
	h := manyJobs(t, n, wrap)
	tick := t0.Add(time.Minute)
	h.advanceTo(tick.Add(-lead))
	h.clock.Set(tick)
	handledOnceEach(h, n, tick)
	h.attemptsDone(n)
	for i := range n {
		if runs := h.runs(fmt.Sprintf("job-%03d", i)); len(runs) != 1 || runs[0].Status != jobs.StatusCompleted {
			t.Fatalf("job-%03d: %v %v", i, ticksOf(runs), statusOf(runs))
		}
	}
}

// TestFireAheadWithdrawnAtStop: a node that stops inside the lead takes its
// tick back; started again after the tick, it fires it once, late.
func TestFireAheadWithdrawnAtStop(t *testing.T) {
	var defs []*jobs.Definition
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		defs = []*jobs.Definition{minutely(t, "report", h.succeed)}
		return defs
	})
	tick := t0.Add(time.Minute)
	firedAhead(h, "report", tick)
	h.clock.Set(tick.Add(-lead / 2))
	h.stop()

	h.clock.Set(tick.Add(10 * time.Second))
	h.start(defs)
	info := h.handled(1)[0]
	if !info.ScheduledAt.Equal(tick) {
		t.Fatalf("handler call: %+v, want the tick %s", info, tick)
	}
	h.attemptsDone(1)
	runs := h.runs("report")
	if len(runs) != 1 || runs[0].ID != info.RunID || !runs[0].CreatedAt.After(tick) {
		t.Fatalf("runs: %v (created %v), want one made after the restart", ticksOf(runs), runs[0].CreatedAt)
	}
}

// partClaims is a ConcurrentWriter store that records the claims of a
// round's parts (claims marked Due over fewer than all jobs): the jobs each
// names, and whether two ran at once. Each part waits, at most 5 s, for
// another to be under way.
type partClaims struct {
	store.Store
	all      int
	mu       sync.Mutex
	inflight int
	most     int // the most parts claimed at once
	overlap  bool
	parts    int
	named    map[string]int
	two      chan struct{}
}

func (*partClaims) ConcurrentWrites() {}

func (s *partClaims) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if !p.Due || p.Jobs.Len() >= s.all {
		return s.Store.RunsClaim(ctx, p)
	}
	s.mu.Lock()
	s.parts++
	for _, name := range p.Jobs.Names() {
		s.named[name]++
	}
	s.inflight++
	s.most = max(s.most, s.inflight)
	if s.inflight == 2 && !s.overlap {
		s.overlap = true
		close(s.two)
	}
	s.mu.Unlock()
	select {
	case <-s.two:
	case <-time.After(5 * time.Second):
	}
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	return s.Store.RunsClaim(ctx, p)
}

// TestFireAheadClaimsPartsSideBySide: on a store whose writes run side by
// side, the parts of a round fired ahead are claimed at once, each over
// its own jobs, and every tick runs once.
func TestFireAheadClaimsPartsSideBySide(t *testing.T) {
	const n = 3*splitRound + 5
	var st *partClaims
	oneTickOfManyJobs(t, n, func(s store.Store) store.Store {
		st = &partClaims{Store: s, all: n, named: map[string]int{}, two: make(chan struct{})}
		return st
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.parts != 4 || !st.overlap {
		t.Fatalf("%d parts claimed, side by side: %v; want 4 at once", st.parts, st.overlap)
	}
	for i := range n {
		if name := fmt.Sprintf("job-%03d", i); st.named[name] != 1 {
			t.Fatalf("%s named by %d parts, want 1", name, st.named[name])
		}
	}
}

// TestFireAheadLargeRoundClaimsPartsSideBySide: on a store whose writes
// run side by side, a round of more than 4*fireBatch jobs is claimed in
// parts of fireBatch, sideBySide of them at a time, each over its own
// jobs, and every tick runs once.
func TestFireAheadLargeRoundClaimsPartsSideBySide(t *testing.T) {
	const n = 4*fireBatch + 100
	var st *partClaims
	h := manyJobs(t, n, func(s store.Store) store.Store {
		st = &partClaims{Store: s, all: n, named: map[string]int{}, two: make(chan struct{})}
		return st
	})
	tick := t0.Add(time.Minute)
	h.advanceTo(tick.Add(-lead))
	if runs := h.runs(""); len(runs) != n {
		t.Fatalf("%d runs fired by FireLead before the tick, want %d", len(runs), n)
	}
	h.clock.Set(tick)
	handledOnceEach(h, n, tick)
	h.attemptsDone(n)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.parts != 5 || !st.overlap || st.most > sideBySide {
		t.Fatalf("%d parts claimed, at most %d at once; want 5, at most %d and more than one at once", st.parts, st.most, sideBySide)
	}
	for i := range n {
		if name := fmt.Sprintf("job-%03d", i); st.named[name] != 1 {
			t.Fatalf("%s named by %d parts, want 1", name, st.named[name])
		}
	}
}

// manyJobsDueClaims is manyJobs on a dueClaims store.
func manyJobsDueClaims(t *testing.T, n int) (*harness, *dueClaims) {
	t.Helper()
	var st *dueClaims
	h := manyJobs(t, n, func(s store.Store) store.Store {
		st = &dueClaims{Store: s}
		return st
	})
	return h, st
}

// dueClaims is a store that records the Limit of each claim marked Due.
type dueClaims struct {
	store.Store
	mu     sync.Mutex
	limits []int
}

func (s *dueClaims) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if p.Due {
		s.mu.Lock()
		s.limits = append(s.limits, p.Limit)
		s.mu.Unlock()
	}
	return s.Store.RunsClaim(ctx, p)
}

// TestFireAheadClaimsPartsInTurn: on a store that writes one transaction
// at a time, the runs of a round fired ahead are claimed in three parts,
// one after another, and every tick runs once.
func TestFireAheadClaimsPartsInTurn(t *testing.T) {
	const n = 3*splitRound + 5
	var st *dueClaims
	oneTickOfManyJobs(t, n, func(s store.Store) store.Store {
		st = &dueClaims{Store: s}
		return st
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	part := (n + 2) / 3
	if want := []int{part, part, part}; !slices.Equal(st.limits, want) {
		t.Fatalf("claims marked Due with limits %v, want %v", st.limits, want)
	}
}

// TestFireAheadLargeRoundEarlier: a round of more than fireBatch jobs at
// one tick starts firing earlier, roundLeadStep for each further
// fireBatch, in transactions of fireBatch, so that all its runs are
// written by FireLead before the tick; at the tick they are claimed in
// parts of at most fireBatch, and every tick runs once.
func TestFireAheadLargeRoundEarlier(t *testing.T) {
	const n = 3*fireBatch + 100
	h, st := manyJobsDueClaims(t, n)
	tick := t0.Add(time.Minute)
	h.advanceTo(tick.Add(-lead - 3*roundLeadStep - time.Millisecond))
	if runs := h.runs(""); len(runs) != 0 {
		t.Fatalf("%d runs before the round's lead", len(runs))
	}
	for i, want := range []int{100, 100 + fireBatch, 100 + 2*fireBatch, n} {
		h.advanceTo(tick.Add(-lead - time.Duration(3-i)*roundLeadStep))
		runs := h.runs("")
		if len(runs) != want {
			t.Fatalf("%s before the tick: %d runs, want %d", lead+time.Duration(3-i)*roundLeadStep, len(runs), want)
		}
		for _, r := range runs {
			if !r.ScheduledAt.Equal(tick) || !r.NotBefore.Equal(tick) || r.Status != jobs.StatusPending {
				t.Fatalf("run %s of %s: tick %s, not_before %s, %s; want pending for the tick", r.ID, r.Job, r.ScheduledAt, r.NotBefore, r.Status)
			}
		}
	}
	h.clock.Set(tick)
	handledOnceEach(h, n, tick)
	h.attemptsDone(n)
	for _, r := range h.runs("") {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Fatalf("run %s of %s is %s at attempt %d", r.ID, r.Job, r.Status, r.Attempt)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if want := []int{fireBatch, fireBatch, fireBatch, fireBatch}; !slices.Equal(st.limits, want) {
		t.Fatalf("claims marked Due with limits %v, want %v", st.limits, want)
	}
}

// TestRoundLead: a job's rank among the jobs queued for its tick sets how
// far ahead it fires, at most maxRoundLead beyond FireLead, and never
// before the job's previous tick; leaving the tick gives the rank back.
func TestRoundLead(t *testing.T) {
	q := newTickQueue(lead)
	every := func(spec string, last time.Time) *jobState {
		j := newJobState(&jobs.Definition{Name: spec, Schedule: mustSchedule(t, spec)})
		j.setCursor(&store.Cursor{Last: last})
		return &j
	}
	tick := t0.Add(time.Minute)
	want := func(j *jobState, at time.Time) {
		t.Helper()
		if got := fromMicros(q.fireAt(j)); !got.Equal(at) {
			t.Fatalf("job of rank %d fires at %s, want %s", j.rank, got.Format(time.StampMicro), at.Format(time.StampMicro))
		}
	}
	first := every("* * * * *", t0)
	want(first, tick.Add(-lead))
	q.rounds[tick.UnixMicro()] = fireBatch
	want(every("* * * * *", t0), tick.Add(-lead-roundLeadStep))
	q.rounds[tick.UnixMicro()] = 1_000_000
	want(every("* * * * *", t0), tick.Add(-lead-maxRoundLead))

	// Every second, its previous tick (the cursor) fired ahead at t0+5s:
	// rank 20*fireBatch+1 would fire the next 1.25 s ahead, before it.
	prev := t0.Add(5 * time.Second)
	q.rounds[prev.Add(time.Second).UnixMicro()] = 20 * fireBatch
	want(every("* * * * * *", prev), prev)

	// The first job's tick fires; queued for the next, it leaves the count.
	n := q.rounds[tick.UnixMicro()]
	first.setCursor(&store.Cursor{Last: tick})
	want(first, tick.Add(time.Minute-lead))
	if got := q.rounds[tick.UnixMicro()]; got != n-1 {
		t.Fatalf("jobs ranked for the tick after the first left: %d, want %d", got, n-1)
	}
}

// TestLeadStepFollowsFireCost: the step between the fires of a large round
// is roundLeadStep, or 5/4 of what a fire of fireBatch takes when that is
// longer: the median of the last three fires counted (the lower of two),
// so that one stalled or quick fire among them does not move it; fires of
// fewer than fireBatch/2 jobs do not count.
func TestLeadStepFollowsFireCost(t *testing.T) {
	q := newTickQueue(lead)
	step := func(want time.Duration) {
		t.Helper()
		if got := time.Duration(q.leadStep()) * time.Microsecond; got != want {
			t.Fatalf("step %s, want %s (fire cost %dµs, last fires %v)", got, want, q.cost.median, q.cost.last[:q.cost.n])
		}
	}
	step(roundLeadStep)
	q.cost.note(80*time.Millisecond, fireBatch) // the first fire counts alone
	step(100 * time.Millisecond)
	q.cost.note(15*time.Millisecond, fireBatch/2) // 30 ms for fireBatch; the lower of two
	step(roundLeadStep)
	q.cost.note(time.Second, fireBatch/2-1) // too few to count
	step(roundLeadStep)
	q.cost.note(time.Second, fireBatch) // one stall: 30, 80, 1000
	step(100 * time.Millisecond)
	q.cost.note(40*time.Millisecond, fireBatch) // 30, 40, 1000 (the 80 ms fire is the oldest, out)
	step(roundLeadStep)
	q.cost.note(400*time.Millisecond, fireBatch) // 40, 400, 1000
	step(500 * time.Millisecond)
	q.cost.note(400*time.Millisecond, fireBatch) // a slower store: 400, 400, 1000
	step(500 * time.Millisecond)
	q.cost.note(10*time.Millisecond, fireBatch) // one quick fire: 10, 400, 400
	step(500 * time.Millisecond)
	q.cost.note(10*time.Millisecond, fireBatch) // 10, 10, 400
	step(roundLeadStep)
	q.cost.note(-time.Millisecond, fireBatch) // a clock step back does not count
	step(roundLeadStep)
	q.cost.note(200*time.Millisecond, fireBatch)
	q.cost.note(200*time.Millisecond, fireBatch) // 10, 200, 200: step 250 ms

	// The lead of a rank uses the step.
	j := newJobState(&jobs.Definition{Name: "j", Schedule: mustSchedule(t, "* * * * *")})
	j.setCursor(&store.Cursor{Last: t0})
	tick := t0.Add(time.Minute)
	q.rounds[tick.UnixMicro()] = 2 * fireBatch
	if got, want := fromMicros(q.fireAt(&j)), tick.Add(-lead-500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("rank %d fires at %s, want %s", j.rank, got.Format(time.StampMicro), want.Format(time.StampMicro))
	}
}

// slowFires is a store whose fires of fireBatch/2 jobs or more take took
// on the fake clock.
// countFires counts the calls of ScheduleFireMany.
type countFires struct {
	store.Store
	n atomic.Int64
}

func (s *countFires) ScheduleFireMany(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	s.n.Add(1)
	return s.Store.ScheduleFireMany(ctx, ps)
}

type slowFires struct {
	store.Store
	clock *schedulertest.FakeClock
	took  time.Duration
}

func (s *slowFires) ScheduleFireMany(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	if len(ps) >= fireBatch/2 {
		s.clock.Advance(s.took)
	}
	return s.Store.ScheduleFireMany(ctx, ps)
}

// TestLargeRoundLeadOnSlowFires: when a fire of fireBatch takes 80 ms,
// longer than roundLeadStep, the next round of 1,600 jobs at one tick
// starts firing 5/4 of that per further fireBatch earlier, 100 ms, so that
// it is still written before the tick; every tick runs once.
func TestLargeRoundLeadOnSlowFires(t *testing.T) {
	const (
		n    = 3*fireBatch + 100
		took = 80 * time.Millisecond
		step = took * 5 / 4
	)
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = 2 * n
		h.wrap = func(s store.Store) store.Store { return &slowFires{Store: s, clock: h.clock, took: took} }
	}, func(h *harness) []*jobs.Definition {
		var defs []*jobs.Definition
		for i := range n {
			defs = append(defs, minutely(t, fmt.Sprintf("job-%03d", i), h.succeed))
		}
		return defs
	})
	// The first round is fired with the step known then, and takes 80 ms
	// per fire of fireBatch.
	tick := t0.Add(time.Minute)
	h.advanceTo(tick)
	handledOnceEach(h, n, tick)
	h.attemptsDone(n)
	if got := h.s.Metrics().FireBatch; got != took {
		t.Fatalf("fire of %d measured as %s, want %s", fireBatch, got, took)
	}

	tick = tick.Add(time.Minute)
	ofTick := func() int {
		k := 0
		for _, r := range h.runs("") {
			if r.ScheduledAt.Equal(tick) {
				k++
			}
		}
		return k
	}
	h.advanceTo(tick.Add(-lead - 3*step - time.Millisecond))
	if k := ofTick(); k != 0 {
		t.Fatalf("%d runs of the tick before the round's lead", k)
	}
	for i, want := range []int{100, 100 + fireBatch, 100 + 2*fireBatch, n} {
		at := tick.Add(-lead - time.Duration(3-i)*step)
		h.advanceTo(at)
		if k := ofTick(); k != want {
			t.Fatalf("%s before the tick: %d runs of it, want %d", tick.Sub(at), k, want)
		}
	}
	h.advanceTo(tick)
	handledOnceEach(h, n, tick)
	h.attemptsDone(n)
	for _, r := range h.runs("") {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Fatalf("run %s of %s (tick %s) is %s at attempt %d", r.ID, r.Job, r.ScheduledAt, r.Status, r.Attempt)
		}
	}
}
