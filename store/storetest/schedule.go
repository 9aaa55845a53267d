package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testFireOccurrenceOnce: a tick makes one run, however often it is fired,
// also after its run finished and after that run was pruned.
func testFireOccurrenceOnce(t *testing.T, s store.Store) {
	t1, t2, t3 := t0, t0.Add(time.Minute), t0.Add(2*time.Minute)
	res := mustFire(t, s, store.FireParams{Job: "backup", Cursor: t1, Runs: []store.RunInsertParams{tick("backup", t1)},
		Overlap: jobs.OverlapAllow, Node: nodeA, Now: t1})
	if !res.Advanced || len(res.Created) != 1 || res.Duplicates != 0 {
		t.Fatalf("first fire: advanced %v, created %d, duplicates %d", res.Advanced, len(res.Created), res.Duplicates)
	}
	first := res.Created[0]
	if first.Trigger != jobs.TriggerSchedule || !first.ScheduledAt.Equal(t1) || first.Status != jobs.StatusPending {
		t.Fatalf("first run: %+v", first)
	}
	wantTime(t, "cursor last", res.Cursor.Last, t1)

	// The same tick fired again, together with a new one, before the run ends.
	res = mustFire(t, s, store.FireParams{Job: "backup", Expect: t1, Cursor: t1,
		Runs: []store.RunInsertParams{tick("backup", t1)}, Overlap: jobs.OverlapAllow, Now: t1.Add(time.Second)})
	if !res.Advanced || len(res.Created) != 0 || res.Duplicates != 1 {
		t.Fatalf("refire: advanced %v, created %d, duplicates %d", res.Advanced, len(res.Created), res.Duplicates)
	}

	// After the run finished: still a duplicate.
	run := claimOne(t, s, "backup", incA, t1.Add(2*time.Second))
	complete(t, s, run, t1.Add(3*time.Second))
	res = mustFire(t, s, store.FireParams{Job: "backup", Expect: t1, Cursor: t1,
		Runs: []store.RunInsertParams{tick("backup", t1)}, Overlap: jobs.OverlapAllow, Now: t1.Add(4 * time.Second)})
	if len(res.Created) != 0 || res.Duplicates != 1 {
		t.Fatalf("refire after completion: created %d, duplicates %d", len(res.Created), res.Duplicates)
	}

	// After its run was pruned: still a duplicate.
	n, err := s.RunsPrune(t.Context(), t1.Add(5*time.Second))
	if err != nil || n != 1 {
		t.Fatalf("RunsPrune = %d, %v; want 1", n, err)
	}
	res = mustFire(t, s, store.FireParams{Job: "backup", Expect: t1, Cursor: t3,
		Runs:    []store.RunInsertParams{tick("backup", t1), tick("backup", t2), tick("backup", t3)},
		Overlap: jobs.OverlapAllow, Now: t3})
	if !res.Advanced || len(res.Created) != 2 || res.Duplicates != 1 {
		t.Fatalf("refire after prune: advanced %v, created %d, duplicates %d", res.Advanced, len(res.Created), res.Duplicates)
	}
	// A tick listed twice in one fire makes one run.
	t4 := t0.Add(3 * time.Minute)
	res = mustFire(t, s, store.FireParams{Job: "backup", Expect: t3, Cursor: t4,
		Runs: []store.RunInsertParams{tick("backup", t3), tick("backup", t4), tick("backup", t4)}, Overlap: jobs.OverlapAllow, Now: t4})
	if len(res.Created) != 1 || res.Duplicates != 2 {
		t.Fatalf("fire with a repeated tick: created %d, duplicates %d", len(res.Created), res.Duplicates)
	}
	// RunInsert of a schedule run is held to the same key.
	_, err = s.RunInsert(t.Context(), tick("backup", t2))
	wantErr(t, err, store.ErrDuplicate)

	perTick := runsPerTick(t, s, "backup")
	for _, at := range []time.Time{t2, t3, t4} {
		if perTick[at] != 1 {
			t.Errorf("tick %s has %d runs, want 1", at.Format(time.TimeOnly), perTick[at])
		}
	}
	if perTick[t1] != 0 {
		t.Errorf("pruned tick %s has %d runs, want 0", t1.Format(time.TimeOnly), perTick[t1])
	}
}

// testFireConcurrent: many nodes firing the same tick with the same Expect:
// one advances, one run per tick.
func testFireConcurrent(t *testing.T, s store.Store) {
	const n = 8
	expect := time.Time{}
	for round := range 3 {
		at := t0.Add(time.Duration(round) * time.Minute)
		var wg sync.WaitGroup
		results := make([]*store.FireResult, n)
		for i := range n {
			wg.Go(func() {
				res, err := s.ScheduleFire(t.Context(), store.FireParams{Job: "report", Expect: expect, Cursor: at,
					Runs: []store.RunInsertParams{tick("report", at)}, Overlap: jobs.OverlapAllow, Node: nodeA, Now: at})
				if err != nil {
					t.Errorf("round %d: ScheduleFire: %v", round, err)
				}
				results[i] = res
			})
		}
		wg.Wait()
		advanced, created := 0, 0
		for _, res := range results {
			if res != nil && res.Advanced {
				advanced++
				created += len(res.Created)
			}
		}
		if advanced != 1 || created != 1 {
			t.Fatalf("round %d: %d fires advanced and made %d runs; want 1 and 1", round, advanced, created)
		}
		expect = at
	}
	for at, count := range runsPerTick(t, s, "report") {
		if count != 1 {
			t.Errorf("tick %s has %d runs", at.Format(time.TimeOnly), count)
		}
	}
	if got := len(listRuns(t, s, "report")); got != 3 {
		t.Errorf("%d runs, want 3", got)
	}
}

// testFireCursorCAS: the cursor moves only from the value the caller read.
func testFireCursorCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1, t2 := t0, t0.Add(time.Hour)

	// No cursor yet, and the caller thinks there is one: nothing happens.
	res := mustFire(t, s, store.FireParams{Job: "sync", Expect: t1, Cursor: t2,
		Runs: []store.RunInsertParams{tick("sync", t2)}, Now: t2})
	if res.Advanced || len(res.Created) != 0 || res.Cursor != nil {
		t.Fatalf("fire without cursor and non-zero Expect: %+v", res)
	}

	// First creation with a zero Expect, with skipped ticks counted.
	res = mustFire(t, s, store.FireParams{Job: "sync", Cursor: t1, Runs: []store.RunInsertParams{tick("sync", t1)},
		Skipped: 3, LastSkipped: t1.Add(-time.Hour), Now: t1})
	if !res.Advanced || len(res.Created) != 1 {
		t.Fatalf("first fire: %+v", res)
	}
	if c := res.Cursor; c == nil || c.Job != "sync" || !c.Last.Equal(t1) || c.Skipped != 3 ||
		!c.LastSkippedAt.Equal(t1.Add(-time.Hour)) || c.Paused || !c.UpdatedAt.Equal(t1) {
		t.Fatalf("cursor after first fire: %+v", res.Cursor)
	}

	// A second creation (zero Expect) loses, and writes nothing.
	res = mustFire(t, s, store.FireParams{Job: "sync", Cursor: t2, Runs: []store.RunInsertParams{tick("sync", t2)}, Skipped: 1, Now: t2})
	if res.Advanced || len(res.Created) != 0 {
		t.Fatalf("second creation advanced: %+v", res)
	}
	// A stale Expect loses, and writes nothing.
	res = mustFire(t, s, store.FireParams{Job: "sync", Expect: t1.Add(-time.Minute), Cursor: t2,
		Runs: []store.RunInsertParams{tick("sync", t2)}, Skipped: 1, Now: t2})
	if res.Advanced || len(res.Created) != 0 {
		t.Fatalf("stale Expect advanced: %+v", res)
	}
	cursors, err := s.ScheduleCursors(ctx, []string{"sync", "other"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cursors) != 1 || !cursors["sync"].Last.Equal(t1) || cursors["sync"].Skipped != 3 {
		t.Fatalf("cursors after lost fires: %+v", cursors)
	}
	if got := len(listRuns(t, s, "sync")); got != 1 {
		t.Fatalf("%d runs after lost fires, want 1", got)
	}

	// The right Expect advances; skipped counts add up, LastSkippedAt keeps the newest.
	res = mustFire(t, s, store.FireParams{Job: "sync", Expect: t1, Cursor: t2, Runs: []store.RunInsertParams{tick("sync", t2)},
		Skipped: 2, LastSkipped: t2.Add(-time.Minute), Now: t2})
	if !res.Advanced || len(res.Created) != 1 || !res.Cursor.Last.Equal(t2) || res.Cursor.Skipped != 5 ||
		!res.Cursor.LastSkippedAt.Equal(t2.Add(-time.Minute)) {
		t.Fatalf("fire with the right Expect: %+v, cursor %+v", res, res.Cursor)
	}
	// A fire that only skips moves the cursor and makes nothing.
	t3 := t2.Add(time.Hour)
	res = mustFire(t, s, store.FireParams{Job: "sync", Expect: t2, Cursor: t3, Skipped: 1, LastSkipped: t3, Now: t3})
	if !res.Advanced || len(res.Created) != 0 || res.Cursor.Skipped != 6 || !res.Cursor.LastSkippedAt.Equal(t3) {
		t.Fatalf("skip-only fire: %+v, cursor %+v", res, res.Cursor)
	}
}

// fireOne fires the tick at of job with overlap, expecting the cursor at expect.
func fireOne(t *testing.T, s store.Store, job string, expect, at time.Time, overlap jobs.Overlap) *store.FireResult {
	t.Helper()
	return mustFire(t, s, store.FireParams{Job: job, Expect: expect, Cursor: at,
		Runs: []store.RunInsertParams{tick(job, at)}, Overlap: overlap, Node: nodeA, Now: at})
}

// testFireOverlapSkip: with overlap skip, a tick that finds an active run
// makes nothing and counts as skipped.
func testFireOverlapSkip(t *testing.T, s store.Store) {
	t1, t2, t3, t4 := t0, t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	first := fireOne(t, s, "poll", time.Time{}, t1, jobs.OverlapSkip).Created[0]

	res := fireOne(t, s, "poll", t1, t2, jobs.OverlapSkip)
	if !res.Advanced || len(res.Created) != 0 || res.SkippedOverlap != 1 {
		t.Fatalf("fire over a pending run: %+v", res)
	}
	if c := res.Cursor; !c.Last.Equal(t2) || c.Skipped != 1 || !c.LastSkippedAt.Equal(t2) {
		t.Fatalf("cursor after overlap skip: %+v", c)
	}
	run := claimOne(t, s, "poll", incA, t2)
	res = fireOne(t, s, "poll", t2, t3, jobs.OverlapSkip)
	if len(res.Created) != 0 || res.SkippedOverlap != 1 || res.Cursor.Skipped != 2 {
		t.Fatalf("fire over a running run: %+v", res)
	}
	// A duplicate tick is a duplicate, not a skip.
	res = mustFire(t, s, store.FireParams{Job: "poll", Expect: t3, Cursor: t3,
		Runs: []store.RunInsertParams{tick("poll", t1)}, Overlap: jobs.OverlapSkip, Now: t3})
	if res.Duplicates != 1 || res.SkippedOverlap != 0 || res.Cursor.Skipped != 2 {
		t.Fatalf("duplicate tick with overlap skip: %+v", res)
	}

	complete(t, s, run, t3.Add(time.Second))
	res = fireOne(t, s, "poll", t3, t4, jobs.OverlapSkip)
	if len(res.Created) != 1 || res.SkippedOverlap != 0 {
		t.Fatalf("fire after the run finished: %+v", res)
	}
	if got := mustGet(t, s, first.ID); got.Status != jobs.StatusCompleted {
		t.Fatalf("first run is %s", got.Status)
	}
}

// testFireOverlapReplace: with overlap replace, waiting runs are cancelled
// (reason replaced) and running ones are asked to stop.
func testFireOverlapReplace(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1, t2, t3 := t0, t0.Add(time.Minute), t0.Add(2*time.Minute)
	fireOne(t, s, "index", time.Time{}, t1, jobs.OverlapAllow)
	running := claimOne(t, s, "index", incA, t1)
	waiting := fireOne(t, s, "index", t1, t2, jobs.OverlapAllow).Created[0]

	res := fireOne(t, s, "index", t2, t3, jobs.OverlapReplace)
	if !res.Advanced || len(res.Created) != 1 || len(res.Replaced) != 2 {
		t.Fatalf("replace: advanced %v, created %d, replaced %d", res.Advanced, len(res.Created), len(res.Replaced))
	}
	byID := map[string]*jobs.Run{}
	for _, r := range res.Replaced {
		byID[r.ID] = r
	}
	if r := byID[running.ID]; r == nil || r.Status != jobs.StatusRunning || !r.CancelRequested {
		t.Fatalf("replaced running run: %+v", r)
	}
	if r := byID[waiting.ID]; r == nil || r.Status != jobs.StatusCancelled || r.Reason != jobs.ReasonReplaced {
		t.Fatalf("replaced waiting run: %+v", r)
	}
	got := mustGet(t, s, waiting.ID)
	wantStatus(t, got, jobs.StatusCancelled, jobs.ReasonReplaced)
	wantTime(t, "finished_at of the replaced run", got.FinishedAt, t3)
	evs := mustEvents(t, s, waiting.ID)
	if last := evs[len(evs)-1]; last.From != jobs.StatusPending || last.To != jobs.StatusCancelled || last.Reason != jobs.ReasonReplaced {
		t.Fatalf("last event of the replaced run: %+v", last)
	}
	ids, err := s.RunsCancelRequested(ctx, incA)
	if err != nil || len(ids) != 1 || ids[0] != running.ID {
		t.Fatalf("RunsCancelRequested = %v, %v; want [%s]", ids, err, running.ID)
	}
	// The owner stops the attempt: the run ends cancelled, reason replaced.
	stopped := mustTransition(t, s, jobs.Finish(running, fenceOf(running), nodeB,
		jobs.Result{Reason: jobs.ReasonReplaced}, t3.Add(time.Second), nil))
	wantStatus(t, stopped, jobs.StatusCancelled, jobs.ReasonReplaced)
	if stopped.CancelRequested {
		t.Fatal("CancelRequested stays set after the attempt ended")
	}
	if ids, _ := s.RunsCancelRequested(ctx, incA); len(ids) != 0 {
		t.Fatalf("RunsCancelRequested after the stop = %v", ids)
	}
	// The new run is the only active one.
	active := 0
	for _, r := range listRuns(t, s, "index") {
		if r.Active() {
			active++
		}
	}
	if active != 1 {
		t.Fatalf("%d active runs, want 1", active)
	}
	// Replace with nothing active is a plain fire.
	claimed := claimOne(t, s, "index", incA, t3)
	complete(t, s, claimed, t3.Add(time.Second))
	res = fireOne(t, s, "index", t3, t3.Add(time.Minute), jobs.OverlapReplace)
	if len(res.Created) != 1 || len(res.Replaced) != 0 {
		t.Fatalf("replace with nothing active: %+v", res)
	}
}

// testFireOverlapAllowQueue: allow and queue make the run next to an active one.
func testFireOverlapAllowQueue(t *testing.T, s store.Store) {
	for _, overlap := range []jobs.Overlap{jobs.OverlapAllow, jobs.OverlapQueue} {
		job := "job-" + string(overlap)
		fireOne(t, s, job, time.Time{}, t0, overlap)
		claimOne(t, s, job, incA, t0)
		res := fireOne(t, s, job, t0, t0.Add(time.Minute), overlap)
		if len(res.Created) != 1 || res.SkippedOverlap != 0 || len(res.Replaced) != 0 {
			t.Fatalf("%s: %+v", overlap, res)
		}
		res = fireOne(t, s, job, t0.Add(time.Minute), t0.Add(2*time.Minute), overlap)
		if len(res.Created) != 1 {
			t.Fatalf("%s: second fire over active runs: %+v", overlap, res)
		}
		if got := len(listRuns(t, s, job)); got != 3 {
			t.Fatalf("%s: %d runs, want 3", overlap, got)
		}
	}
}

// testFireOverlapSeveralTicks: several ticks due in one fire (late ticks
// within misfire_grace after a downtime) are judged one after another:
// under skip the oldest gets a run and the others are skipped, as its run
// is pending when they come; under replace the newest gets a run and the
// older ones are skipped; allow and queue make all of them.
func testFireOverlapSeveralTicks(t *testing.T, s store.Store) {
	ticks := []time.Time{t0, t0.Add(10 * time.Second), t0.Add(20 * time.Second)}
	now := t0.Add(25 * time.Second)
	for _, c := range []struct {
		overlap jobs.Overlap
		want    []time.Time
	}{
		{jobs.OverlapSkip, ticks[:1]},
		{jobs.OverlapReplace, ticks[2:]},
		{jobs.OverlapAllow, ticks},
		{jobs.OverlapQueue, ticks},
	} {
		job := "several-" + string(c.overlap)
		var runs []store.RunInsertParams
		for _, tk := range ticks {
			runs = append(runs, tick(job, tk))
		}
		res := mustFire(t, s, store.FireParams{Job: job, Cursor: ticks[2], Runs: runs, Overlap: c.overlap, Node: nodeA, Now: now})
		var got []time.Time
		for _, r := range listRuns(t, s, job) {
			got = append(got, r.ScheduledAt.UTC())
		}
		slices.SortFunc(got, time.Time.Compare)
		if !slices.EqualFunc(got, c.want, time.Time.Equal) {
			t.Errorf("%s: runs for the ticks %v, want %v", c.overlap, got, c.want)
		}
		skipped := len(ticks) - len(c.want)
		if res.SkippedOverlap != skipped || res.Cursor.Skipped != int64(skipped) || len(res.Created) != len(c.want) {
			t.Errorf("%s: skipped %d, cursor counts %d, created %d; want %d skipped", c.overlap,
				res.SkippedOverlap, res.Cursor.Skipped, len(res.Created), skipped)
		}
		if skipped > 0 && !res.Cursor.LastSkippedAt.Equal(ticks[map[bool]int{true: 2, false: 1}[c.overlap == jobs.OverlapSkip]]) {
			t.Errorf("%s: last skipped %s", c.overlap, res.Cursor.LastSkippedAt)
		}
	}
}

// testSchedulePause: pause keeps the cursor, a paused cursor does not fire,
// resume moves it to now.
func testSchedulePause(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1 := t0
	fireOne(t, s, "clean", time.Time{}, t1, jobs.OverlapAllow)

	c, err := s.SchedulePause(ctx, "clean", true, t1.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Paused || !c.Last.Equal(t1) {
		t.Fatalf("paused cursor: %+v", c)
	}
	res := fireOne(t, s, "clean", t1, t1.Add(time.Hour), jobs.OverlapAllow)
	if res.Advanced || len(res.Created) != 0 || res.Cursor == nil || !res.Cursor.Paused {
		t.Fatalf("fire of a paused job: %+v", res)
	}
	// Pausing twice changes nothing.
	if c, err = s.SchedulePause(ctx, "clean", true, t1.Add(2*time.Hour)); err != nil || !c.Last.Equal(t1) || !c.Paused {
		t.Fatalf("second pause: %+v, %v", c, err)
	}

	resumed := t1.Add(5 * time.Hour)
	c, err = s.SchedulePause(ctx, "clean", false, resumed)
	if err != nil {
		t.Fatal(err)
	}
	if c.Paused || !c.Last.Equal(resumed) {
		t.Fatalf("resumed cursor: %+v", c)
	}
	res = fireOne(t, s, "clean", resumed, resumed.Add(time.Hour), jobs.OverlapAllow)
	if !res.Advanced || len(res.Created) != 1 {
		t.Fatalf("fire after resume: %+v", res)
	}
	// Resuming a cursor that is not paused leaves it.
	if c, err = s.SchedulePause(ctx, "clean", false, resumed.Add(3*time.Hour)); err != nil || !c.Last.Equal(resumed.Add(time.Hour)) {
		t.Fatalf("resume of a running schedule: %+v, %v", c, err)
	}

	// Pausing a job without a cursor makes one.
	c, err = s.SchedulePause(ctx, "fresh", true, t1)
	if err != nil || !c.Paused || c.Job != "fresh" {
		t.Fatalf("pause without cursor: %+v, %v", c, err)
	}
	cursors, err := s.ScheduleCursors(ctx, []string{"clean", "fresh", "none"})
	if err != nil || len(cursors) != 2 || !cursors["fresh"].Paused || cursors["clean"].Paused {
		t.Fatalf("ScheduleCursors = %+v, %v", cursors, err)
	}
}
