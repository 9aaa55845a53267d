package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testInsertFields: a run reads back as it was made, with its creation event.
func testInsertFields(t *testing.T, s store.Store) {
	policy := jobs.RetryPolicy{MaxAttempts: 5, Backoff: jobs.BackoffExponential, InitialDelay: 2 * time.Second,
		MaxDelay: 5 * time.Minute, Jitter: true}
	p := store.RunInsertParams{Job: "report", Trigger: jobs.TriggerRerun, ScheduledAt: t0, NotBefore: t0.Add(time.Minute),
		NotAfter: t0.Add(time.Hour), Retry: policy, NoRetryExitCodes: []int{2, 3}, DedupID: "d-1", RerunOf: "older-run",
		Payload: `{"full":true}`, Node: nodeA, Now: t0.Add(time.Second)}
	r := mustInsert(t, s, p)
	if r.ID == "" || r.Job != "report" || r.Status != jobs.StatusPending || r.Attempt != 0 || r.MaxAttempts != 5 ||
		r.Trigger != jobs.TriggerRerun || r.DedupID != "d-1" || r.RerunOf != "older-run" || r.Payload != `{"full":true}` ||
		r.Retry != policy || !slices.Equal(r.NoRetryExitCodes, []int{2, 3}) || r.ExitCode != nil ||
		!r.StartedAt.IsZero() || !r.FinishedAt.IsZero() || r.Node != "" || r.Incarnation != "" || r.CancelRequested {
		t.Fatalf("inserted run: %+v", r)
	}
	wantTime(t, "scheduled_at", r.ScheduledAt, t0)
	wantTime(t, "not_before", r.NotBefore, t0.Add(time.Minute))
	wantTime(t, "not_after", r.NotAfter, t0.Add(time.Hour))
	wantTime(t, "created_at", r.CreatedAt, t0.Add(time.Second))
	if r.ScheduledAt.Location() != time.UTC {
		t.Errorf("times are in %s, want UTC", r.ScheduledAt.Location())
	}
	got := mustGet(t, s, r.ID)
	if got.ID != r.ID || got.Retry != policy || !got.NotAfter.Equal(r.NotAfter) || got.Payload != r.Payload {
		t.Fatalf("RunGet: %+v", got)
	}
	evs := mustEvents(t, s, r.ID)
	if len(evs) != 1 || evs[0].From != "" || evs[0].To != jobs.StatusPending || evs[0].Reason != jobs.ReasonCreated ||
		evs[0].Node != nodeA || evs[0].Attempt != 0 || !evs[0].Time.Equal(t0.Add(time.Second)) || evs[0].RunID != r.ID {
		t.Fatalf("creation event: %+v", evs)
	}
	attempts, err := s.RunAttempts(t.Context(), r.ID)
	if err != nil || len(attempts) != 0 {
		t.Fatalf("RunAttempts of a new run = %v, %v", attempts, err)
	}
	// An open window: no not_after.
	open := mustInsert(t, s, manual("report", t0))
	if !open.NotAfter.IsZero() {
		t.Fatalf("not_after = %s, want zero", open.NotAfter)
	}
	_, err = s.RunGet(t.Context(), "no-such-run")
	wantErr(t, err, store.ErrNotFound)
}

// testInsertValidation: a window whose not_after is not after not_before is refused.
func testInsertValidation(t *testing.T, s store.Store) {
	p := manual("report", t0)
	p.NotAfter = t0
	_, err := s.RunInsert(t.Context(), p)
	wantErr(t, err, jobs.ErrWindow)
	p = manual("report", t0)
	p.NotBefore, p.NotAfter = t0.Add(10*time.Minute), t0.Add(5*time.Minute)
	_, err = s.RunInsert(t.Context(), p)
	wantErr(t, err, jobs.ErrWindow)
	if runs := listRuns(t, s, "report"); len(runs) != 0 {
		t.Fatalf("a refused insert left %d runs", len(runs))
	}
}

// testInsertOnceOccurrence: a one-off job fires once, ever.
func testInsertOnceOccurrence(t *testing.T, s store.Store) {
	at := time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC)
	p := store.RunInsertParams{Job: "year-end", Trigger: jobs.TriggerOnce, ScheduledAt: at, NotBefore: at,
		Retry: retry3, Node: nodeA, Now: t0}
	mustInsert(t, s, p)
	_, err := s.RunInsert(t.Context(), p)
	wantErr(t, err, store.ErrDuplicate)

	claimed := claimOne(t, s, "year-end", incA, at)
	complete(t, s, claimed, at.Add(time.Minute))
	if n, err := s.RunsPrune(t.Context(), at.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("RunsPrune = %d, %v", n, err)
	}
	_, err = s.RunInsert(t.Context(), p)
	wantErr(t, err, store.ErrDuplicate)
	// Manual triggers of the same job at the same time are not occurrences.
	mustInsert(t, s, manual("year-end", at))
	mustInsert(t, s, manual("year-end", at))
}

// testInsertDedup: one active run per (job, dedup id); free again once terminal.
func testInsertDedup(t *testing.T, s store.Store) {
	ctx := t.Context()
	withID := func(job string, at time.Time) store.RunInsertParams {
		p := manual(job, at)
		p.DedupID = "nightly-42"
		return p
	}
	first := mustInsert(t, s, withID("reindex", t0))
	_, err := s.RunInsert(ctx, withID("reindex", t0.Add(time.Second)))
	wantErr(t, err, store.ErrDuplicate)
	// Another job may use the same id.
	mustInsert(t, s, withID("vacuum", t0))

	// Still refused while the first runs or waits for a retry.
	running := claimOne(t, s, "reindex", incA, t0.Add(time.Second))
	if running.ID != first.ID {
		t.Fatalf("claimed %s, want %s", running.ID, first.ID)
	}
	_, err = s.RunInsert(ctx, withID("reindex", t0.Add(2*time.Second)))
	wantErr(t, err, store.ErrDuplicate)
	retrying := fail(t, s, running, t0.Add(3*time.Second))
	if retrying.Status != jobs.StatusRetrying {
		t.Fatalf("after a failure the run is %s", retrying.Status)
	}
	_, err = s.RunInsert(ctx, withID("reindex", t0.Add(4*time.Second)))
	wantErr(t, err, store.ErrDuplicate)

	// Cancelled: the id is free.
	if _, err := s.RunCancel(ctx, userCancel(first.ID, nodeA, t0.Add(5*time.Second))); err != nil {
		t.Fatal(err)
	}
	second := mustInsert(t, s, withID("reindex", t0.Add(6*time.Second)))
	// Completed: the id is free.
	claimed := claimOne(t, s, "reindex", incA, t0.Add(7*time.Second))
	if claimed.ID != second.ID {
		t.Fatalf("claimed %s, want %s", claimed.ID, second.ID)
	}
	complete(t, s, claimed, t0.Add(8*time.Second))
	third := mustInsert(t, s, withID("reindex", t0.Add(9*time.Second)))
	if third.DedupID != "nightly-42" {
		t.Fatalf("dedup id = %q", third.DedupID)
	}
	// Runs without a dedup id never conflict.
	mustInsert(t, s, manual("reindex", t0.Add(10*time.Second)))
	mustInsert(t, s, manual("reindex", t0.Add(10*time.Second)))
}

// testInsertDedupConcurrent: concurrent triggers with one dedup id make one run.
func testInsertDedupConcurrent(t *testing.T, s store.Store) {
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ok, dup int
	)
	for range n {
		wg.Go(func() {
			p := manual("deploy", t0)
			p.DedupID = "release-7"
			_, err := s.RunInsert(t.Context(), p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case isErr(err, store.ErrDuplicate):
				dup++
			default:
				t.Errorf("RunInsert: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 1 || dup != n-1 {
		t.Fatalf("%d inserts succeeded and %d were duplicates; want 1 and %d", ok, dup, n-1)
	}
	if runs := listRuns(t, s, "deploy"); len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
}

// testInsertMany: a bulk insert makes every run or none.
func testInsertMany(t *testing.T, s store.Store) {
	ctx := t.Context()
	var ps []store.RunInsertParams
	for i := 0; i < 50; i++ {
		ps = append(ps, manual("bulk", t0.Add(time.Duration(i)*time.Second)))
	}
	runs, err := s.RunInsertMany(ctx, ps)
	if err != nil || len(runs) != 50 {
		t.Fatalf("RunInsertMany = %d runs, %v", len(runs), err)
	}
	for i, r := range runs {
		if r.Job != "bulk" || r.Status != jobs.StatusPending || !r.ScheduledAt.Equal(t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("run %d: %+v", i, r)
		}
	}
	// One duplicate occurrence in a batch: nothing of it is made.
	at := t0.Add(time.Hour)
	once := store.RunInsertParams{Job: "bulk", Trigger: jobs.TriggerOnce, ScheduledAt: at, NotBefore: at, Retry: retry3, Now: t0}
	mustInsert(t, s, once)
	_, err = s.RunInsertMany(ctx, []store.RunInsertParams{manual("bulk", t0), once, manual("bulk", t0)})
	wantErr(t, err, store.ErrDuplicate)
	all, err := s.RunsList(ctx, store.RunFilter{Job: "bulk", Limit: 1000})
	if err != nil || len(all) != 51 {
		t.Fatalf("after a refused batch: %d runs (want 51), %v", len(all), err)
	}
}
