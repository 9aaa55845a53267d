package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testJobResults: a run that completes or ends dead_letter records its
// job's last success or last failure in the transaction that ends it,
// whichever way it is written (one transition, a batch, a batch that names
// a run twice); the newest finish wins, whatever order the runs end in; a
// cancel, a retry and a stale (fenced) write record nothing; the results
// outlive the pruning of their runs; and the store's feed tells this
// process of every result once it is committed.
func testJobResults(t *testing.T, s store.Store) {
	ctx := t.Context()
	if rs, err := s.JobsResults(ctx, []string{"backup", "report"}); err != nil || len(rs) != 0 {
		t.Fatalf("JobsResults before any run ended = %v, %v; want none", rs, err)
	}
	feed := s.ResultFeed()
	seen := map[string]store.JobResult{}
	// waitFeed merges what the feed brings until job has want, as the
	// engine does: when the feed may have missed results (a listener that
	// connected after the run ended), they are read from the store.
	waitFeed := func(job string, want store.JobResult) {
		t.Helper()
		want.Job = job
		deadline := time.After(signalWait)
		for {
			rs, missed := feed.Take()
			if missed {
				all, err := s.JobsResults(ctx, []string{"backup", "report"})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range all {
					rs = append(rs, r)
				}
			}
			for _, r := range rs {
				cur := seen[r.Job]
				cur.Job = r.Job
				cur.Merge(r)
				seen[r.Job] = cur
			}
			if sameResult(seen[job], want) {
				return
			}
			select {
			case <-feed.Changed():
			case <-deadline:
				t.Fatalf("the feed brought %+v for %s, want %+v", seen[job], job, want)
			}
		}
	}
	wantResults := func(what string, want map[string]store.JobResult) {
		t.Helper()
		got, err := s.JobsResults(ctx, []string{"backup", "report", "never-ran"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: JobsResults = %+v, want %+v", what, got, want)
		}
		for job, w := range want {
			w.Job = job
			if !sameResult(got[job], w) {
				t.Fatalf("%s: JobsResults[%s] = %+v, want %+v", what, job, got[job], w)
			}
		}
	}

	// One transition.
	mustInsert(t, s, manual("backup", t0))
	b1 := claimOne(t, s, "backup", incA, t0.Add(time.Second))
	complete(t, s, b1, t0.Add(time.Minute))
	backup := store.JobResult{LastSuccess: t0.Add(time.Minute)}
	wantResults("a run completed", map[string]store.JobResult{"backup": backup})
	waitFeed("backup", backup)

	// A batch: two runs complete, the newer first, and one ends dead_letter.
	once := jobs.RetryPolicy{MaxAttempts: 1}
	var reports []*jobs.Run
	for i := range 3 {
		p := manual("report", t0.Add(time.Duration(i)*time.Millisecond))
		p.Retry = once
		mustInsert(t, s, p)
	}
	reports = mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: store.NewJobLimits(map[string]int{"report": 0}), Limit: 3, Now: t0.Add(time.Second)})
	if len(reports) != 3 {
		t.Fatalf("claimed %d runs of report, want 3", len(reports))
	}
	ok := jobs.Result{ExitCode: ptr(0)}
	bad := jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1")}
	batch := []jobs.Transition{
		jobs.Complete(fenceOf(reports[0]), nodeB, ok, t0.Add(5*time.Minute)),
		jobs.Complete(fenceOf(reports[1]), nodeB, ok, t0.Add(3*time.Minute)),
		jobs.FailAttempt(reports[2], fenceOf(reports[2]), nodeB, bad, jobs.ReasonFailed, t0.Add(4*time.Minute), nil),
	}
	res, err := s.RunTransitionMany(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("transition %d: %v", i, r.Err)
		}
	}
	wantStatus(t, res[2].Run, jobs.StatusDeadLetter, jobs.ReasonFailed)
	report := store.JobResult{LastSuccess: t0.Add(5 * time.Minute), LastFailure: t0.Add(4 * time.Minute)}
	wantResults("a batch", map[string]store.JobResult{"backup": backup, "report": report})
	waitFeed("report", report)

	// A batch that names a run twice is applied in order, each transition
	// on the run as the one before left it: the second write is stale.
	p := manual("report", t0.Add(time.Hour))
	p.Retry = once
	mustInsert(t, s, p)
	r4 := claimOne(t, s, "report", incA, t0.Add(time.Hour))
	res, err = s.RunTransitionMany(ctx, []jobs.Transition{
		jobs.Complete(fenceOf(r4), nodeB, ok, t0.Add(61*time.Minute)),
		jobs.FailAttempt(r4, fenceOf(r4), nodeB, bad, jobs.ReasonFailed, t0.Add(62*time.Minute), nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("a run twice in a batch: %v, %v; want the second refused", res[0].Err, res[1].Err)
	}
	report.LastSuccess = t0.Add(61 * time.Minute)
	wantResults("a run twice in a batch", map[string]store.JobResult{"backup": backup, "report": report})
	waitFeed("report", report)

	// An older success than the stored one, a cancel, a retry and a stale
	// write change nothing.
	mustInsert(t, s, manual("backup", t0.Add(2*time.Second)))
	b2 := claimOne(t, s, "backup", incA, t0.Add(2*time.Second))
	complete(t, s, b2, t0.Add(30*time.Second))
	pending := mustInsert(t, s, manual("backup", t0.Add(3*time.Second)))
	if _, err := s.RunCancel(ctx, store.RunCancelParams{ID: pending.ID, Node: nodeA, Reason: jobs.ReasonCancelled, Now: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, manual("backup", t0.Add(4*time.Second)))
	b3 := claimOne(t, s, "backup", incA, t0.Add(4*time.Second))
	retrying := fail(t, s, b3, t0.Add(2*time.Hour))
	wantStatus(t, retrying, jobs.StatusRetrying, jobs.ReasonFailed)
	_, err = s.RunTransition(ctx, jobs.Complete(fenceOf(b3), nodeB, ok, t0.Add(3*time.Hour)))
	wantErr(t, err, store.ErrFenced)
	wantResults("an older success, a cancel, a retry, a stale write", map[string]store.JobResult{"backup": backup, "report": report})

	// Pruning the runs keeps the results.
	if _, err := s.RunsPrune(ctx, t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if runs := listRuns(t, s, "report"); len(runs) != 0 {
		t.Fatalf("%d runs of report left after pruning", len(runs))
	}
	wantResults("after pruning", map[string]store.JobResult{"backup": backup, "report": report})
}

func sameResult(a, b store.JobResult) bool {
	return a.Job == b.Job && a.LastSuccess.Equal(b.LastSuccess) && a.LastFailure.Equal(b.LastFailure)
}

// signalWait bounds a wait for the store's feed: only a store that never
// tells it uses it up.
const signalWait = time.Minute
