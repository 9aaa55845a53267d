package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// describeRun formats the fields of a run that a change of status or a
// fire decides, without its id and job, so that two runs made alike can be
// compared.
func describeRun(r *jobs.Run) string {
	if r == nil {
		return "<nil>"
	}
	exit := "nil"
	if r.ExitCode != nil {
		exit = fmt.Sprint(*r.ExitCode)
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	return fmt.Sprintf("status=%s reason=%s attempt=%d/%d trigger=%s node=%q inc=%q exit=%s error=%q "+
		"scheduled=%s not_before=%s not_after=%s created=%s started=%s finished=%s cancel=%v progress=%d %q "+
		"dedup=%q rerun_of=%q payload=%q retry=%+v no_retry=%v",
		r.Status, r.Reason, r.Attempt, r.MaxAttempts, r.Trigger, r.Node, r.Incarnation, exit, r.Error,
		ts(r.ScheduledAt), ts(r.NotBefore), ts(r.NotAfter), ts(r.CreatedAt), ts(r.StartedAt), ts(r.FinishedAt),
		r.CancelRequested, r.Progress, r.ProgressMessage, r.DedupID, r.RerunOf, r.Payload, r.Retry, r.NoRetryExitCodes)
}

// describeEvents formats a run's history without the run's id.
func describeEvents(evs []*jobs.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s %s #%d %s->%s %s %q\n", e.Time.UTC().Format(time.RFC3339Nano), e.Node, e.Attempt,
			e.From, e.To, e.Reason, e.Message)
	}
	return b.String()
}

// describeAttempts formats a run's attempts without the run's id.
func describeAttempts(t *testing.T, s store.Store, id string) string {
	t.Helper()
	as, err := s.RunAttempts(t.Context(), id)
	if err != nil {
		t.Fatalf("RunAttempts(%s): %v", id, err)
	}
	var b strings.Builder
	for _, a := range as {
		exit := "nil"
		if a.ExitCode != nil {
			exit = fmt.Sprint(*a.ExitCode)
		}
		fmt.Fprintf(&b, "#%d %s %s %s %s-%s exit=%s error=%q reason=%s output=%q bytes=%d truncated=%v\n",
			a.Number, a.Node, a.Incarnation, a.Status, a.StartedAt.UTC().Format(time.RFC3339Nano),
			a.FinishedAt.UTC().Format(time.RFC3339Nano), exit, a.Error, a.Reason, a.Output, a.OutputBytes, a.Truncated)
	}
	return b.String()
}

// sameDescription fails t when two descriptions differ.
func sameDescription(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// transitionFixture is a set of runs in the states a batch of transitions
// meets: a, b and c running, d pending, done completed.
type transitionFixture struct {
	a, b, c, d, done *jobs.Run
}

func newTransitionFixture(t *testing.T, s store.Store, prefix string) transitionFixture {
	t.Helper()
	var f transitionFixture
	for _, r := range []struct {
		run **jobs.Run
		job string
	}{{&f.a, "a"}, {&f.b, "b"}, {&f.c, "c"}, {&f.done, "done"}} {
		mustInsert(t, s, manual(prefix+r.job, t0))
		*r.run = claimOne(t, s, prefix+r.job, incA, t0.Add(time.Second))
	}
	f.d = mustInsert(t, s, manual(prefix+"d", t0))
	f.done = complete(t, s, f.done, t0.Add(2*time.Second))
	return f
}

// mixedBatch returns transitions of every outcome over f and the error each
// must get (nil: applied).
func mixedBatch(f transitionFixture) ([]jobs.Transition, []error) {
	at := func(i int) time.Time { return t0.Add(time.Minute + time.Duration(i)*time.Second) }
	ok := jobs.Result{ExitCode: ptr(0), Output: "fine\n", OutputBytes: 5}
	lost := jobs.Result{Err: errors.New("node lost")}
	stale := fenceOf(f.b)
	stale.Attempt++
	ts := []jobs.Transition{
		jobs.Complete(fenceOf(f.a), nodeB, ok, at(0)),
		jobs.Complete(stale, nodeB, ok, at(1)),
		jobs.Cancel(f.c.ID, nodeA, jobs.ReasonCancelled, at(2)), // running: needs its fence
		jobs.Complete(jobs.Fence{RunID: "no-such-run", Attempt: 1, Incarnation: incA}, nodeB, ok, at(3)),
		jobs.FailAttempt(f.c, fenceOf(f.c), nodeA, lost, jobs.ReasonNodeLost, at(4), nil),
		jobs.Cancel(f.c.ID, nodeA, jobs.ReasonCancelled, at(5)), // retrying now: allowed
		jobs.Complete(fenceOf(f.a), nodeB, ok, at(6)),           // a finished at item 0
		jobs.Cancel(f.d.ID, nodeA, jobs.ReasonCancelled, at(7)),
		jobs.Cancel(f.d.ID, nodeA, jobs.ReasonCancelled, at(8)), // cancelled at item 7
		jobs.Complete(fenceOf(f.done), nodeB, ok, at(9)),
		{RunID: f.d.ID, To: jobs.StatusPending, Reason: jobs.ReasonCreated, Time: at(10)},
		jobs.Complete(fenceOf(f.b), nodeB, ok, at(11)), // b is untouched by item 1
	}
	errs := []error{nil, store.ErrFenced, jobs.ErrInvalidTransition, store.ErrNotFound, nil, nil,
		store.ErrFenced, nil, jobs.ErrInvalidTransition, store.ErrFenced, jobs.ErrInvalidTransition, nil}
	return ts, errs
}

// testTransitionsBatch: a batch mixing valid, fenced, invalid and unknown
// transitions, two of them on the same run, gives each the result that
// RunTransition gives it one by one, and writes only the valid ones.
func testTransitionsBatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	one := newTransitionFixture(t, s, "one-")
	many := newTransitionFixture(t, s, "many-")

	singleTs, wantErrs := mixedBatch(one)
	batchTs, _ := mixedBatch(many)
	results := oneByOneAndBatch(t, s, singleTs, batchTs, wantErrs, nil)
	wantStatus(t, results[0].Run, jobs.StatusCompleted, jobs.ReasonSucceeded)
	wantStatus(t, results[4].Run, jobs.StatusRetrying, jobs.ReasonNodeLost)
	wantStatus(t, results[5].Run, jobs.StatusCancelled, jobs.ReasonCancelled)
	wantStatus(t, results[7].Run, jobs.StatusCancelled, jobs.ReasonCancelled)
	wantStatus(t, results[11].Run, jobs.StatusCompleted, jobs.ReasonSucceeded)

	// The stored runs, their attempts and histories are those of the one by
	// one path, and each run is what its last result said.
	last := map[string]*jobs.Run{}
	for _, r := range results {
		if r.Run != nil {
			last[r.Run.ID] = r.Run
		}
	}
	sameAsOneByOne(t, s, [][2]*jobs.Run{{one.a, many.a}, {one.b, many.b}, {one.c, many.c}, {one.d, many.d},
		{one.done, many.done}}, last)
	if n := len(mustEvents(t, s, many.c.ID)); n != 4 {
		t.Fatalf("run c has %d events, want 4 (created, claimed, retrying, cancelled)", n)
	}
	if n := len(mustEvents(t, s, many.done.ID)); n != 3 {
		t.Fatalf("the finished run has %d events, want 3", n)
	}

	// An empty batch does nothing; a zero time is the store's clock.
	if res, err := s.RunTransitionMany(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("RunTransitionMany(nil) = %v, %v", res, err)
	}
	mustInsert(t, s, manual("clock", t0))
	run := claimOne(t, s, "clock", incA, t0)
	before := time.Now()
	res, err := s.RunTransitionMany(ctx, []jobs.Transition{jobs.Complete(fenceOf(run), nodeB, jobs.Result{ExitCode: ptr(0)}, time.Time{})})
	if err != nil || res[0].Err != nil {
		t.Fatalf("RunTransitionMany at the store's clock: %v, %+v", err, res)
	}
	if got := res[0].Run.FinishedAt; got.Before(before.Add(-10*time.Second)) || got.After(time.Now().Add(10*time.Second)) {
		t.Fatalf("finished at %s, want about %s", got, before)
	}
	sameDescription(t, "run finished at the store's clock", describeRun(res[0].Run), describeRun(mustGet(t, s, run.ID)))
}

// testTransitionsBatchDistinct: a batch with one transition per run, of
// every outcome, gives each the result that RunTransition gives it one by
// one, in the batch's order, and writes only the valid ones. (A store may
// write the ends of attempts that such a batch holds in another way than
// the rest: see the PostgreSQL store's endAttempts.)
func testTransitionsBatchDistinct(t *testing.T, s store.Store) {
	ctx := t.Context()
	type fixture struct {
		transitionFixture
		e, f, g *jobs.Run
	}
	build := func(prefix string) ([]jobs.Transition, fixture) {
		fx := fixture{transitionFixture: newTransitionFixture(t, s, prefix)}
		for _, r := range []struct {
			run **jobs.Run
			job string
		}{{&fx.e, "e"}, {&fx.f, "f"}, {&fx.g, "g"}} {
			mustInsert(t, s, manual(prefix+r.job, t0))
			*r.run = claimOne(t, s, prefix+r.job, incA, t0.Add(time.Second))
		}
		at := func(i int) time.Time { return t0.Add(time.Minute + time.Duration(i)*time.Second) }
		ok := jobs.Result{ExitCode: ptr(0), Output: "fine\n", OutputBytes: 5}
		stale := fenceOf(fx.b)
		stale.Attempt++
		notRunning := jobs.Fence{RunID: fx.d.ID, Attempt: 1, Incarnation: incA}
		onlyPending := jobs.Complete(fenceOf(fx.f), nodeB, ok, at(7))
		onlyPending.From = []jobs.Status{jobs.StatusPending}
		gFence := fenceOf(fx.g)
		return []jobs.Transition{
			jobs.Complete(fenceOf(fx.a), nodeB, ok, at(0)),
			jobs.Complete(stale, nodeB, ok, at(1)),
			jobs.FailAttempt(fx.c, fenceOf(fx.c), nodeA, jobs.Result{Err: errors.New("node lost")}, jobs.ReasonNodeLost, at(2), nil),
			jobs.Complete(jobs.Fence{RunID: prefix + "no-such-run", Attempt: 1, Incarnation: incA}, nodeB, ok, at(3)),
			jobs.Complete(notRunning, nodeB, ok, at(4)),
			jobs.Complete(fenceOf(fx.done), nodeB, ok, at(5)),
			jobs.Finish(fx.e, fenceOf(fx.e), nodeB, jobs.Result{Reason: jobs.ReasonCancelled, ExitCode: ptr(143)}, at(6), nil),
			onlyPending,
			{RunID: fx.g.ID, Fence: &gFence, To: jobs.StatusDeadLetter, Reason: jobs.ReasonFailed, Error: "boom",
				ExitCode: ptr(3), Node: nodeB, Time: at(8), Output: "out", OutputBytes: 3},
		}, fx
	}
	wantErrs := []error{nil, store.ErrFenced, nil, store.ErrNotFound, store.ErrFenced, store.ErrFenced, nil,
		jobs.ErrInvalidTransition, nil}
	wantTo := map[int]jobs.Status{0: jobs.StatusCompleted, 2: jobs.StatusRetrying, 6: jobs.StatusCancelled, 8: jobs.StatusDeadLetter}

	singleTs, one := build("d1-")
	batchTs, many := build("dn-")
	results := oneByOneAndBatch(t, s, singleTs, batchTs, wantErrs, func(i int, got *jobs.Run) {
		if got.ID != batchTs[i].RunID || got.Status != wantTo[i] {
			t.Fatalf("item %d: run %s is %s, want run %s %s", i, got.ID, got.Status, batchTs[i].RunID, wantTo[i])
		}
		sameDescription(t, fmt.Sprintf("item %d as stored", i), describeRun(mustGet(t, s, got.ID)), describeRun(got))
	})
	if r := results[8].Run; r.Error != "boom" || r.ExitCode == nil || *r.ExitCode != 3 || r.FinishedAt.IsZero() {
		t.Fatalf("the dead-lettered run: error %q, exit %v, finished %s", r.Error, r.ExitCode, r.FinishedAt)
	}

	// Stored runs, histories and attempts are those of the one by one path;
	// the runs that a transition was refused for are untouched.
	sameAsOneByOne(t, s, [][2]*jobs.Run{{one.a, many.a}, {one.b, many.b}, {one.c, many.c}, {one.d, many.d},
		{one.done, many.done}, {one.e, many.e}, {one.f, many.f}, {one.g, many.g}}, nil)
	for _, r := range []*jobs.Run{many.b, many.f} {
		if got := mustGet(t, s, r.ID); got.Status != jobs.StatusRunning || got.Attempt != r.Attempt {
			t.Fatalf("run %s, whose transition was refused, is %s at attempt %d", got.Job, got.Status, got.Attempt)
		}
	}
	for _, r := range []*jobs.Run{many.a, many.e, many.g} {
		evs := mustEvents(t, s, r.ID)
		if len(evs) != 3 || evs[1].To != jobs.StatusRunning || evs[2].From != jobs.StatusRunning || evs[2].Node != nodeB {
			t.Fatalf("events of %s:\n%s", r.Job, describeEvents(evs))
		}
		as, err := s.RunAttempts(ctx, r.ID)
		if err != nil || len(as) != 1 || as[0].Number != 1 || as[0].Status != evs[2].To {
			t.Fatalf("attempts of %s: %v\n%s", r.Job, err, describeAttempts(t, s, r.ID))
		}
	}
	if got := describeAttempts(t, s, many.g.ID); !strings.Contains(got, `output="out" bytes=3`) {
		t.Fatalf("attempts of the dead-lettered run: %s", got)
	}
}

// testTransitionsBatchMany: a claim of 1,000 runs completed in one batch.
func testTransitionsBatchMany(t *testing.T, s store.Store) {
	const n = 1000
	ctx := t.Context()
	ps := make([]store.RunInsertParams, n)
	for i := range ps {
		ps[i] = manual("bulk", t0.Add(time.Duration(i)*time.Millisecond))
	}
	if _, err := s.RunInsertMany(ctx, ps); err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	claimed := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"bulk": 0}), Limit: n, Now: t0.Add(time.Minute)})
	if len(claimed) != n {
		t.Fatalf("claimed %d runs, want %d", len(claimed), n)
	}
	ts := make([]jobs.Transition, n)
	for i, r := range claimed {
		ts[i] = jobs.Complete(fenceOf(r), nodeB, jobs.Result{ExitCode: ptr(0)}, t0.Add(2*time.Minute))
	}
	results, err := s.RunTransitionMany(ctx, ts)
	if err != nil {
		t.Fatalf("RunTransitionMany: %v", err)
	}
	for i, r := range results {
		if r.Err != nil || r.Run == nil || r.Run.ID != claimed[i].ID {
			t.Fatalf("result %d: %+v", i, r)
		}
		wantStatus(t, r.Run, jobs.StatusCompleted, jobs.ReasonSucceeded)
	}
	done, err := s.RunsList(ctx, store.RunFilter{Job: "bulk", Status: jobs.StatusCompleted, Limit: 2 * n})
	if err != nil || len(done) != n {
		t.Fatalf("RunsList(completed) = %d runs, %v; want %d", len(done), err, n)
	}
	for _, r := range claimed {
		evs := mustEvents(t, s, r.ID)
		if len(evs) != 3 || evs[2].To != jobs.StatusCompleted || evs[2].From != jobs.StatusRunning || evs[2].Attempt != 1 {
			t.Fatalf("events of %s:\n%s", r.ID, describeEvents(evs))
		}
	}
	for _, r := range claimed[:10] {
		if got := describeAttempts(t, s, r.ID); !strings.Contains(got, " completed ") {
			t.Fatalf("attempts of %s: %s", r.ID, got)
		}
	}
}

// testTransitionsBatchConcurrent: batches from several goroutines race on
// the same running runs, in different orders; each run ends with exactly
// one outcome and the others are fenced.
func testTransitionsBatchConcurrent(t *testing.T, s store.Store) {
	const n, workers, batch = 120, 4, 40
	ctx := t.Context()
	ps := make([]store.RunInsertParams, n)
	for i := range ps {
		ps[i] = manual("race", t0.Add(time.Duration(i)*time.Millisecond))
	}
	if _, err := s.RunInsertMany(ctx, ps); err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	claimed := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"race": 0}), Limit: n, Now: t0.Add(time.Minute)})
	if len(claimed) != n {
		t.Fatalf("claimed %d runs, want %d", len(claimed), n)
	}
	at := t0.Add(2 * time.Minute)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won = map[string][]jobs.Status{}
	)
	for w := range workers {
		runs := slices.Clone(claimed)
		rand.New(rand.NewPCG(uint64(w), 7)).Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		wg.Go(func() {
			for chunk := range slices.Chunk(runs, batch) {
				ts := make([]jobs.Transition, len(chunk))
				for i, r := range chunk {
					if w%2 == 0 {
						ts[i] = jobs.Complete(fenceOf(r), nodeB, jobs.Result{ExitCode: ptr(0)}, at)
					} else {
						ts[i] = jobs.FailAttempt(r, fenceOf(r), nodeA, jobs.Result{}, jobs.ReasonNodeLost, at, nil)
					}
				}
				results, err := s.RunTransitionMany(ctx, ts)
				if err != nil {
					t.Errorf("worker %d: RunTransitionMany: %v", w, err)
					return
				}
				mu.Lock()
				for i, r := range results {
					switch {
					case r.Err == nil:
						won[chunk[i].ID] = append(won[chunk[i].ID], r.Run.Status)
					case !errors.Is(r.Err, store.ErrFenced):
						t.Errorf("worker %d: run %s: %v", w, chunk[i].ID, r.Err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, r := range claimed {
		outcomes := won[r.ID]
		if len(outcomes) != 1 {
			t.Fatalf("run %s: %d transitions won (%v), want 1", r.ID, len(outcomes), outcomes)
		}
		got := mustGet(t, s, r.ID)
		if got.Status != outcomes[0] {
			t.Fatalf("run %s is %s, the winning transition made it %s", r.ID, got.Status, outcomes[0])
		}
		if evs := mustEvents(t, s, r.ID); len(evs) != 3 || evs[2].To != got.Status {
			t.Fatalf("events of %s:\n%s", r.ID, describeEvents(evs))
		}
	}
}

// describeFire formats what a fire did, without ids and job names.
func describeFire(res *store.FireResult) string {
	if res == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "advanced=%v duplicates=%d skipped_overlap=%d\n", res.Advanced, res.Duplicates, res.SkippedOverlap)
	for _, r := range res.Created {
		fmt.Fprintf(&b, "created %s\n", describeRun(r))
	}
	for _, r := range res.Replaced {
		fmt.Fprintf(&b, "replaced %s\n", describeRun(r))
	}
	if c := res.Cursor; c != nil {
		fmt.Fprintf(&b, "cursor last=%s paused=%v skipped=%d last_skipped=%s updated=%s\n",
			c.Last.UTC().Format(time.RFC3339Nano), c.Paused, c.Skipped,
			c.LastSkippedAt.UTC().Format(time.RFC3339Nano), c.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// fireKinds is the number of situations fireFixture sets up, one per job in turn.
const fireKinds = 8

// fireFixture sets up job i of a batch in situation i%fireKinds and
// returns the fire to apply to it.
func fireFixture(t *testing.T, s store.Store, job string, i int) store.FireParams {
	t.Helper()
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	p := store.FireParams{Job: job, Expect: t0, Cursor: t1, Runs: []store.RunInsertParams{tick(job, t1)},
		Overlap: jobs.OverlapAllow, Node: nodeA, Now: t1.Add(time.Second)}
	if i%fireKinds != 0 {
		fireOne(t, s, job, time.Time{}, t0, jobs.OverlapAllow)
	}
	switch i % fireKinds {
	case 0: // no cursor yet: it is made; a run with every field set
		p.Expect = time.Time{}
		p.Skipped, p.LastSkipped = 1, t0
		r := &p.Runs[0]
		r.NotBefore = t1.Add(1500 * time.Nanosecond) // kept to the microsecond
		r.NotAfter, r.DedupID, r.Payload, r.NoRetryExitCodes = t1.Add(time.Hour), "d", "pay\x00load", []int{2, 3}
	case 1: // a tick that has its run, two new ones, skipped ticks counted
		p.Cursor = t3
		p.Runs = []store.RunInsertParams{tick(job, t0), tick(job, t2), tick(job, t3)}
		p.Skipped, p.LastSkipped = 2, t1
	case 2: // overlap skip over a pending run
		p.Overlap = jobs.OverlapSkip
	case 3: // overlap replace of a running run: it is asked to stop
		claimOne(t, s, job, incA, t0)
		p.Overlap = jobs.OverlapReplace
	case 4: // overlap replace of a pending run: it is cancelled
		p.Overlap = jobs.OverlapReplace
	case 5: // a stale Expect
		p.Expect = t0.Add(-time.Minute)
	case 6: // a paused schedule
		if _, err := s.SchedulePause(t.Context(), job, true, t0); err != nil {
			t.Fatal(err)
		}
	case 7: // overlap skip with nothing active, and a tick listed twice:
		// the older tick runs, the newer is skipped (OneTickAtATime)
		claimed := claimOne(t, s, job, incA, t0)
		complete(t, s, claimed, t0.Add(time.Second))
		p.Overlap = jobs.OverlapSkip
		p.Cursor = t2
		p.Runs = []store.RunInsertParams{tick(job, t1), tick(job, t2), tick(job, t2)}
	}
	return p
}

// testFiresBatch: a batch of fires for 100 jobs in every situation gives
// each fire the result ScheduleFire gives it, and writes what it writes.
func testFiresBatch(t *testing.T, s store.Store) {
	const n = 100
	ctx := t.Context()
	var singles, batch []store.FireParams
	for i := range n {
		singles = append(singles, fireFixture(t, s, fmt.Sprintf("one-%03d", i), i))
		batch = append(batch, fireFixture(t, s, fmt.Sprintf("many-%03d", i), i))
	}
	want := make([]*store.FireResult, n)
	for i, p := range singles {
		want[i] = mustFire(t, s, p)
	}
	got, err := s.ScheduleFireMany(ctx, batch)
	if err != nil {
		t.Fatalf("ScheduleFireMany: %v", err)
	}
	if len(got) != n {
		t.Fatalf("%d results for %d fires", len(got), n)
	}
	for i := range n {
		sameDescription(t, "fire of "+batch[i].Job, describeFire(got[i]), describeFire(want[i]))
		res := got[i]
		var ok bool
		switch i % fireKinds {
		case 0:
			ok = res.Advanced && len(res.Created) == 1 && res.Cursor.Skipped == 1
		case 1:
			ok = res.Advanced && len(res.Created) == 2 && res.Duplicates == 1 && res.Cursor.Skipped == 2
		case 2:
			ok = res.Advanced && len(res.Created) == 0 && res.SkippedOverlap == 1 && res.Cursor.Skipped == 1
		case 3:
			ok = res.Advanced && len(res.Created) == 1 && len(res.Replaced) == 1 && res.Replaced[0].CancelRequested &&
				res.Replaced[0].Status == jobs.StatusRunning
		case 4:
			ok = res.Advanced && len(res.Created) == 1 && len(res.Replaced) == 1 && res.Replaced[0].Status == jobs.StatusCancelled
		case 5:
			ok = !res.Advanced && len(res.Created) == 0 && res.Cursor.Last.Equal(t0)
		case 6:
			ok = !res.Advanced && len(res.Created) == 0 && res.Cursor.Paused
		case 7:
			ok = res.Advanced && len(res.Created) == 1 && res.Duplicates == 1 && res.SkippedOverlap == 1
		}
		if !ok {
			t.Fatalf("fire of %s (situation %d):\n%s", batch[i].Job, i%fireKinds, describeFire(res))
		}
	}

	// The stored state is that of the one by one path.
	cursorsOf := func(prefix string) []string {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%03d", prefix, i)
		}
		cursors, err := s.ScheduleCursors(ctx, names)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, n)
		for i, name := range names {
			out[i] = describeFire(&store.FireResult{Cursor: cursors[name]})
		}
		return out
	}
	wantCursors, gotCursors := cursorsOf("one"), cursorsOf("many")
	for i := range n {
		sameDescription(t, "cursor of "+batch[i].Job, gotCursors[i], wantCursors[i])
		sameDescription(t, "cursor in the result of "+batch[i].Job, describeFire(&store.FireResult{Cursor: got[i].Cursor}), gotCursors[i])
		for _, r := range append(slices.Clone(got[i].Created), got[i].Replaced...) {
			sameDescription(t, "a run in the result of "+batch[i].Job, describeRun(r), describeRun(mustGet(t, s, r.ID)))
		}
		wantRuns, gotRuns := listRuns(t, s, singles[i].Job), listRuns(t, s, batch[i].Job)
		if len(gotRuns) != len(wantRuns) {
			t.Fatalf("%s has %d runs, want %d", batch[i].Job, len(gotRuns), len(wantRuns))
		}
		for k := range gotRuns {
			sameDescription(t, "run of "+batch[i].Job, describeRun(gotRuns[k]), describeRun(wantRuns[k]))
			sameDescription(t, "events of a run of "+batch[i].Job,
				describeEvents(mustEvents(t, s, gotRuns[k].ID)), describeEvents(mustEvents(t, s, wantRuns[k].ID)))
		}
		for at, count := range runsPerTick(t, s, batch[i].Job) {
			if count != 1 {
				t.Fatalf("%s: tick %s has %d runs", batch[i].Job, at.Format(time.TimeOnly), count)
			}
		}
	}
	if res, err := s.ScheduleFireMany(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("ScheduleFireMany(nil) = %v, %v", res, err)
	}
}

// testFiresBatchCAS: a lost compare-and-set is that item's result only; a
// job fired twice in one batch sees its first fire; an error fails the
// whole batch, which then writes nothing.
func testFiresBatchCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	for _, job := range []string{"x", "y", "z"} {
		fireOne(t, s, job, time.Time{}, t0, jobs.OverlapAllow)
	}
	fire := func(job string, expect, at time.Time) store.FireParams {
		return store.FireParams{Job: job, Expect: expect, Cursor: at, Runs: []store.RunInsertParams{tick(job, at)},
			Overlap: jobs.OverlapAllow, Node: nodeA, Now: at}
	}
	res, err := s.ScheduleFireMany(ctx, []store.FireParams{
		fire("x", t0, t1),
		fire("y", t0.Add(-time.Minute), t1), // stale
		fire("z", t0, t1),
		fire("new", time.Time{}, t1),
		fire("new", t1, t2), // sees the cursor the item before made
		fire("x", t0, t2),   // stale: the first item moved it
	})
	if err != nil {
		t.Fatalf("ScheduleFireMany: %v", err)
	}
	for i, want := range []bool{true, false, true, true, true, false} {
		if res[i].Advanced != want || (len(res[i].Created) == 1) != want {
			t.Fatalf("item %d: %s", i, describeFire(res[i]))
		}
	}
	wantTime(t, "cursor of the stale item", res[1].Cursor.Last, t0)
	wantTime(t, "cursor of x after its lost second fire", res[5].Cursor.Last, t1)
	cursors, err := s.ScheduleCursors(ctx, []string{"x", "y", "z", "new"})
	if err != nil {
		t.Fatal(err)
	}
	for job, last := range map[string]time.Time{"x": t1, "y": t0, "z": t1, "new": t2} {
		if c := cursors[job]; c == nil || !c.Last.Equal(last) {
			t.Fatalf("cursor of %s: %+v, want last %s", job, c, last)
		}
		if got, want := len(listRuns(t, s, job)), map[string]int{"x": 2, "y": 1, "z": 2, "new": 2}[job]; got != want {
			t.Fatalf("%s has %d runs, want %d", job, got, want)
		}
	}

	// A fire that cannot be applied fails the batch: nothing is written.
	bad := fire("y", t0, t1)
	bad.Runs[0].NotAfter = t0 // before its not_before
	for _, ps := range [][]store.FireParams{
		{fire("z", t1, t2), bad},
		{fire("z", t1, t2), {Job: "y", Expect: t0}}, // no new cursor
	} {
		if _, err := s.ScheduleFireMany(ctx, ps); err == nil {
			t.Fatalf("ScheduleFireMany with a bad item: no error")
		}
		cursors, err := s.ScheduleCursors(ctx, []string{"y", "z"})
		if err != nil {
			t.Fatal(err)
		}
		if !cursors["y"].Last.Equal(t0) || !cursors["z"].Last.Equal(t1) || len(listRuns(t, s, "z")) != 2 || len(listRuns(t, s, "y")) != 1 {
			t.Fatalf("a failed batch wrote: cursors %+v %+v", cursors["y"], cursors["z"])
		}
	}
}

// testFiresBatchConcurrent: batches over the same jobs, in different
// orders, fired at once: each job advances once per tick, with one run.
func testFiresBatchConcurrent(t *testing.T, s store.Store) {
	const jobsN, workers, rounds = 40, 4, 3
	ctx := t.Context()
	names := make([]string, jobsN)
	for i := range names {
		names[i] = fmt.Sprintf("cron-%02d", i)
	}
	expect := time.Time{}
	for round := range rounds {
		at := t0.Add(time.Duration(round) * time.Minute)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			advanced = map[string]int{}
			created  = map[string]int{}
		)
		for w := range workers {
			order := slices.Clone(names)
			rand.New(rand.NewPCG(uint64(round), uint64(w))).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			ps := make([]store.FireParams, len(order))
			for i, job := range order {
				ps[i] = store.FireParams{Job: job, Expect: expect, Cursor: at, Runs: []store.RunInsertParams{tick(job, at)},
					Overlap: jobs.OverlapAllow, Node: fmt.Sprintf("node-%d", w), Now: at}
			}
			wg.Go(func() {
				res, err := s.ScheduleFireMany(ctx, ps)
				if err != nil {
					t.Errorf("round %d, worker %d: ScheduleFireMany: %v", round, w, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, r := range res {
					if r.Advanced {
						advanced[ps[i].Job]++
						created[ps[i].Job] += len(r.Created)
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for _, job := range names {
			if advanced[job] != 1 || created[job] != 1 {
				t.Fatalf("round %d: %s advanced %d times and made %d runs; want 1 and 1", round, job, advanced[job], created[job])
			}
		}
		expect = at
	}
	for _, job := range names {
		perTick := runsPerTick(t, s, job)
		if len(perTick) != rounds {
			t.Fatalf("%s has runs at %d ticks, want %d", job, len(perTick), rounds)
		}
		for at, count := range perTick {
			if count != 1 {
				t.Fatalf("%s: tick %s has %d runs", job, at.Format(time.TimeOnly), count)
			}
		}
	}
}

// oneByOneAndBatch applies singleTs one by one with RunTransition and
// batchTs (the same transitions on twin runs) in one RunTransitionMany, and
// checks that item i of both gives wantErrs[i], a refused item no run,
// and an applied one the same run both ways; also, when given, calls
// applied with each run the batch applied, before that comparison. It
// returns the batch's results.
func oneByOneAndBatch(t *testing.T, s store.Store, singleTs, batchTs []jobs.Transition, wantErrs []error,
	applied func(i int, got *jobs.Run)) []store.TransitionResult {
	t.Helper()
	ctx := t.Context()
	singles := make([]store.TransitionResult, len(singleTs))
	for i, tr := range singleTs {
		singles[i].Run, singles[i].Err = s.RunTransition(ctx, tr)
	}
	results, err := s.RunTransitionMany(ctx, batchTs)
	if err != nil {
		t.Fatalf("RunTransitionMany: %v", err)
	}
	if len(results) != len(batchTs) {
		t.Fatalf("%d results for %d transitions", len(results), len(batchTs))
	}
	for i, want := range wantErrs {
		single, got := singles[i], results[i]
		if want == nil {
			if single.Err != nil || got.Err != nil {
				t.Fatalf("item %d: errors %v (one by one) and %v (batch), want none", i, single.Err, got.Err)
			}
			if applied != nil {
				applied(i, got.Run)
			}
			sameDescription(t, fmt.Sprintf("item %d", i), describeRun(got.Run), describeRun(single.Run))
			continue
		}
		if !errors.Is(single.Err, want) || !errors.Is(got.Err, want) {
			t.Fatalf("item %d: errors %v (one by one) and %v (batch), want %v", i, single.Err, got.Err, want)
		}
		if got.Run != nil {
			t.Fatalf("item %d: a result with error %v has a run", i, got.Err)
		}
	}
	return results
}

// sameAsOneByOne checks that each pair's second run (written by a batch)
// is stored, with its events and attempts, as its first (written one by
// one), and, where last has it, as the batch's last result for it said.
func sameAsOneByOne(t *testing.T, s store.Store, pairs [][2]*jobs.Run, last map[string]*jobs.Run) {
	t.Helper()
	for _, p := range pairs {
		want, got := mustGet(t, s, p[0].ID), mustGet(t, s, p[1].ID)
		sameDescription(t, "stored run "+got.Job, describeRun(got), describeRun(want))
		if r := last[got.ID]; r != nil {
			sameDescription(t, "last result of "+got.Job, describeRun(r), describeRun(got))
		}
		sameDescription(t, "events of "+got.Job, describeEvents(mustEvents(t, s, got.ID)), describeEvents(mustEvents(t, s, want.ID)))
		sameDescription(t, "attempts of "+got.Job, describeAttempts(t, s, got.ID), describeAttempts(t, s, want.ID))
	}
}
