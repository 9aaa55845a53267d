package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testClaimConcurrencyLimitConcurrent: nodes that claim a limited job at
// the same moment, many times over, while runs keep being made, never run
// more of it at once than its limit allows; an unlimited job next to it is
// claimed meanwhile.
//
// It takes seconds, also with -race on 2 cores. The bound is only there so
// that a claimer that never gets its runs fails the test rather than hangs
// it: under a whole make test on a slow host (other packages' daemons and
// servers on the same 2 cores) the SQLite variant once took more than a
// minute.
func testClaimConcurrencyLimitConcurrent(t *testing.T, s store.Store) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ClaimLimitRace(ctx, t, []store.Store{s}, 6)
}

// ClaimLimitRace makes runs of a job whose limit is 2 and of an unlimited
// one, while claimers goroutines, spread over the stores (nodes of one
// database), claim them and complete them. Each new run is due before the
// earlier ones, so claimers that read the queue a moment apart see
// different heads: a claim that trusted its own count of running runs would
// then start a third. ClaimLimitRace fails t when a job ever runs more runs
// at once than its limit, or when a run is claimed twice. Backends may call
// it with several Store values on one database.
func ClaimLimitRace(ctx context.Context, t *testing.T, stores []store.Store, claimers int) {
	t.Helper()
	const (
		limited = 120
		free    = 30
		want    = limited + free
	)
	limits := map[string]int{"limited": 2, "free": 0}
	jobLimits := store.NewJobLimits(limits)
	at := t0.Add(time.Hour)
	var (
		wg   sync.WaitGroup
		done atomic.Int64
		// held counts, per job, the runs that a claimer holds: it grows
		// after a claim commits and shrinks before the completion is
		// written, so it never exceeds the job's running runs in the store.
		held    = map[string]*atomic.Int64{}
		mu      sync.Mutex
		claimed = map[string]string{}
	)
	for job := range limits {
		held[job] = new(atomic.Int64)
	}
	wg.Go(func() {
		for i := range want {
			job := "limited"
			if i%5 == 4 {
				job = "free"
			}
			p := manual(job, t0)
			p.NotBefore = t0.Add(-time.Duration(i) * time.Millisecond)
			if _, err := stores[i%len(stores)].RunInsert(ctx, p); err != nil {
				t.Errorf("RunInsert: %v", err)
				return
			}
		}
	})
	for n := range claimers {
		s := stores[n%len(stores)]
		node, inc := fmt.Sprintf("node-%d", n), fmt.Sprintf("inc-race-%d", n)
		wg.Go(func() {
			for done.Load() < want {
				if ctx.Err() != nil {
					t.Errorf("%s: %d of %d runs done: %v", node, done.Load(), want, ctx.Err())
					return
				}
				got, err := s.RunsClaim(ctx, store.ClaimParams{Node: node, Incarnation: inc, Jobs: jobLimits, Limit: 3, Now: at})
				if err != nil {
					t.Errorf("RunsClaim: %v", err)
					return
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				for _, r := range got {
					if n := held[r.Job].Add(1); limits[r.Job] > 0 && n > int64(limits[r.Job]) {
						t.Errorf("%d runs of %s run at once, its limit is %d", n, r.Job, limits[r.Job])
					}
					mu.Lock()
					if prev, dup := claimed[r.ID]; dup {
						t.Errorf("run %s claimed by %s and %s", r.ID, prev, inc)
					}
					claimed[r.ID] = inc
					mu.Unlock()
				}
				for _, r := range got {
					held[r.Job].Add(-1)
					res := jobs.Result{ExitCode: ptr(0)}
					if _, err := s.RunTransition(ctx, jobs.Complete(fenceOf(r), node, res, at.Add(time.Second))); err != nil {
						t.Errorf("complete %s: %v", r.ID, err)
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := done.Load(); got != want {
		t.Fatalf("%d runs done, want %d", got, want)
	}
	for job := range limits {
		for _, r := range listRuns(t, stores[0], job) {
			if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
				t.Fatalf("run after the race: %+v", r)
			}
		}
	}
}

// testStoreClock: a zero Now means the store's clock, for every method that
// takes one: runs are made and claimed now, windows are judged by it, and a
// node's age is measured with it.
func testStoreClock(t *testing.T, s store.Store) {
	ctx := t.Context()
	// The store's clock and this process's may differ a little (a database
	// on another machine).
	const skew = 10 * time.Second
	near := func(what string, got time.Time, lo, hi time.Time) {
		t.Helper()
		if got.Before(lo.Add(-skew)) || got.After(hi.Add(skew)) {
			t.Fatalf("%s = %s, want between %s and %s", what, got.Format(time.RFC3339Nano),
				lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
		}
	}
	before := time.Now()
	run := mustInsert(t, s, store.RunInsertParams{Job: "now", Trigger: jobs.TriggerManual, Retry: retry3, Node: nodeA})
	after := time.Now()
	near("created_at", run.CreatedAt, before, after)
	wantTime(t, "scheduled_at", run.ScheduledAt, run.CreatedAt)
	wantTime(t, "not_before", run.NotBefore, run.CreatedAt)

	later := store.RunInsertParams{Job: "later", Trigger: jobs.TriggerManual, NotBefore: time.Now().Add(time.Hour), Retry: retry3}
	mustInsert(t, s, later)
	// A window that ended before the store's now is refused.
	_, err := s.RunInsert(ctx, store.RunInsertParams{Job: "now", Trigger: jobs.TriggerManual, NotAfter: time.Now().Add(-time.Hour), Retry: retry3})
	wantErr(t, err, jobs.ErrWindow)

	claimed := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"now": 1, "later": 0}), Limit: 5})
	if len(claimed) != 1 || claimed[0].ID != run.ID {
		t.Fatalf("claim at the store's now: %v, want [%s]", ids(claimed), run.ID)
	}
	near("started_at", claimed[0].StartedAt, before, time.Now())
	done := mustTransition(t, s, jobs.Complete(fenceOf(claimed[0]), nodeB, jobs.Result{ExitCode: ptr(0)}, time.Time{}))
	if done.FinishedAt.Before(done.StartedAt) {
		t.Fatalf("finished at %s, before it started at %s", done.FinishedAt, done.StartedAt)
	}
	near("finished_at", done.FinishedAt, before, time.Now())

	// Expiry by the store's clock.
	p := store.RunInsertParams{Job: "stale", Trigger: jobs.TriggerManual, NotBefore: time.Now().Add(-2 * time.Hour),
		NotAfter: time.Now().Add(-time.Hour), Retry: retry3}
	stale := mustInsert(t, s, p)
	expired, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: nodeA})
	if err != nil || len(expired) != 1 || expired[0].ID != stale.ID {
		t.Fatalf("RunsExpire at the store's now = %v, %v; want [%s]", ids(expired), err, stale.ID)
	}
	near("finished_at of the expired run", expired[0].FinishedAt, before, time.Now())

	cur, err := s.SchedulePause(ctx, "paused", true, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	near("cursor of a paused job", cur.Last, before, time.Now())

	if _, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "clock-1", Incarnation: incA}); err != nil {
		t.Fatal(err)
	}
	if err := s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "clock-1", Incarnation: incA}); err != nil {
		t.Fatal(err)
	}
	nodes, err := s.NodesList(ctx, true)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("NodesList = %v, %v", nodes, err)
	}
	near("heartbeat", nodes[0].HeartbeatAt, before, time.Now())
	if age := nodes[0].Age; age < 0 || age > time.Minute {
		t.Fatalf("age of a node that just beat: %s", age)
	}
}

// testBinaryText: output and payloads are kept byte for byte, whatever the
// bytes; free text that a database cannot store as it is (NUL bytes,
// invalid UTF-8) never makes a write about an attempt fail.
func testBinaryText(t *testing.T, s store.Store) {
	ctx := t.Context()
	raw := "head\x00\xff\xfe tail \xe2\x82"
	p := manual("bytes", t0)
	p.Payload = raw
	made := mustInsert(t, s, p)
	if got := mustGet(t, s, made.ID); got.Payload != raw {
		t.Fatalf("payload = %q, want %q", got.Payload, raw)
	}
	run := claimOne(t, s, "bytes", incA, t0)
	if err := s.RunProgress(ctx, fenceOf(run), 10, "step\x00 \xff"); err != nil {
		t.Fatalf("progress with odd bytes: %v", err)
	}
	res := jobs.Result{ExitCode: ptr(3), Err: fmt.Errorf("exit \x00 \xff"), Output: raw, OutputBytes: int64(len(raw))}
	mustTransition(t, s, jobs.FailAttempt(run, fenceOf(run), nodeB, res, jobs.ReasonFailed, t0.Add(time.Second), nil))
	attempts, err := s.RunAttempts(ctx, run.ID)
	if err != nil || len(attempts) != 1 {
		t.Fatalf("RunAttempts = %v, %v", attempts, err)
	}
	if attempts[0].Output != raw || attempts[0].OutputBytes != int64(len(raw)) {
		t.Fatalf("output = %q (%d bytes), want %q", attempts[0].Output, attempts[0].OutputBytes, raw)
	}
	if attempts[0].Error == "" {
		t.Fatal("the attempt lost its error")
	}
}
