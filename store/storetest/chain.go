package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testChain is the chain of most chain cases: report and archive follow a
// success, page follows a failure; each child job has its own policy.
var testChain = &jobs.Chain{
	OnSuccess: []jobs.ChainRun{
		{Job: "report", Retry: retry3, NoRetryExitCodes: []int{7}},
		{Job: "archive", Retry: once1},
	},
	OnFailure: []jobs.ChainRun{{Job: "page", Retry: once1}},
}

// chainParent makes a manual run of job with a payload at at and claims it
// a second later.
func chainParent(t *testing.T, s store.Store, job string, at time.Time, retry jobs.RetryPolicy) *jobs.Run {
	t.Helper()
	p := manual(job, at)
	p.Retry, p.Payload = retry, `{"day":"2026-03-01"}`
	mustInsert(t, s, p)
	return claimOne(t, s, job, incA, at.Add(time.Second))
}

// wantChildren checks that the end of parent made exactly one run of each
// of want, in that order, as its chain: of the trigger chain, carrying the
// parent's id and payload, pending from the parent's end, with its job's
// policy. It returns them.
func wantChildren(t *testing.T, s store.Store, parent *jobs.Run, want ...string) []*jobs.Run {
	t.Helper()
	kids, err := s.RunChildren(t.Context(), parent.ID)
	if err != nil {
		t.Fatalf("RunChildren(%s): %v", parent.ID, err)
	}
	var got []string
	for _, k := range kids {
		got = append(got, k.Job)
	}
	slices.Sort(got)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, sorted) {
		t.Fatalf("children of %s (%s %s): %v, want %v", parent.Job, parent.Status, parent.Reason, got, sorted)
	}
	end := mustGet(t, s, parent.ID).FinishedAt
	for _, k := range kids {
		if k.Trigger != jobs.TriggerChain || k.ParentRunID != parent.ID || k.Status != jobs.StatusPending ||
			k.Payload != parent.Payload || !k.CreatedAt.Equal(end) || !k.NotBefore.Equal(end) || k.Attempt != 0 {
			t.Fatalf("child %+v of parent %s ended at %s", *k, parent.ID, end)
		}
		var policy jobs.ChainRun
		for _, c := range slices.Concat(testChain.OnSuccess, testChain.OnFailure) {
			if c.Job == k.Job {
				policy = c
			}
		}
		if k.Retry != policy.Retry || !slices.Equal(k.NoRetryExitCodes, policy.NoRetryExitCodes) ||
			k.MaxAttempts != policy.Retry.MaxAttempts {
			t.Fatalf("child %s: policy %+v %v, want %+v", k.Job, k.Retry, k.NoRetryExitCodes, policy)
		}
		if got := mustGet(t, s, k.ID); got.ParentRunID != parent.ID || got.Trigger != jobs.TriggerChain {
			t.Fatalf("RunGet(child) = parent %q trigger %s", got.ParentRunID, got.Trigger)
		}
		evs := mustEvents(t, s, k.ID)
		if len(evs) != 1 || evs[0].To != jobs.StatusPending || evs[0].Reason != jobs.ReasonCreated || !evs[0].Time.Equal(end) {
			t.Fatalf("child %s: events %v", k.Job, evs)
		}
	}
	return kids
}

// testChainSuccessAndFailure: a completion makes the runs of on_success
// with its change, a dead letter those of on_failure; a retry makes none,
// and a second end of the same attempt is fenced and makes none either.
func testChainSuccessAndFailure(t *testing.T, s store.Store) {
	ok := chainParent(t, s, "etl", t0, once1)
	tr := jobs.Complete(fenceOf(ok), nodeB, jobs.Result{ExitCode: ptr(0)}, t0.Add(time.Minute))
	tr.Chain = testChain
	done := mustTransition(t, s, tr)
	wantChildren(t, s, done, "report", "archive")
	if _, err := s.RunTransition(t.Context(), tr); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("second end: %v, want fenced", err)
	}
	wantChildren(t, s, done, "report", "archive")

	bad := chainParent(t, s, "etl", t0.Add(time.Hour), retry3)
	res := jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1")}
	tr = jobs.FailAttempt(bad, fenceOf(bad), nodeB, res, jobs.ReasonFailed, t0.Add(time.Hour+time.Minute), nil)
	tr.Chain = testChain
	retrying := mustTransition(t, s, tr)
	wantStatus(t, retrying, jobs.StatusRetrying, jobs.ReasonFailed)
	wantChildren(t, s, retrying)

	res = jobs.Result{ExitCode: ptr(7), Err: errors.New("exit status 7")}
	again := claimOne(t, s, "etl", incA, t0.Add(2*time.Hour))
	again.NoRetryExitCodes = []int{7}
	tr = jobs.FailAttempt(again, fenceOf(again), nodeB, res, jobs.ReasonFailed, t0.Add(2*time.Hour+time.Minute), nil)
	tr.Chain = testChain
	dead := mustTransition(t, s, tr)
	wantStatus(t, dead, jobs.StatusDeadLetter, jobs.ReasonNoRetryCode)
	wantChildren(t, s, dead, "page")
}

// testChainBatch: the ends of a batch make the chains of those that were
// written, whichever way the backend writes them (a batch of terminal
// ends, or the locked way when a run has two transitions), and none for
// a transition that the batch refused.
func testChainBatch(t *testing.T, s store.Store) {
	var runs []*jobs.Run
	for i := range 3 {
		runs = append(runs, chainParent(t, s, "etl", t0.Add(time.Duration(i)*time.Minute), once1))
	}
	end := t0.Add(time.Hour)
	fails := jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1")}
	ts := []jobs.Transition{
		jobs.Complete(fenceOf(runs[0]), nodeB, jobs.Result{ExitCode: ptr(0)}, end),
		jobs.FailAttempt(runs[1], fenceOf(runs[1]), nodeB, fails, jobs.ReasonFailed, end, nil),
		jobs.Complete(jobs.Fence{RunID: runs[2].ID, Attempt: 9, Incarnation: incA}, nodeB, jobs.Result{ExitCode: ptr(0)}, end),
	}
	for i := range ts {
		ts[i].Chain = testChain
	}
	results, err := s.RunTransitionMany(t.Context(), ts)
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Err != nil || results[1].Err != nil || !errors.Is(results[2].Err, store.ErrFenced) {
		t.Fatalf("results: %v, %v, %v", results[0].Err, results[1].Err, results[2].Err)
	}
	wantChildren(t, s, results[0].Run, "report", "archive")
	wantChildren(t, s, results[1].Run, "page")
	wantChildren(t, s, runs[2])

	// The same run twice in a batch: its second transition sees the run
	// as the first left it, and is refused.
	again := jobs.Complete(fenceOf(runs[2]), nodeB, jobs.Result{ExitCode: ptr(0)}, end)
	again.Chain = testChain
	results, err = s.RunTransitionMany(t.Context(), []jobs.Transition{again, again})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Err != nil || !errors.Is(results[1].Err, store.ErrFenced) {
		t.Fatalf("results: %v, %v", results[0].Err, results[1].Err)
	}
	wantChildren(t, s, results[0].Run, "report", "archive")
}

// testChainExpire: a waiting run that RunsExpire cancels past its
// not_after makes the runs of on_failure, and so does an attempt whose
// retry could not start before not_after (FailAttempt's expired end).
func testChainExpire(t *testing.T, s store.Store) {
	p := manual("etl", t0)
	p.NotAfter, p.Payload = t0.Add(time.Minute), "waiting"
	waiting := mustInsert(t, s, p)
	other := manual("other", t0)
	other.NotAfter = t0.Add(time.Minute)
	lone := mustInsert(t, s, other)
	chain := func(job string) *jobs.Chain {
		if job == "etl" {
			return testChain
		}
		return nil
	}
	got, err := s.RunsExpire(t.Context(), store.RunsExpireParams{Node: nodeA, Now: t0.Add(time.Minute), Chain: chain})
	if err != nil || len(got) != 2 {
		t.Fatalf("expired %d runs, %v", len(got), err)
	}
	wantChildren(t, s, mustGet(t, s, waiting.ID), "page")
	wantChildren(t, s, mustGet(t, s, lone.ID))

	p = manual("etl", t0.Add(time.Hour))
	p.NotAfter = t0.Add(time.Hour + 5*time.Second) // the retry, 10s on, cannot start
	mustInsert(t, s, p)
	run := claimOne(t, s, "etl", incA, t0.Add(time.Hour))
	res := jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1")}
	tr := jobs.FailAttempt(run, fenceOf(run), nodeB, res, jobs.ReasonFailed, t0.Add(time.Hour+time.Second), nil)
	tr.Chain = testChain
	expired := mustTransition(t, s, tr)
	wantStatus(t, expired, jobs.StatusCancelled, jobs.ReasonExpired)
	wantChildren(t, s, expired, "page")
}

// testChainCancel: a user's cancel is not a failure, whether of a waiting
// run or of a running attempt: it makes no run of the chain.
func testChainCancel(t *testing.T, s store.Store) {
	waiting := mustInsert(t, s, manual("etl", t0))
	tr := jobs.Cancel(waiting.ID, nodeA, jobs.ReasonCancelled, t0.Add(time.Second))
	tr.Chain = testChain
	wantStatus(t, mustTransition(t, s, tr), jobs.StatusCancelled, jobs.ReasonCancelled)
	wantChildren(t, s, waiting)

	run := chainParent(t, s, "etl", t0.Add(time.Minute), retry3)
	tr = jobs.Finish(run, fenceOf(run), nodeB, jobs.Result{Reason: jobs.ReasonCancelled}, t0.Add(2*time.Minute), nil)
	tr.Chain = testChain
	wantStatus(t, mustTransition(t, s, tr), jobs.StatusCancelled, jobs.ReasonCancelled)
	wantChildren(t, s, run)
}

// testChainUnique: the store keeps one run per parent run and job, and a
// run of a chain names its parent, and only it does.
func testChainUnique(t *testing.T, s store.Store) {
	parent := chainParent(t, s, "etl", t0, once1)
	tr := jobs.Complete(fenceOf(parent), nodeB, jobs.Result{ExitCode: ptr(0)}, t0.Add(time.Minute))
	tr.Chain = testChain
	done := mustTransition(t, s, tr)
	kids := wantChildren(t, s, done, "report", "archive")

	p := store.RunInsertParams{Job: "report", Trigger: jobs.TriggerChain, ParentRunID: done.ID, Retry: retry3,
		Node: nodeA, Now: t0.Add(2 * time.Minute)}
	_, err := s.RunInsert(t.Context(), p)
	wantErr(t, err, store.ErrDuplicate)
	// Another job of the same parent, or the same job of another, is a
	// run of its own.
	p.Job = "page"
	page := mustInsert(t, s, p)
	if page.ParentRunID != done.ID || page.Trigger != jobs.TriggerChain {
		t.Fatalf("inserted child: %+v", *page)
	}
	p.Job, p.ParentRunID = "report", kids[0].ID
	mustInsert(t, s, p)

	p.ParentRunID = ""
	if _, err := s.RunInsert(t.Context(), p); err == nil || errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("a chain run without a parent: %v", err)
	}
	m := manual("report", t0)
	m.ParentRunID = done.ID
	if _, err := s.RunInsert(t.Context(), m); err == nil || errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("a manual run with a parent: %v", err)
	}
	p.ParentRunID = done.ID
	p.Job = "other"
	if _, err := s.RunInsertMany(t.Context(), []store.RunInsertParams{p}); err == nil {
		t.Fatal("RunInsertMany made a run of a chain")
	}
	if kids, err := s.RunChildren(t.Context(), "no-such-run"); err != nil || len(kids) != 0 {
		t.Fatalf("RunChildren of no run: %v, %v", kids, err)
	}
}

// testChainWindow: a child is due at its parent's end, or at its job's
// not_before when that is later, and expires at its job's not_after; a
// job whose not_after has passed gets no run.
func testChainWindow(t *testing.T, s store.Store) {
	parent := chainParent(t, s, "etl", t0, once1)
	end := t0.Add(time.Minute)
	tr := jobs.Complete(fenceOf(parent), nodeB, jobs.Result{ExitCode: ptr(0)}, end)
	tr.Chain = &jobs.Chain{OnSuccess: []jobs.ChainRun{
		{Job: "later", Retry: once1, NotBefore: end.Add(time.Hour), NotAfter: end.Add(2 * time.Hour)},
		{Job: "over", Retry: once1, NotAfter: end},
	}}
	mustTransition(t, s, tr)
	kids, err := s.RunChildren(t.Context(), parent.ID)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children: %v, %v", ids(kids), err)
	}
	k := kids[0]
	if k.Job != "later" || !k.NotBefore.Equal(end.Add(time.Hour)) || !k.NotAfter.Equal(end.Add(2*time.Hour)) || !k.ScheduledAt.Equal(end) {
		t.Fatalf("child: %+v", *k)
	}
}

// testChainConcurrent: ends of one attempt written at once by several
// writers (a completion, its repeat, a recovery) end it once, and its
// chain is made once.
func testChainConcurrent(t *testing.T, s store.Store) {
	const rounds = 8
	for i := range rounds {
		at := t0.Add(time.Duration(i) * time.Hour)
		run := chainParent(t, s, "etl", at, once1)
		ok := jobs.Complete(fenceOf(run), nodeB, jobs.Result{ExitCode: ptr(0)}, at.Add(time.Minute))
		lost := jobs.FailAttempt(run, fenceOf(run), nodeA, jobs.Result{}, jobs.ReasonNodeLost, at.Add(time.Minute), nil)
		ts := []jobs.Transition{ok, ok, lost, ok}
		errs := make([]error, len(ts))
		var wg sync.WaitGroup
		for k, tr := range ts {
			tr.Chain = testChain
			wg.Go(func() {
				if k%2 == 0 {
					_, errs[k] = s.RunTransition(t.Context(), tr)
					return
				}
				res, err := s.RunTransitionMany(t.Context(), []jobs.Transition{tr})
				if errs[k] = err; err == nil {
					errs[k] = res[0].Err
				}
			})
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
			t.Fatalf("round %d: %d ends won, want 1 (%v)", i, won, errs)
		}
		got := mustGet(t, s, run.ID)
		switch got.Status {
		case jobs.StatusCompleted:
			wantChildren(t, s, got, "report", "archive")
		case jobs.StatusDeadLetter:
			wantChildren(t, s, got, "page")
		default:
			t.Fatalf("round %d: run is %s", i, got.Status)
		}
	}
}
