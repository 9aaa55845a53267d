package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// lead is how far ahead of their tick these tests fire.
const lead = 200 * time.Millisecond

// fireAhead fires job's tick at, expecting the cursor at expect, at the
// time fireAt (before at, for a fire ahead of time).
func fireAhead(t *testing.T, s store.Store, job string, expect, at, fireAt time.Time, overlap jobs.Overlap) *store.FireResult {
	t.Helper()
	r := tick(job, at)
	r.Now = fireAt
	return mustFire(t, s, store.FireParams{Job: job, Expect: expect, Cursor: at,
		Runs: []store.RunInsertParams{r}, Overlap: overlap, Node: nodeA, Now: fireAt})
}

// cursorOf reads job's cursor.
func cursorOf(t *testing.T, s store.Store, job string) *store.Cursor {
	t.Helper()
	cs, err := s.ScheduleCursors(t.Context(), []string{job})
	if err != nil || cs[job] == nil {
		t.Fatalf("ScheduleCursors(%s) = %v, %v", job, cs, err)
	}
	return cs[job]
}

// testFireAheadDeferred: a fire ahead of its tick of a skip or replace job
// that has an active run writes nothing and says Deferred, so that the
// policy is applied at the tick; allow and queue fire ahead, and so does a
// skip job with nothing active. A fire at its tick is never deferred.
func testFireAheadDeferred(t *testing.T, s store.Store) {
	t1, t2 := t0, t0.Add(time.Minute)
	for _, overlap := range []jobs.Overlap{jobs.OverlapSkip, jobs.OverlapReplace} {
		job := "ahead-" + string(overlap)
		first := fireOne(t, s, job, time.Time{}, t1, overlap).Created[0]
		res := fireAhead(t, s, job, t1, t2, t2.Add(-lead), overlap)
		if !res.Deferred || res.Advanced || len(res.Created) != 0 || res.SkippedOverlap != 0 || len(res.Replaced) != 0 {
			t.Fatalf("%s: fire ahead over a pending run: %s", overlap, describeFire(res))
		}
		if c := cursorOf(t, s, job); !c.Last.Equal(t1) || c.Skipped != 0 {
			t.Fatalf("%s: cursor after a deferred fire: %+v", overlap, c)
		}
		if got := mustGet(t, s, first.ID); got.Status != jobs.StatusPending {
			t.Fatalf("%s: the active run is %s after a deferred fire", overlap, got.Status)
		}
		// At the tick the policy applies as always.
		res = fireOne(t, s, job, t1, t2, overlap)
		if res.Deferred || !res.Advanced {
			t.Fatalf("%s: fire at the tick: %s", overlap, describeFire(res))
		}
		switch overlap {
		case jobs.OverlapSkip:
			if res.SkippedOverlap != 1 || len(res.Created) != 0 {
				t.Fatalf("skip at the tick: %s", describeFire(res))
			}
		case jobs.OverlapReplace:
			if len(res.Replaced) != 1 || len(res.Created) != 1 {
				t.Fatalf("replace at the tick: %s", describeFire(res))
			}
		}
	}

	// Allow and queue make the run ahead of its tick beside an active one.
	for _, overlap := range []jobs.Overlap{jobs.OverlapAllow, jobs.OverlapQueue} {
		job := "ahead-" + string(overlap)
		fireOne(t, s, job, time.Time{}, t1, overlap)
		res := fireAhead(t, s, job, t1, t2, t2.Add(-lead), overlap)
		if res.Deferred || !res.Advanced || len(res.Created) != 1 {
			t.Fatalf("%s: fire ahead: %s", overlap, describeFire(res))
		}
	}

	// With nothing active, skip fires ahead; the run waits for its tick.
	job := "ahead-idle"
	first := fireOne(t, s, job, time.Time{}, t1, jobs.OverlapSkip).Created[0]
	complete(t, s, claimOne(t, s, job, incA, t1), t1.Add(time.Second))
	res := fireAhead(t, s, job, t1, t2, t2.Add(-lead), jobs.OverlapSkip)
	if res.Deferred || !res.Advanced || len(res.Created) != 1 {
		t.Fatalf("skip with nothing active, ahead: %s", describeFire(res))
	}
	ahead := res.Created[0]
	if ahead.ID == first.ID || !ahead.NotBefore.Equal(t2) || ahead.Status != jobs.StatusPending {
		t.Fatalf("run fired ahead: %+v", ahead)
	}
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{job: 0}),
		Limit: 10, Now: t2.Add(-time.Millisecond)}); len(runs) != 0 {
		t.Fatalf("a run fired ahead was claimed before its tick: %v", ids(runs))
	}
	if got := claimOne(t, s, job, incA, t2); got.ID != ahead.ID {
		t.Fatalf("claimed %s at the tick, want %s", got.ID, ahead.ID)
	}

	// A fire whose Now is the tick itself is not ahead: skip applies.
	t3 := t2.Add(time.Minute)
	res = fireAhead(t, s, job, t2, t3, t3, jobs.OverlapSkip)
	if res.Deferred || res.SkippedOverlap != 1 {
		t.Fatalf("fire at the tick over a running run: %s", describeFire(res))
	}

	// In a batch, the deferred fire leaves the others alone.
	results, err := s.ScheduleFireMany(t.Context(), []store.FireParams{
		{Job: "ahead-skip", Expect: t2, Cursor: t3, Runs: []store.RunInsertParams{aheadTick("ahead-skip", t3)},
			Overlap: jobs.OverlapSkip, Node: nodeA, Now: t3.Add(-lead)},
		{Job: "ahead-allow", Expect: t2, Cursor: t3, Runs: []store.RunInsertParams{aheadTick("ahead-allow", t3)},
			Overlap: jobs.OverlapAllow, Node: nodeA, Now: t3.Add(-lead)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if skip := results[0]; !skip.Deferred || skip.Advanced {
		t.Fatalf("batch, skip job with a running run: %s", describeFire(skip))
	}
	if allow := results[1]; allow.Deferred || !allow.Advanced || len(allow.Created) != 1 {
		t.Fatalf("batch, allow job: %s", describeFire(allow))
	}
	if c := cursorOf(t, s, "ahead-skip"); !c.Last.Equal(t2) {
		t.Fatalf("cursor of the deferred job in a batch: %+v", c)
	}
}

// aheadTick is the run of job's tick at made lead before it.
func aheadTick(job string, at time.Time) store.RunInsertParams {
	r := tick(job, at)
	r.Now = at.Add(-lead)
	return r
}

// testWithdraw: ScheduleWithdraw deletes the runs fired ahead of now (with
// their occurrence, so the tick fires again, once) and moves the cursor
// back to now; it leaves runs that are due, claimed, or not made by a
// schedule, and other jobs.
func testWithdraw(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1, t2, t3 := t0, t0.Add(time.Minute), t0.Add(2*time.Minute)
	due := fireOne(t, s, "sync", time.Time{}, t1, jobs.OverlapAllow).Created[0]
	ahead := fireAhead(t, s, "sync", t1, t2, t2.Add(-lead), jobs.OverlapAllow).Created[0]
	fireOne(t, s, "other", time.Time{}, t1, jobs.OverlapAllow)
	other := fireAhead(t, s, "other", t1, t2, t2.Add(-lead), jobs.OverlapAllow).Created[0]
	// A manual run waiting for a later time is not a tick fired ahead.
	later := mustInsert(t, s, store.RunInsertParams{Job: "sync", Trigger: jobs.TriggerManual, ScheduledAt: t3,
		NotBefore: t3, Retry: retry3, Node: nodeA, Now: t1})

	at := t2.Add(-lead / 2)
	cs, n, err := s.ScheduleWithdraw(ctx, []string{"sync", "unknown"}, at)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(cs) != 1 || cs["sync"] == nil || !cs["sync"].Last.Equal(at) {
		t.Fatalf("ScheduleWithdraw = %+v, %d; want the cursor of sync at %s and 1 run", cs, n, at.Format(time.RFC3339Nano))
	}
	if _, err := s.RunGet(ctx, ahead.ID); !isErr(err, store.ErrNotFound) {
		t.Fatalf("RunGet of the withdrawn run: %v, want not found", err)
	}
	if evs, err := s.RunEvents(ctx, ahead.ID); err == nil && len(evs) != 0 {
		t.Fatalf("the withdrawn run has %d events left", len(evs))
	}
	for _, r := range []*jobs.Run{due, other, later} {
		if got := mustGet(t, s, r.ID); got.Status != jobs.StatusPending {
			t.Fatalf("run %s (%s at %s) is %s after the withdrawal", r.ID, r.Job, r.ScheduledAt.Format(time.TimeOnly), got.Status)
		}
	}
	if c := cursorOf(t, s, "other"); !c.Last.Equal(t2) {
		t.Fatalf("cursor of a job not withdrawn: %+v", c)
	}
	// The old cursor is stale: a fire that expects it loses.
	if res := fireAhead(t, s, "sync", t2, t3, t3.Add(-lead), jobs.OverlapAllow); res.Advanced {
		t.Fatalf("fire expecting the withdrawn cursor: %s", describeFire(res))
	}
	// The tick fires again, once.
	res := fireOne(t, s, "sync", at, t2, jobs.OverlapAllow)
	if !res.Advanced || len(res.Created) != 1 || res.Duplicates != 0 {
		t.Fatalf("fire of the withdrawn tick: %s", describeFire(res))
	}
	if res := fireOne(t, s, "sync", t2, t2, jobs.OverlapAllow); res.Duplicates != 1 || len(res.Created) != 0 {
		t.Fatalf("second fire of the withdrawn tick: %s", describeFire(res))
	}

	// A run fired ahead that a claim took is not withdrawn, and its tick
	// keeps its occurrence; the cursor still moves back.
	claimed := fireAhead(t, s, "other", t2, t3, t3.Add(-lead), jobs.OverlapAllow).Created[0]
	mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"other": 0}), Limit: 10, Now: t3})
	at = t3.Add(-lead / 2)
	cs, n, err = s.ScheduleWithdraw(ctx, []string{"other"}, at)
	if err != nil || n != 0 || !cs["other"].Last.Equal(at) {
		t.Fatalf("withdraw after the claim = %+v, %d, %v", cs, n, err)
	}
	if got := mustGet(t, s, claimed.ID); got.Status != jobs.StatusRunning {
		t.Fatalf("claimed run is %s after the withdrawal", got.Status)
	}
	if res := fireOne(t, s, "other", at, t3, jobs.OverlapAllow); res.Duplicates != 1 || len(res.Created) != 0 {
		t.Fatalf("fire of a claimed tick after the withdrawal: %s", describeFire(res))
	}
	perTick := runsPerTick(t, s, "other")
	for _, tk := range []time.Time{t1, t2, t3} {
		if perTick[tk] != 1 {
			t.Fatalf("tick %s of other has %d runs, want 1", tk.Format(time.TimeOnly), perTick[tk])
		}
	}

	// Nothing to withdraw: a cursor at or before now stays.
	cs, n, err = s.ScheduleWithdraw(ctx, []string{"other"}, t3.Add(time.Second))
	if err != nil || n != 0 || !cs["other"].Last.Equal(t3) {
		t.Fatalf("withdraw with nothing ahead = %+v, %d, %v", cs, n, err)
	}
}

// testPauseWithdraws: pausing takes back the tick fired ahead of the pause
// (the cursor moves back to the pause), and a tick due before the pause
// keeps its run.
func testPauseWithdraws(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1, t2 := t0, t0.Add(time.Minute)
	due := fireOne(t, s, "report", time.Time{}, t1, jobs.OverlapAllow).Created[0]
	ahead := fireAhead(t, s, "report", t1, t2, t2.Add(-lead), jobs.OverlapAllow).Created[0]
	at := t2.Add(-lead / 2)
	c, err := s.SchedulePause(ctx, "report", true, at)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Paused || !c.Last.Equal(at) {
		t.Fatalf("cursor paused after a fire ahead: %+v", c)
	}
	if _, err := s.RunGet(ctx, ahead.ID); !isErr(err, store.ErrNotFound) {
		t.Fatalf("RunGet of the run fired ahead of the pause: %v, want not found", err)
	}
	if got := mustGet(t, s, due.ID); got.Status != jobs.StatusPending {
		t.Fatalf("the run due before the pause is %s", got.Status)
	}
	// Resumed before the tick: the tick fires, once.
	c, err = s.SchedulePause(ctx, "report", false, at.Add(lead/4))
	if err != nil || c.Paused || !c.Last.Equal(at.Add(lead/4)) {
		t.Fatalf("resume = %+v, %v", c, err)
	}
	res := fireOne(t, s, "report", c.Last, t2, jobs.OverlapAllow)
	if len(res.Created) != 1 {
		t.Fatalf("fire after pause and resume: %s", describeFire(res))
	}
	if perTick := runsPerTick(t, s, "report"); perTick[t1] != 1 || perTick[t2] != 1 {
		t.Fatalf("runs per tick: %v", perTick)
	}
}

// testWithdrawAfterStepBack: after the clock was stepped back, cursors and
// runs later than now that were written at or after their tick, or later
// than store.MaxFireAhead, were not fired ahead and unreached: neither a
// withdrawal (a stop, a reload) nor a pause takes them back, and a resume
// keeps the cursor, so no tick before it fires again. A tick fired ahead
// within the bound is still taken back.
func testWithdrawAfterStepBack(t *testing.T, s store.Store) {
	ctx := t.Context()
	t1, t2 := t0, t0.Add(time.Minute)
	// "queue" fired t1 and t2 at their time; t2's run waits behind t1's.
	fireOne(t, s, "queue", time.Time{}, t1, jobs.OverlapQueue)
	waiting := fireOne(t, s, "queue", t1, t2, jobs.OverlapQueue).Created[0]
	// "paused" fired t1 at its time; "ahead" fired t2 ahead of it.
	fireOne(t, s, "paused", time.Time{}, t1, jobs.OverlapAllow)
	fireOne(t, s, "ahead", time.Time{}, t1, jobs.OverlapAllow)
	ahead := fireAhead(t, s, "ahead", t1, t2, t2.Add(-lead), jobs.OverlapAllow).Created[0]

	back := t1.Add(-time.Hour) // the clock stepped back an hour
	if _, err := s.SchedulePause(ctx, "paused", true, back); err != nil {
		t.Fatal(err)
	}
	if c := cursorOf(t, s, "paused"); !c.Last.Equal(t1) || !c.Paused {
		t.Fatalf("cursor of a job paused after a step back: %+v, want paused at %s", c, t1.Format(time.TimeOnly))
	}
	cs, n, err := s.ScheduleWithdraw(ctx, []string{"queue", "paused", "ahead"}, back)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || !cs["queue"].Last.Equal(t2) || !cs["paused"].Last.Equal(t1) || !cs["ahead"].Last.Equal(t2) {
		t.Fatalf("ScheduleWithdraw an hour back = %d runs, queue %s, paused %s, ahead %s; want none, %s, %s, %s",
			n, cs["queue"].Last.Format(time.TimeOnly), cs["paused"].Last.Format(time.TimeOnly), cs["ahead"].Last.Format(time.TimeOnly),
			t2.Format(time.TimeOnly), t1.Format(time.TimeOnly), t2.Format(time.TimeOnly))
	}
	// Stepped back by less than store.MaxFireAhead: what was written at or
	// after its tick stays, what was fired ahead goes.
	near := t2.Add(-5 * time.Second)
	if cs, n, err = s.ScheduleWithdraw(ctx, []string{"queue", "ahead"}, near); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !cs["queue"].Last.Equal(t2) || !cs["ahead"].Last.Equal(near) {
		t.Fatalf("ScheduleWithdraw 5s back = %d runs, queue %s, ahead %s; want 1 run, %s, %s",
			n, cs["queue"].Last.Format(time.TimeOnly), cs["ahead"].Last.Format(time.TimeOnly), t2.Format(time.TimeOnly), near.Format(time.TimeOnly))
	}
	if got := mustGet(t, s, waiting.ID); got.Status != jobs.StatusPending {
		t.Fatalf("the run of a tick fired at its time is %s after the withdrawal", got.Status)
	}
	if _, err := s.RunGet(ctx, ahead.ID); !isErr(err, store.ErrNotFound) {
		t.Fatalf("RunGet of the run fired ahead: %v, want not found", err)
	}
	// The paused job resumes where it was: later than the clock.
	c, err := s.SchedulePause(ctx, "paused", false, back.Add(time.Second))
	if err != nil || !c.Last.Equal(t1) || c.Paused {
		t.Fatalf("resume after a step back = %+v, %v; want active at %s", c, err, t1.Format(time.TimeOnly))
	}
	// A withdrawal once the job is resumed still leaves its cursor.
	if cs, _, err := s.ScheduleWithdraw(ctx, []string{"paused"}, back.Add(2*time.Second)); err != nil || !cs["paused"].Last.Equal(t1) {
		t.Fatalf("withdraw after the resume = %+v, %v", cs, err)
	}
}
