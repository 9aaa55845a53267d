package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Run runs the conformance suite against stores made by open; each call of
// open returns a fresh, empty, migrated store of its own (a database of its
// own), so the cases share nothing and run in parallel: open is called from
// several subtests at once. Run closes each store when its subtest ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"FireOccurrenceOnce", testFireOccurrenceOnce},
		{"ClaimOrderAcrossJobs", testClaimOrderAcrossJobs},
		{"FireConcurrent", testFireConcurrent},
		{"FireCursorCAS", testFireCursorCAS},
		{"FireOverlapSkip", testFireOverlapSkip},
		{"FireOverlapReplace", testFireOverlapReplace},
		{"FireOverlapAllowQueue", testFireOverlapAllowQueue},
		{"FireOverlapSeveralTicks", testFireOverlapSeveralTicks},
		{"SchedulePause", testSchedulePause},
		{"FireAheadDeferred", testFireAheadDeferred},
		{"Withdraw", testWithdraw},
		{"PauseWithdraws", testPauseWithdraws},
		{"WithdrawAfterStepBack", testWithdrawAfterStepBack},
		{"FiresBatch", testFiresBatch},
		{"FiresBatchCAS", testFiresBatchCAS},
		{"FiresBatchConcurrent", testFiresBatchConcurrent},
		{"InsertFields", testInsertFields},
		{"InsertValidation", testInsertValidation},
		{"InsertOnceOccurrence", testInsertOnceOccurrence},
		{"InsertDedup", testInsertDedup},
		{"InsertMany", testInsertMany},
		{"InsertDedupConcurrent", testInsertDedupConcurrent},
		{"ClaimWindow", testClaimWindow},
		{"ClaimDeclaredJobsAndLimit", testClaimDeclaredJobsAndLimit},
		{"ClaimConcurrencyLimit", testClaimConcurrencyLimit},
		{"ClaimBacklog", testClaimBacklog},
		{"ClaimPastTheScan", testClaimPastTheScan},
		{"ClaimFirstJobAtLimit", testClaimFirstJobAtLimit},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimReturnsStored", testClaimReturnsStored},
		{"ClaimConcurrencyLimitConcurrent", testClaimConcurrencyLimitConcurrent},
		// Due is a hint: with it on every claim, claims take the same runs.
		{"ClaimDeclaredJobsAndLimitDue", asDue(testClaimDeclaredJobsAndLimit)},
		{"ClaimConcurrencyLimitDue", asDue(testClaimConcurrencyLimit)},
		{"ClaimBacklogDue", asDue(testClaimBacklog)},
		{"ClaimFirstJobAtLimitDue", asDue(testClaimFirstJobAtLimit)},
		{"ClaimConcurrentDue", asDue(testClaimConcurrent)},
		{"ClaimConcurrencyLimitConcurrentDue", asDue(testClaimConcurrencyLimitConcurrent)},
		{"TransitionComplete", testTransitionComplete},
		{"TransitionFenced", testTransitionFenced},
		{"RetryDueAfterItsEnd", testRetryDueAfterItsEnd},
		{"RetryPastItsWindow", testRetryPastItsWindow},
		{"TransitionInvalid", testTransitionInvalid},
		{"TransitionRetryAndDeadLetter", testTransitionRetryAndDeadLetter},
		{"TransitionRace", testTransitionRace},
		{"TransitionsBatch", testTransitionsBatch},
		{"TransitionsBatchDistinct", testTransitionsBatchDistinct},
		{"TransitionsBatchMany", testTransitionsBatchMany},
		{"TransitionsBatchConcurrent", testTransitionsBatchConcurrent},
		{"ClaimHistory", testClaimHistory},
		{"Cancel", testCancel},
		{"Actors", testActors},
		{"Expire", testExpire},
		{"Progress", testProgress},
		{"AttemptsClipped", testAttemptsClipped},
		{"RunsRunningAndNextDue", testRunsRunningAndNextDue},
		{"Prune", testPrune},
		{"PruneInPages", testPruneInPages},
		{"ListAndLastRun", testListAndLastRun},
		{"ListDefaultLimit", testListDefaultLimit},
		{"ListPages", testListPages},
		{"RunsStats", testRunsStats},
		{"RunsCount", testRunsCount},
		{"Nodes", testNodes},
		{"ManyJobNames", testManyJobNames},
		{"StoreClock", testStoreClock},
		{"BinaryText", testBinaryText},
		{"Ping", testPing},
		{"JobResults", testJobResults},
		{"NotifyTransition", testNotifyTransition},
		{"NotifySuppression", testNotifySuppression},
		{"NotifyDeadLetterAfterFailed", testNotifyDeadLetterAfterFailed},
		{"NotifyClaimLease", testNotifyClaimLease},
		{"NotifyRetryAndFailed", testNotifyRetryAndFailed},
		{"NotifyClaimConcurrent", testNotifyClaimConcurrent},
		{"NotifyExpire", testNotifyExpire},
		{"NotifyOverdue", testNotifyOverdue},
		{"NotifySkipped", testNotifySkipped},
		{"Expectations", testExpectations},
		{"ExpectationForget", testExpectationForget},
		{"ChainSuccessAndFailure", testChainSuccessAndFailure},
		{"ChainBatch", testChainBatch},
		{"ChainExpire", testChainExpire},
		{"ChainCancel", testChainCancel},
		{"ChainUnique", testChainUnique},
		{"ChainWindow", testChainWindow},
		{"ChainConcurrent", testChainConcurrent},
		{"BackfillSkipsTaken", testBackfillSkipsTaken},
		{"BackfillConcurrent", testBackfillConcurrent},
		{"BackfillMaxParallel", testBackfillMaxParallel},
		{"BackfillMaxParallelShared", testBackfillMaxParallelShared},
		{"BackfillsActiveOfNamedJobs", testBackfillsActiveOfNamedJobs},
	}
	running := make(chan struct{}, parallelCases)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			running <- struct{}{}
			t.Cleanup(func() { <-running }) // after the store's own cleanups
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// parallelCases bounds the cases that run at once, below go test's
// -parallel (GOMAXPROCS by default, so 2 on a 2-core machine) on a larger
// machine: each case holds a database, and on PostgreSQL a store of up to
// a dozen connections to a test server that takes 200.
const parallelCases = 4

// t0 is the pinned time most tests start at.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	nodeA = "node-a"
	nodeB = "node-b"
	incA  = "0b7c6a52-inc-a"
	incB  = "2f1d9e04-inc-b"
)

// retry3 is the policy of most test runs: three attempts, 10s apart.
var retry3 = jobs.RetryPolicy{MaxAttempts: 3, Backoff: jobs.BackoffFixed, InitialDelay: 10 * time.Second}

func ptr[T any](v T) *T { return &v }

// manual describes a manual run of job made at at.
func manual(job string, at time.Time) store.RunInsertParams {
	return store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: at, NotBefore: at,
		Retry: retry3, Node: nodeA, Now: at}
}

// tick describes the run of a cron tick of job at at.
func tick(job string, at time.Time) store.RunInsertParams {
	return store.RunInsertParams{Job: job, Trigger: jobs.TriggerSchedule, ScheduledAt: at, NotBefore: at,
		Retry: retry3, Node: nodeA, Now: at}
}

// InsertBacklog makes a manual run of each of jobNames, in that order and
// in one RunInsertMany: the i-th made and due at at plus i milliseconds.
func InsertBacklog(t *testing.T, s store.Store, at time.Time, jobNames ...string) []*jobs.Run {
	t.Helper()
	ps := make([]store.RunInsertParams, len(jobNames))
	for i, job := range jobNames {
		ps[i] = manual(job, at.Add(time.Duration(i)*time.Millisecond))
	}
	runs, err := s.RunInsertMany(t.Context(), ps)
	if err != nil {
		t.Fatalf("RunInsertMany of %d runs: %v", len(ps), err)
	}
	return runs
}

// userCancel describes a cancel of run id that a user asked node for at at.
func userCancel(id, node string, at time.Time) store.RunCancelParams {
	return store.RunCancelParams{ID: id, Node: node, Reason: jobs.ReasonCancelled, Now: at}
}

func mustInsert(t *testing.T, s store.Store, p store.RunInsertParams) *jobs.Run {
	t.Helper()
	r, err := s.RunInsert(t.Context(), p)
	if err != nil {
		t.Fatalf("RunInsert(%s): %v", p.Job, err)
	}
	return r
}

func mustFire(t *testing.T, s store.Store, p store.FireParams) *store.FireResult {
	t.Helper()
	res, err := s.ScheduleFire(t.Context(), p)
	if err != nil {
		t.Fatalf("ScheduleFire(%s): %v", p.Job, err)
	}
	return res
}

func mustClaim(t *testing.T, s store.Store, p store.ClaimParams) []*jobs.Run {
	t.Helper()
	runs, err := s.RunsClaim(t.Context(), p)
	if err != nil {
		t.Fatalf("RunsClaim: %v", err)
	}
	return runs
}

// claimOne claims the one due run of job for nodeB/inc at at.
func claimOne(t *testing.T, s store.Store, job, inc string, at time.Time) *jobs.Run {
	t.Helper()
	runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: inc, Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 1, Now: at})
	if len(runs) != 1 {
		t.Fatalf("claim %s at %s: got %d runs, want 1", job, at.Format(time.TimeOnly), len(runs))
	}
	return runs[0]
}

func fenceOf(r *jobs.Run) jobs.Fence {
	return jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
}

func mustTransition(t *testing.T, s store.Store, tr jobs.Transition) *jobs.Run {
	t.Helper()
	r, err := s.RunTransition(t.Context(), tr)
	if err != nil {
		t.Fatalf("RunTransition(%s -> %s): %v", tr.RunID, tr.To, err)
	}
	return r
}

// complete ends the running attempt of r successfully at at.
func complete(t *testing.T, s store.Store, r *jobs.Run, at time.Time) *jobs.Run {
	t.Helper()
	res := jobs.Result{ExitCode: ptr(0), Output: "done\n", OutputBytes: 5}
	return mustTransition(t, s, jobs.Complete(fenceOf(r), r.Node, res, at))
}

// fail ends the running attempt of r with exit code 1 at at, through the retry flow.
func fail(t *testing.T, s store.Store, r *jobs.Run, at time.Time) *jobs.Run {
	t.Helper()
	res := jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1"), Output: "boom\n", OutputBytes: 5}
	return mustTransition(t, s, jobs.FailAttempt(r, fenceOf(r), r.Node, res, jobs.ReasonFailed, at, nil))
}

func mustGet(t *testing.T, s store.Store, id string) *jobs.Run {
	t.Helper()
	r, err := s.RunGet(t.Context(), id)
	if err != nil {
		t.Fatalf("RunGet(%s): %v", id, err)
	}
	return r
}

func mustEvents(t *testing.T, s store.Store, id string) []*jobs.Event {
	t.Helper()
	evs, err := s.RunEvents(t.Context(), id)
	if err != nil {
		t.Fatalf("RunEvents(%s): %v", id, err)
	}
	return evs
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

func wantStatus(t *testing.T, r *jobs.Run, status jobs.Status, reason jobs.Reason) {
	t.Helper()
	if r.Status != status || r.Reason != reason {
		t.Fatalf("run %s is %s (%s), want %s (%s)", r.ID, r.Status, r.Reason, status, reason)
	}
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %s, want %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

// listRuns returns every run of job, newest first.
func listRuns(t *testing.T, s store.Store, job string) []*jobs.Run {
	t.Helper()
	runs, err := s.RunsList(t.Context(), store.RunFilter{Job: job, Limit: 10000})
	if err != nil {
		t.Fatalf("RunsList(%s): %v", job, err)
	}
	return runs
}

// runsPerTick counts the runs of job per scheduled time.
func runsPerTick(t *testing.T, s store.Store, job string) map[time.Time]int {
	t.Helper()
	m := map[time.Time]int{}
	for _, r := range listRuns(t, s, job) {
		m[r.ScheduledAt.UTC()]++
	}
	return m
}

// sameRun compares the fields of two reads of a run.
func sameRun(t *testing.T, what string, got, want *jobs.Run) {
	t.Helper()
	if got.Status != want.Status || got.Attempt != want.Attempt || got.Incarnation != want.Incarnation ||
		got.Reason != want.Reason || got.Error != want.Error || !got.FinishedAt.Equal(want.FinishedAt) ||
		!got.NotBefore.Equal(want.NotBefore) || got.Progress != want.Progress || got.CancelRequested != want.CancelRequested {
		t.Fatalf("%s: run changed:\n got %+v\nwant %+v", what, got, want)
	}
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// asDue runs test on s with Due set on every claim.
func asDue(test func(*testing.T, store.Store)) func(*testing.T, store.Store) {
	return func(t *testing.T, s store.Store) { test(t, dueClaims{s}) }
}

// dueClaims is a store whose claims all say that runs are due.
type dueClaims struct{ store.Store }

func (d dueClaims) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	p.Due = true
	return d.Store.RunsClaim(ctx, p)
}
