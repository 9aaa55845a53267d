package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testTransitionComplete: a fenced completion writes the run, its attempt
// with output, and its events in order.
func testTransitionComplete(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustInsert(t, s, manual("backup", t0))
	run := claimOne(t, s, "backup", incA, t0.Add(time.Second))
	if run.ID != r.ID || run.Attempt != 1 {
		t.Fatalf("claimed %+v", run)
	}
	res := jobs.Result{ExitCode: ptr(0), Output: "head\n[... 900 bytes ...]\ntail\n", OutputBytes: 1000, Truncated: true}
	done := mustTransition(t, s, jobs.Complete(fenceOf(run), nodeB, res, t0.Add(time.Minute)))
	wantStatus(t, done, jobs.StatusCompleted, jobs.ReasonSucceeded)
	if done.ExitCode == nil || *done.ExitCode != 0 || done.Attempt != 1 || done.Error != "" {
		t.Fatalf("completed run: %+v", done)
	}
	wantTime(t, "finished_at", done.FinishedAt, t0.Add(time.Minute))
	wantTime(t, "started_at", done.StartedAt, t0.Add(time.Second))

	attempts, err := s.RunAttempts(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 1 {
		t.Fatalf("%d attempts, want 1", len(attempts))
	}
	a := attempts[0]
	if a.RunID != r.ID || a.Number != 1 || a.Node != nodeB || a.Incarnation != incA || a.Status != jobs.StatusCompleted ||
		a.Reason != jobs.ReasonSucceeded || a.ExitCode == nil || *a.ExitCode != 0 || a.Output != res.Output ||
		a.OutputBytes != 1000 || !a.Truncated || !a.StartedAt.Equal(t0.Add(time.Second)) || !a.FinishedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("attempt: %+v", a)
	}

	evs := mustEvents(t, s, r.ID)
	want := []jobs.Event{
		{RunID: r.ID, Time: t0, Node: nodeA, Attempt: 0, From: "", To: jobs.StatusPending, Reason: jobs.ReasonCreated},
		{RunID: r.ID, Time: t0.Add(time.Second), Node: nodeB, Attempt: 1, From: jobs.StatusPending, To: jobs.StatusRunning, Reason: jobs.ReasonClaimed},
		{RunID: r.ID, Time: t0.Add(time.Minute), Node: nodeB, Attempt: 1, From: jobs.StatusRunning, To: jobs.StatusCompleted, Reason: jobs.ReasonSucceeded},
	}
	wantEvents(t, evs, want)
}

func wantEvents(t *testing.T, got []*jobs.Event, want []jobs.Event) {
	t.Helper()
	if len(got) != len(want) {
		for _, e := range got {
			t.Logf("event: %+v", *e)
		}
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := *got[i]
		if g.RunID != w.RunID || !g.Time.Equal(w.Time) || g.Node != w.Node || g.Attempt != w.Attempt ||
			g.From != w.From || g.To != w.To || g.Reason != w.Reason || g.Message != w.Message || g.Actor != w.Actor {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// testTransitionFenced: a write with a stale fence changes nothing.
func testTransitionFenced(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustInsert(t, s, manual("sync", t0))
	run := claimOne(t, s, "sync", incA, t0)
	res := jobs.Result{ExitCode: ptr(0)}
	stale := []struct {
		name  string
		fence jobs.Fence
	}{
		{"wrong attempt", jobs.Fence{RunID: run.ID, Attempt: 2, Incarnation: incA}},
		{"earlier attempt", jobs.Fence{RunID: run.ID, Attempt: 0, Incarnation: incA}},
		{"wrong incarnation", jobs.Fence{RunID: run.ID, Attempt: 1, Incarnation: incB}},
	}
	before := mustGet(t, s, run.ID)
	nEvents := len(mustEvents(t, s, run.ID))
	for _, tc := range stale {
		_, err := s.RunTransition(ctx, jobs.Complete(tc.fence, nodeB, res, t0.Add(time.Minute)))
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("%s: got %v, want ErrFenced", tc.name, err)
		}
		if err := s.RunProgress(ctx, tc.fence, 50, "half"); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("%s: progress: got %v, want ErrFenced", tc.name, err)
		}
		sameRun(t, tc.name, mustGet(t, s, run.ID), before)
	}
	if n := len(mustEvents(t, s, run.ID)); n != nEvents {
		t.Fatalf("fenced writes added %d events", n-nEvents)
	}

	// A finished run refuses every fenced write, also with its last fence.
	done := complete(t, s, run, t0.Add(time.Minute))
	_, err := s.RunTransition(ctx, jobs.Complete(fenceOf(run), nodeB, res, t0.Add(2*time.Minute)))
	wantErr(t, err, store.ErrFenced)
	_, err = s.RunTransition(ctx, jobs.FailAttempt(run, fenceOf(run), nodeB, jobs.Result{}, jobs.ReasonNodeLost, t0.Add(2*time.Minute), nil))
	wantErr(t, err, store.ErrFenced)
	sameRun(t, "finished run", mustGet(t, s, run.ID), done)
	attempts, err := s.RunAttempts(ctx, run.ID)
	if err != nil || len(attempts) != 1 || attempts[0].Status != jobs.StatusCompleted {
		t.Fatalf("attempts after fenced writes: %+v, %v", attempts, err)
	}
	_, err = s.RunTransition(ctx, jobs.Complete(jobs.Fence{RunID: "no-such-run", Attempt: 1, Incarnation: incA}, nodeB, res, t0))
	wantErr(t, err, store.ErrNotFound)
}

// testTransitionInvalid: transitions the state machine forbids are refused
// and change nothing.
func testTransitionInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	pending := mustInsert(t, s, manual("a", t0))
	running := claimOne(t, s, "a", incA, t0)
	if running.ID != pending.ID {
		t.Fatal("claimed another run")
	}
	waiting := mustInsert(t, s, manual("b", t0))

	// A running run changes only with its fence.
	_, err := s.RunTransition(ctx, jobs.Cancel(running.ID, nodeA, jobs.ReasonCancelled, t0))
	wantErr(t, err, jobs.ErrInvalidTransition)
	_, err = s.RunTransition(ctx, jobs.Transition{RunID: running.ID, To: jobs.StatusCompleted, Reason: jobs.ReasonSucceeded, Time: t0})
	wantErr(t, err, jobs.ErrInvalidTransition)
	// pending -> completed, pending -> retrying, pending -> running (only a claim starts a run).
	for _, to := range []jobs.Status{jobs.StatusCompleted, jobs.StatusRetrying, jobs.StatusDeadLetter, jobs.StatusRunning, jobs.StatusPending} {
		_, err = s.RunTransition(ctx, jobs.Transition{RunID: waiting.ID, To: to, Reason: jobs.ReasonFailed, Time: t0})
		if !errors.Is(err, jobs.ErrInvalidTransition) {
			t.Fatalf("pending -> %s: got %v, want ErrInvalidTransition", to, err)
		}
	}
	sameRun(t, "pending run", mustGet(t, s, waiting.ID), waiting)
	// From restricts the statuses.
	_, err = s.RunTransition(ctx, jobs.Transition{RunID: waiting.ID, To: jobs.StatusCancelled, From: []jobs.Status{jobs.StatusRetrying},
		Reason: jobs.ReasonCancelled, Time: t0})
	wantErr(t, err, jobs.ErrInvalidTransition)

	// completed -> anything.
	done := complete(t, s, running, t0.Add(time.Second))
	for _, to := range []jobs.Status{jobs.StatusRunning, jobs.StatusPending, jobs.StatusCancelled} {
		_, err = s.RunTransition(ctx, jobs.Transition{RunID: done.ID, To: to, Reason: jobs.ReasonCancelled, Time: t0})
		if !errors.Is(err, jobs.ErrInvalidTransition) {
			t.Fatalf("completed -> %s: got %v, want ErrInvalidTransition", to, err)
		}
	}
	sameRun(t, "completed run", mustGet(t, s, done.ID), done)
	if n := len(mustEvents(t, s, done.ID)); n != 3 {
		t.Fatalf("%d events, want 3", n)
	}
	_, err = s.RunTransition(ctx, jobs.Cancel("no-such-run", nodeA, jobs.ReasonCancelled, t0))
	wantErr(t, err, store.ErrNotFound)
}

// testTransitionRetryAndDeadLetter: a failure retries after the backoff, the
// retry is claimed at its not_before, the last failure is dead_letter.
func testTransitionRetryAndDeadLetter(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustInsert(t, s, manual("flaky", t0))
	run := claimOne(t, s, "flaky", incA, t0)
	failedAt := t0.Add(time.Second)
	retrying := fail(t, s, run, failedAt)
	wantStatus(t, retrying, jobs.StatusRetrying, jobs.ReasonFailed)
	wantTime(t, "not_before of the retry", retrying.NotBefore, failedAt.Add(10*time.Second))
	if retrying.ExitCode == nil || *retrying.ExitCode != 1 || retrying.Error != "exit status 1" || !retrying.FinishedAt.IsZero() {
		t.Fatalf("retrying run: %+v", retrying)
	}
	next, err := s.RunsNextDue(ctx, []string{"flaky"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due", next, failedAt.Add(10*time.Second))

	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: store.NewJobLimits(map[string]int{"flaky": 0}),
		Limit: 1, Now: failedAt.Add(9 * time.Second)}); len(runs) != 0 {
		t.Fatal("retry claimed before its not_before")
	}
	run = claimOne(t, s, "flaky", incB, failedAt.Add(10*time.Second))
	if run.Attempt != 2 || run.Incarnation != incB || run.ExitCode != nil || run.Error != "" {
		t.Fatalf("second attempt: %+v", run)
	}
	run = claimOne(t, s, "flaky", incB, fail(t, s, run, failedAt.Add(11*time.Second)).NotBefore)
	dead := fail(t, s, run, failedAt.Add(time.Minute))
	wantStatus(t, dead, jobs.StatusDeadLetter, jobs.ReasonFailed)
	if dead.Attempt != 3 || dead.FinishedAt.IsZero() {
		t.Fatalf("dead run: %+v", dead)
	}
	attempts, err := s.RunAttempts(ctx, r.ID)
	if err != nil || len(attempts) != 3 {
		t.Fatalf("RunAttempts = %d, %v; want 3", len(attempts), err)
	}
	for i, a := range attempts {
		want := jobs.StatusRetrying
		if i == 2 {
			want = jobs.StatusDeadLetter
		}
		if a.Number != i+1 || a.Status != want || a.ExitCode == nil || *a.ExitCode != 1 || a.Output != "boom\n" || a.Error != "exit status 1" {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
	}
	evs := mustEvents(t, s, r.ID)
	var path []jobs.Status
	for _, e := range evs {
		path = append(path, e.To)
	}
	wantPath := []jobs.Status{jobs.StatusPending, jobs.StatusRunning, jobs.StatusRetrying, jobs.StatusRunning,
		jobs.StatusRetrying, jobs.StatusRunning, jobs.StatusDeadLetter}
	if len(path) != len(wantPath) {
		t.Fatalf("event path %v, want %v", path, wantPath)
	}
	for i := range path {
		if path[i] != wantPath[i] || (i > 0 && evs[i].From != wantPath[i-1]) {
			t.Fatalf("event path %v, want %v", path, wantPath)
		}
	}
	if e := evs[2]; e.Message != "exit status 1" || e.Attempt != 1 || e.Reason != jobs.ReasonFailed {
		t.Fatalf("failure event: %+v", e)
	}

	// An exit code that must not be retried goes straight to dead_letter.
	p := manual("strict", t0)
	p.NoRetryExitCodes = []int{2}
	mustInsert(t, s, p)
	run = claimOne(t, s, "strict", incA, t0)
	dead = mustTransition(t, s, jobs.Finish(run, fenceOf(run), nodeB, jobs.Result{ExitCode: ptr(2)}, t0.Add(time.Second), nil))
	wantStatus(t, dead, jobs.StatusDeadLetter, jobs.ReasonNoRetryCode)
}

// testTransitionRace: a completion and a recovery of the same attempt race;
// exactly one wins and the other is fenced.
func testTransitionRace(t *testing.T, s store.Store) {
	const rounds = 10
	for i := range rounds {
		job := "race"
		at := t0.Add(time.Duration(i) * time.Minute)
		mustInsert(t, s, manual(job, at))
		run := claimOne(t, s, job, incA, at)
		transitions := []jobs.Transition{
			jobs.Complete(fenceOf(run), nodeB, jobs.Result{ExitCode: ptr(0)}, at.Add(time.Second)),
			jobs.FailAttempt(run, fenceOf(run), nodeA, jobs.Result{}, jobs.ReasonNodeLost, at.Add(time.Second), nil),
		}
		errs := make([]error, len(transitions))
		var wg sync.WaitGroup
		for k, tr := range transitions {
			wg.Go(func() { _, errs[k] = s.RunTransition(t.Context(), tr) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrFenced):
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d transitions won (errors %v), want 1", i, won, errs)
		}
		got := mustGet(t, s, run.ID)
		if got.Status != jobs.StatusCompleted && got.Status != jobs.StatusRetrying {
			t.Fatalf("round %d: run is %s", i, got.Status)
		}
		evs := mustEvents(t, s, run.ID)
		if len(evs) != 3 || evs[2].To != got.Status {
			t.Fatalf("round %d: %d events, last to %s; run is %s", i, len(evs), evs[len(evs)-1].To, got.Status)
		}
		// Leave nothing waiting for the next round.
		if got.Status == jobs.StatusRetrying {
			if _, err := s.RunCancel(t.Context(), userCancel(got.ID, nodeA, at.Add(2*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// testClaimHistory: a running attempt and its claim's event read the same
// while the attempt runs (a store may write them only when it ends) as
// after it, through a cancel request, a retry and a second claim, whether
// the end is written alone or in a batch, and an end by another node.
func testClaimHistory(t *testing.T, s store.Store) {
	ctx := t.Context()
	wantRunning := func(r *jobs.Run, from jobs.Status, history []jobs.Event) {
		t.Helper()
		attempts, err := s.RunAttempts(ctx, r.ID)
		if err != nil || len(attempts) != r.Attempt {
			t.Fatalf("RunAttempts = %d, %v; want %d", len(attempts), err, r.Attempt)
		}
		a := attempts[r.Attempt-1]
		if a.RunID != r.ID || a.Number != r.Attempt || a.Node != nodeB || a.Incarnation != r.Incarnation ||
			!a.StartedAt.Equal(r.StartedAt) || !a.FinishedAt.IsZero() || a.Status != jobs.StatusRunning ||
			a.ExitCode != nil || a.Error != "" || a.Reason != "" || a.Output != "" || a.OutputBytes != 0 || a.Truncated {
			t.Fatalf("running attempt: %+v", a)
		}
		wantEvents(t, mustEvents(t, s, r.ID), append(history, claimedEvent(r, from)))
	}
	for _, job := range []string{"a", "b", "c"} {
		mustInsert(t, s, manual(job, t0))
	}
	claimed := map[string]*jobs.Run{}
	for _, job := range []string{"a", "b", "c"} {
		r := claimOne(t, s, job, incA, t0.Add(time.Second))
		claimed[job] = r
		wantRunning(r, jobs.StatusPending, []jobs.Event{createdEvent(r)})
	}

	// A cancel request changes the running run, not its history.
	a := claimed["a"]
	if _, err := s.RunCancel(ctx, userCancel(a.ID, nodeA, t0.Add(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	wantRunning(a, jobs.StatusPending, []jobs.Event{createdEvent(a)})

	// The first attempt of a fails alone, the second is claimed from
	// retrying and completes alone.
	failed := fail(t, s, a, t0.Add(3*time.Second))
	history := []jobs.Event{createdEvent(a), claimedEvent(a, jobs.StatusPending),
		{RunID: a.ID, Time: t0.Add(3 * time.Second), Node: nodeB, Attempt: 1, From: jobs.StatusRunning, To: jobs.StatusRetrying,
			Reason: jobs.ReasonFailed, Message: "exit status 1"}}
	wantEvents(t, mustEvents(t, s, a.ID), history)
	second := claimOne(t, s, "a", incB, failed.NotBefore)
	wantRunning(second, jobs.StatusRetrying, history)
	end := failed.NotBefore.Add(time.Second)
	completeAll(t, s, []*jobs.Run{second}, end)
	wantEvents(t, mustEvents(t, s, a.ID), append(history, claimedEvent(second, jobs.StatusRetrying), completedEvent(second, end)))
	attempts, err := s.RunAttempts(ctx, a.ID)
	if err != nil || len(attempts) != 2 || attempts[0].Status != jobs.StatusRetrying || attempts[0].Output != "boom\n" {
		t.Fatalf("attempts of a: %+v, %v", attempts, err)
	}
	wantCompleted(t, attempts[1], second, end)

	// b and c complete in one batch.
	end = t0.Add(4 * time.Second)
	for _, r := range completeAll(t, s, []*jobs.Run{claimed["b"], claimed["c"]}, end) {
		wantEvents(t, mustEvents(t, s, r.ID), []jobs.Event{createdEvent(r), claimedEvent(r, jobs.StatusPending), completedEvent(r, end)})
		attempts, err := s.RunAttempts(ctx, r.ID)
		if err != nil || len(attempts) != 1 {
			t.Fatalf("attempts of %s: %+v, %v", r.Job, attempts, err)
		}
		wantCompleted(t, attempts[0], r, end)
	}

	// A node that recovers a lost attempt names itself in its end's event,
	// and the cancel of the retry comes after that end in the history,
	// although its time is earlier: the nodes' clocks differ.
	mustInsert(t, s, manual("d", t0))
	d := claimOne(t, s, "d", incA, t0.Add(time.Second))
	lostAt, cancelAt := t0.Add(10*time.Second), t0.Add(5*time.Second)
	res := jobs.Result{Err: errors.New("node b went silent")}
	if r := mustTransition(t, s, jobs.FailAttempt(d, fenceOf(d), nodeA, res, jobs.ReasonNodeLost, lostAt, nil)); r.Status != jobs.StatusRetrying {
		t.Fatalf("recovered run is %s, want retrying", r.Status)
	}
	if _, err := s.RunCancel(ctx, userCancel(d.ID, nodeB, cancelAt)); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, mustEvents(t, s, d.ID), []jobs.Event{createdEvent(d), claimedEvent(d, jobs.StatusPending),
		{RunID: d.ID, Time: lostAt, Node: nodeA, Attempt: 1, From: jobs.StatusRunning, To: jobs.StatusRetrying,
			Reason: jobs.ReasonNodeLost, Message: "node b went silent"},
		{RunID: d.ID, Time: cancelAt, Node: nodeB, Attempt: 1, From: jobs.StatusRetrying, To: jobs.StatusCancelled,
			Reason: jobs.ReasonCancelled}})
	attempts, err = s.RunAttempts(ctx, d.ID)
	if err != nil || len(attempts) != 1 || attempts[0].Node != nodeB || attempts[0].Status != jobs.StatusRetrying ||
		attempts[0].Reason != jobs.ReasonNodeLost {
		t.Fatalf("attempts of d: %+v, %v", attempts, err)
	}
}

// completeAll completes the running runs in one batch at end by node B,
// each with its job's name as output, and returns them.
func completeAll(t *testing.T, s store.Store, runs []*jobs.Run, end time.Time) []*jobs.Run {
	t.Helper()
	ts := make([]jobs.Transition, len(runs))
	for i, r := range runs {
		ts[i] = jobs.Complete(fenceOf(r), nodeB, jobs.Result{ExitCode: ptr(0), Output: r.Job, OutputBytes: int64(len(r.Job))}, end)
	}
	res, err := s.RunTransitionMany(t.Context(), ts)
	if err != nil {
		t.Fatalf("RunTransitionMany: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("completion of %s: %v", runs[i].Job, r.Err)
		}
	}
	return runs
}

// wantCompleted checks that a is the attempt of the running run r as
// completeAll ended it at end.
func wantCompleted(t *testing.T, a *jobs.Attempt, r *jobs.Run, end time.Time) {
	t.Helper()
	if a.RunID != r.ID || a.Number != r.Attempt || a.Node != nodeB || a.Incarnation != r.Incarnation ||
		a.Status != jobs.StatusCompleted || a.Output != r.Job || !a.StartedAt.Equal(r.StartedAt) || !a.FinishedAt.Equal(end) {
		t.Fatalf("attempt %d of %s: %+v", r.Attempt, r.Job, a)
	}
}

// createdEvent is the creation event of a run that manual(job, t0) made.
func createdEvent(r *jobs.Run) jobs.Event {
	return jobs.Event{RunID: r.ID, Time: t0, Node: nodeA, To: jobs.StatusPending, Reason: jobs.ReasonCreated}
}

// claimedEvent is the event of the claim (by node B, claimOne) that
// started the running run r's attempt from status from.
func claimedEvent(r *jobs.Run, from jobs.Status) jobs.Event {
	return jobs.Event{RunID: r.ID, Time: r.StartedAt, Node: nodeB, Attempt: r.Attempt, From: from,
		To: jobs.StatusRunning, Reason: jobs.ReasonClaimed}
}

// completedEvent is the event of completeAll's end of the running run r.
func completedEvent(r *jobs.Run, end time.Time) jobs.Event {
	return jobs.Event{RunID: r.ID, Time: end, Node: nodeB, Attempt: r.Attempt, From: jobs.StatusRunning,
		To: jobs.StatusCompleted, Reason: jobs.ReasonSucceeded}
}

// testRetryDueAfterItsEnd: a retry is never due before the end of the
// attempt before it, whose clocks differ: the recovering node computes the
// backoff from its clock, and the end is written at the store's (a zero
// Time), later. A claim at a time between the two would start the next
// attempt before the last one ended, as the history tells it (found by the
// nemesis, seed 3500765987156522, where a claim waited for a job's lock).
func testRetryDueAfterItsEnd(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustInsert(t, s, manual("a", t0))
	r := claimOne(t, s, "a", incA, t0.Add(time.Second))
	nodeClock := t0.Add(2 * time.Second)
	tr := jobs.FailAttempt(r, fenceOf(r), nodeA, jobs.Result{Err: errors.New("node b went silent")}, jobs.ReasonNodeLost, nodeClock, nil)
	if want := nodeClock.Add(retry3.InitialDelay); !tr.NotBefore.Equal(want) {
		t.Fatalf("retry not before %s, want %s", tr.NotBefore, want)
	}
	tr.Time = time.Time{} // the store's clock: now, long after t0
	got := mustTransition(t, s, tr)
	attempts, err := s.RunAttempts(ctx, r.ID)
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts: %+v, %v", attempts, err)
	}
	end := attempts[0].FinishedAt
	if !end.After(tr.NotBefore) {
		t.Fatalf("the attempt ended at %s, want the store's clock, after %s", end, tr.NotBefore)
	}
	if got.Status != jobs.StatusRetrying || got.NotBefore.Before(end) {
		t.Fatalf("run is %s, not before %s; want retrying, not before its attempt's end %s", got.Status, got.NotBefore, end)
	}
	lim := store.NewJobLimits(map[string]int{"a": 0})
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: lim, Limit: 1,
		Now: tr.NotBefore.Add(time.Second)}); len(runs) != 0 {
		t.Fatalf("a claim past the backoff but before the end took attempt %d, started %s; the last ended %s",
			runs[0].Attempt, runs[0].StartedAt, end)
	}
	runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: lim, Limit: 1})
	if len(runs) != 1 || runs[0].Attempt != 2 || runs[0].StartedAt.Before(end) {
		t.Fatalf("claim at the store's clock: %+v, want attempt 2 started at or after %s", runs, end)
	}
}

// testRetryPastItsWindow: a retry that the store writes at or after its
// run's not_after (the node decided it before, on its clock; the write
// came later, retried after a lost answer) ends the run cancelled
// (expired), with its attempt's row; it is not refused, which left the
// run running for good.
func testRetryPastItsWindow(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := manual("a", t0)
	p.NotAfter = t0.Add(time.Minute)
	mustInsert(t, s, p)
	r := claimOne(t, s, "a", incA, t0.Add(time.Second))
	nodeClock := t0.Add(2 * time.Second)
	tr := jobs.FailAttempt(r, fenceOf(r), nodeA, jobs.Result{Err: errors.New("timed out")}, jobs.ReasonTimeout, nodeClock, nil)
	if tr.To != jobs.StatusRetrying || !tr.NotBefore.Before(p.NotAfter) {
		t.Fatalf("the node's decision: %s, not before %s; want a retry within the window", tr.To, tr.NotBefore)
	}
	tr.Time = p.NotAfter.Add(10 * time.Second) // written late
	got := mustTransition(t, s, tr)
	if got.Status != jobs.StatusCancelled || got.Reason != jobs.ReasonExpired || got.FinishedAt.IsZero() {
		t.Fatalf("run is %s (%s), finished %s; want cancelled (expired), finished", got.Status, got.Reason, got.FinishedAt)
	}
	if got.Error != "timed out" {
		t.Fatalf("run error %q, want the attempt's", got.Error)
	}
	attempts, err := s.RunAttempts(ctx, r.ID)
	if err != nil || len(attempts) != 1 || attempts[0].Status != jobs.StatusCancelled || attempts[0].FinishedAt.IsZero() {
		t.Fatalf("attempts: %+v, %v; want one, ended cancelled", attempts, err)
	}
	// Within the window the retry is written as the node decided it.
	q := manual("b", t0)
	q.NotAfter = t0.Add(time.Hour)
	mustInsert(t, s, q)
	r = claimOne(t, s, "b", incA, t0.Add(time.Second))
	tr = jobs.FailAttempt(r, fenceOf(r), nodeA, jobs.Result{Err: errors.New("timed out")}, jobs.ReasonTimeout, nodeClock, nil)
	tr.Time = nodeClock
	if got := mustTransition(t, s, tr); got.Status != jobs.StatusRetrying || !got.NotBefore.Equal(tr.NotBefore) {
		t.Fatalf("run is %s, not before %s; want retrying, not before %s", got.Status, got.NotBefore, tr.NotBefore)
	}
}
