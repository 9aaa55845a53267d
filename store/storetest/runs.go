package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testCancel: RunCancel of a waiting, a running, a finished and an unknown run.
func testCancel(t *testing.T, s store.Store) {
	ctx := t.Context()
	pending := mustInsert(t, s, manual("a", t0))
	got, err := s.RunCancel(ctx, userCancel(pending.ID, nodeA, t0.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, got, jobs.StatusCancelled, jobs.ReasonCancelled)
	wantTime(t, "finished_at", got.FinishedAt, t0.Add(time.Second))
	evs := mustEvents(t, s, pending.ID)
	wantEvents(t, evs[1:], []jobs.Event{{RunID: pending.ID, Time: t0.Add(time.Second), Node: nodeA,
		From: jobs.StatusPending, To: jobs.StatusCancelled, Reason: jobs.ReasonCancelled}})

	// Running: the owner is asked to stop; the run stays running.
	mustInsert(t, s, manual("b", t0))
	running := claimOne(t, s, "b", incA, t0)
	got, err = s.RunCancel(ctx, userCancel(running.ID, nodeA, t0.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != jobs.StatusRunning || !got.CancelRequested {
		t.Fatalf("cancel of a running run: %+v", got)
	}
	for inc, want := range map[string]int{incA: 1, incB: 0} {
		ids, err := s.RunsCancelRequested(ctx, inc)
		if err != nil || len(ids) != want {
			t.Fatalf("RunsCancelRequested(%s) = %v, %v; want %d", inc, ids, err, want)
		}
	}
	// Asking twice is harmless.
	if _, err := s.RunCancel(ctx, userCancel(running.ID, nodeA, t0.Add(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	stopped := mustTransition(t, s, jobs.Finish(running, fenceOf(running), nodeB,
		jobs.Result{Reason: jobs.ReasonCancelled, Output: "stopped\n", OutputBytes: 8}, t0.Add(3*time.Second), nil))
	wantStatus(t, stopped, jobs.StatusCancelled, jobs.ReasonCancelled)
	if ids, _ := s.RunsCancelRequested(ctx, incA); len(ids) != 0 {
		t.Fatalf("RunsCancelRequested after the stop = %v", ids)
	}
	attempts, err := s.RunAttempts(ctx, running.ID)
	if err != nil || len(attempts) != 1 || attempts[0].Status != jobs.StatusCancelled || attempts[0].Output != "stopped\n" {
		t.Fatalf("attempt of the stopped run: %+v, %v", attempts, err)
	}

	// Retrying: cancelled at once.
	mustInsert(t, s, manual("c", t0))
	retrying := fail(t, s, claimOne(t, s, "c", incA, t0), t0.Add(time.Second))
	got, err = s.RunCancel(ctx, userCancel(retrying.ID, nodeA, t0.Add(2*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, got, jobs.StatusCancelled, jobs.ReasonCancelled)

	// Finished and unknown runs.
	_, err = s.RunCancel(ctx, userCancel(pending.ID, nodeA, t0.Add(time.Minute)))
	wantErr(t, err, jobs.ErrInvalidTransition)
	_, err = s.RunCancel(ctx, userCancel("no-such-run", nodeA, t0))
	wantErr(t, err, store.ErrNotFound)
}

// testExpire: waiting runs past not_after are cancelled with reason expired.
func testExpire(t *testing.T, s store.Store) {
	ctx := t.Context()
	deadline := t0.Add(5 * time.Minute)
	p := manual("window", t0)
	p.NotAfter = deadline
	pending := mustInsert(t, s, p)

	p = manual("retry", t0)
	p.NotAfter = deadline
	mustInsert(t, s, p)
	retrying := fail(t, s, claimOne(t, s, "retry", incA, t0), t0.Add(time.Second))

	p = manual("busy", t0)
	p.NotAfter = deadline
	mustInsert(t, s, p)
	running := claimOne(t, s, "busy", incA, t0)

	open := mustInsert(t, s, manual("open", t0))
	later := manual("later", t0)
	later.NotAfter = deadline.Add(time.Second)
	laterRun := mustInsert(t, s, later)

	if got, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: nodeA, Now: deadline.Add(-time.Second)}); err != nil || len(got) != 0 {
		t.Fatalf("RunsExpire before the deadline = %v, %v", ids(got), err)
	}
	got, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: nodeA, Now: deadline})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("RunsExpire expired %d runs, want 2", len(got))
	}
	for _, id := range []string{pending.ID, retrying.ID} {
		r := mustGet(t, s, id)
		wantStatus(t, r, jobs.StatusCancelled, jobs.ReasonExpired)
		wantTime(t, "finished_at", r.FinishedAt, deadline)
		evs := mustEvents(t, s, id)
		if e := evs[len(evs)-1]; e.To != jobs.StatusCancelled || e.Reason != jobs.ReasonExpired || e.Node != nodeA || !e.Time.Equal(deadline) {
			t.Fatalf("expiry event: %+v", e)
		}
	}
	for _, id := range []string{running.ID, open.ID, laterRun.ID} {
		if r := mustGet(t, s, id); r.Status.Terminal() {
			t.Fatalf("run %s of %s expired", r.Status, r.Job)
		}
	}
	if got, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: nodeA, Now: deadline}); err != nil || len(got) != 0 {
		t.Fatalf("second RunsExpire = %v, %v", ids(got), err)
	}
}

// testProgress: progress is fenced, and a new attempt starts from zero.
func testProgress(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustInsert(t, s, manual("long", t0))
	run := claimOne(t, s, "long", incA, t0)
	if err := s.RunProgress(ctx, fenceOf(run), 45, "step 3 of 7"); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, run.ID)
	if got.Progress != 45 || got.ProgressMessage != "step 3 of 7" {
		t.Fatalf("progress: %d %q", got.Progress, got.ProgressMessage)
	}
	err := s.RunProgress(ctx, jobs.Fence{RunID: run.ID, Attempt: 1, Incarnation: incB}, 90, "stale")
	wantErr(t, err, store.ErrFenced)
	if got := mustGet(t, s, run.ID); got.Progress != 45 {
		t.Fatalf("fenced progress wrote %d", got.Progress)
	}
	retry := fail(t, s, run, t0.Add(time.Second))
	err = s.RunProgress(ctx, fenceOf(run), 50, "after the attempt")
	wantErr(t, err, store.ErrFenced)
	second := claimOne(t, s, "long", incA, retry.NotBefore)
	if second.Progress != 0 || second.ProgressMessage != "" {
		t.Fatalf("progress of a new attempt: %d %q", second.Progress, second.ProgressMessage)
	}
}

// testRunsRunningAndNextDue: a node's running runs, and the next due time.
func testRunsRunningAndNextDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	next, err := s.RunsNextDue(ctx, []string{"a", "b"}, time.Time{})
	if err != nil || !next.IsZero() {
		t.Fatalf("RunsNextDue of an empty store = %s, %v", next, err)
	}
	for i := range 3 {
		mustInsert(t, s, manual("a", t0.Add(time.Duration(i)*time.Second)))
	}
	later := manual("b", t0)
	later.NotBefore = t0.Add(time.Hour)
	mustInsert(t, s, later)
	mustInsert(t, s, manual("c", t0.Add(-time.Hour)))

	first := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"a": 0}), Limit: 1, Now: t0.Add(time.Minute)})
	second := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incB, Jobs: store.NewJobLimits(map[string]int{"a": 0}), Limit: 1, Now: t0.Add(time.Minute)})
	mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: store.NewJobLimits(map[string]int{"a": 0}), Limit: 1, Now: t0.Add(time.Minute)})

	running, err := s.RunsRunning(ctx, nodeA)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(sortedIDs(running)), fmt.Sprint(sortedIDs(append(first, second...))); got != want {
		t.Fatalf("RunsRunning(%s) = %s, want %s", nodeA, got, want)
	}
	if running, _ := s.RunsRunning(ctx, "node-z"); len(running) != 0 {
		t.Fatalf("RunsRunning of an unknown node = %v", ids(running))
	}
	complete(t, s, first[0], t0.Add(2*time.Minute))
	if running, _ := s.RunsRunning(ctx, nodeA); len(running) != 1 || running[0].ID != second[0].ID {
		t.Fatalf("RunsRunning after a completion = %v", ids(running))
	}

	// Running runs and other jobs do not count; the pending "b" run does.
	next, err = s.RunsNextDue(ctx, []string{"a", "b"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due", next, t0.Add(time.Hour))
	next, err = s.RunsNextDue(ctx, []string{"b", "c"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due with c", next, t0.Add(-time.Hour))
	// The names may come in any order.
	next, err = s.RunsNextDue(ctx, []string{"b", "a"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due of b and a", next, t0.Add(time.Hour))
	next, err = s.RunsNextDue(ctx, []string{"zz", "c", "b"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due of zz, c and b", next, t0.Add(-time.Hour))
	// After a time: a run due already (waiting for its job's limit, say)
	// does not hide one that becomes due later.
	next, err = s.RunsNextDue(ctx, []string{"b", "c"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due of b and c after t0", next, t0.Add(time.Hour))
	next, err = s.RunsNextDue(ctx, []string{"b", "c"}, t0.Add(time.Hour))
	if err != nil || !next.IsZero() {
		t.Fatalf("next due of b and c after b's not_before = %s, %v; want none", next, err)
	}
}

func sortedIDs(runs []*jobs.Run) []string {
	out := ids(runs)
	slices.Sort(out)
	return out
}

// testPrune: finished runs older than the horizon go with their events and
// attempts; active and recent runs stay; a pruned tick cannot fire again.
func testPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	horizon := t0.Add(time.Hour)

	// An old finished run of a cron tick.
	tickAt := t0
	fired := mustFire(t, s, store.FireParams{Job: "cron", Cursor: tickAt, Runs: []store.RunInsertParams{tick("cron", tickAt)},
		Overlap: jobs.OverlapAllow, Node: nodeA, Now: tickAt})
	old := claimOne(t, s, "cron", incA, tickAt)
	if old.ID != fired.Created[0].ID {
		t.Fatal("claimed another run")
	}
	complete(t, s, old, t0.Add(time.Minute))
	// An old cancelled run and an old dead one.
	cancelled := mustInsert(t, s, manual("manual", t0))
	if _, err := s.RunCancel(ctx, userCancel(cancelled.ID, nodeA, t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	p := manual("once-only", t0)
	p.Retry.MaxAttempts = 1
	mustInsert(t, s, p)
	dead := fail(t, s, claimOne(t, s, "once-only", incA, t0), t0.Add(2*time.Minute))
	wantStatus(t, dead, jobs.StatusDeadLetter, jobs.ReasonFailed)
	// Old but active runs, and a recent finished one.
	waiting := mustInsert(t, s, manual("waiting", t0))
	mustInsert(t, s, manual("busy", t0))
	busy := claimOne(t, s, "busy", incA, t0)
	mustInsert(t, s, manual("recent", t0))
	recent := complete(t, s, claimOne(t, s, "recent", incA, t0), horizon)

	n, err := s.RunsPrune(ctx, horizon)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("RunsPrune = %d, want 3", n)
	}
	for _, id := range []string{old.ID, cancelled.ID, dead.ID} {
		_, err := s.RunGet(ctx, id)
		wantErr(t, err, store.ErrNotFound)
		if evs, err := s.RunEvents(ctx, id); err == nil && len(evs) != 0 {
			t.Fatalf("pruned run %s kept %d events", id, len(evs))
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if as, err := s.RunAttempts(ctx, id); err == nil && len(as) != 0 {
			t.Fatalf("pruned run %s kept %d attempts", id, len(as))
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	for _, id := range []string{waiting.ID, busy.ID, recent.ID} {
		mustGet(t, s, id)
		if len(mustEvents(t, s, id)) == 0 {
			t.Fatalf("kept run %s lost its events", id)
		}
	}
	// The occurrence of the pruned tick stays.
	res := mustFire(t, s, store.FireParams{Job: "cron", Expect: tickAt, Cursor: tickAt, Runs: []store.RunInsertParams{tick("cron", tickAt)},
		Overlap: jobs.OverlapAllow, Node: nodeA, Now: horizon})
	if len(res.Created) != 0 || res.Duplicates != 1 {
		t.Fatalf("refire of a pruned tick: created %d, duplicates %d", len(res.Created), res.Duplicates)
	}
	if n, err := s.RunsPrune(ctx, horizon); err != nil || n != 0 {
		t.Fatalf("second RunsPrune = %d, %v", n, err)
	}
}

// testListAndLastRun: RunsList filters and orders newest first; JobsLastRun.
func testListAndLastRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	var made []*jobs.Run
	for i := range 6 {
		job := "even"
		if i%2 == 1 {
			job = "odd"
		}
		made = append(made, mustInsert(t, s, manual(job, t0.Add(time.Duration(i)*time.Minute))))
	}
	// Two runs made at the same instant are ordered by id, newest first.
	same1 := mustInsert(t, s, manual("odd", t0.Add(10*time.Minute)))
	same2 := mustInsert(t, s, manual("odd", t0.Add(10*time.Minute)))
	complete(t, s, claimOne(t, s, "even", incA, t0.Add(time.Hour)), t0.Add(time.Hour))

	all, err := s.RunsList(ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 8 {
		t.Fatalf("RunsList = %d runs, want 8", len(all))
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.CreatedAt.Before(b.CreatedAt) || (a.CreatedAt.Equal(b.CreatedAt) && a.ID < b.ID) {
			t.Fatalf("RunsList not newest first at %d: %s %s, %s %s", i, a.CreatedAt, a.ID, b.CreatedAt, b.ID)
		}
	}
	newer, older := same2, same1
	if newer.ID < older.ID {
		newer, older = older, newer
	}
	if all[0].ID != newer.ID || all[1].ID != older.ID {
		t.Fatalf("runs made at one instant: got %s %s, want %s %s", all[0].ID, all[1].ID, newer.ID, older.ID)
	}

	odd, err := s.RunsList(ctx, store.RunFilter{Job: "odd", Limit: 2})
	if err != nil || len(odd) != 2 || odd[0].Job != "odd" || odd[1].Job != "odd" {
		t.Fatalf("RunsList(odd, 2) = %v, %v", ids(odd), err)
	}
	completed, err := s.RunsList(ctx, store.RunFilter{Status: jobs.StatusCompleted})
	if err != nil || len(completed) != 1 || completed[0].ID != made[0].ID {
		t.Fatalf("RunsList(completed) = %v, %v", ids(completed), err)
	}
	pendingEven, err := s.RunsList(ctx, store.RunFilter{Job: "even", Status: jobs.StatusPending})
	if err != nil || len(pendingEven) != 2 || pendingEven[0].ID != made[4].ID || pendingEven[1].ID != made[2].ID {
		t.Fatalf("RunsList(even, pending) = %v, %v", ids(pendingEven), err)
	}
	none, err := s.RunsList(ctx, store.RunFilter{Job: "none"})
	if err != nil || len(none) != 0 {
		t.Fatalf("RunsList(none) = %v, %v", ids(none), err)
	}

	last, err := s.JobsLastRun(ctx, []string{"even", "odd", "none"})
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 2 || last["even"].ID != made[4].ID || last["odd"].ID != newer.ID {
		t.Fatalf("JobsLastRun = %+v", last)
	}
	if last, err := s.JobsLastRun(ctx, nil); err != nil || len(last) != 0 {
		t.Fatalf("JobsLastRun(nil) = %v, %v", last, err)
	}
}

// testListDefaultLimit: RunsList returns 100 runs unless asked for another number.
func testListDefaultLimit(t *testing.T, s store.Store) {
	for i := range 105 {
		mustInsert(t, s, manual("many", t0.Add(time.Duration(i)*time.Second)))
	}
	runs, err := s.RunsList(t.Context(), store.RunFilter{Job: "many"})
	if err != nil || len(runs) != 100 {
		t.Fatalf("RunsList default limit = %d, %v; want 100", len(runs), err)
	}
	if !runs[0].CreatedAt.Equal(t0.Add(104 * time.Second)) {
		t.Fatalf("first run made at %s", runs[0].CreatedAt)
	}
}

// testNodes: registration, fenced heartbeats, listing.
func testNodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	prev, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "web-1", Incarnation: incA, Host: "web-1.example",
		PID: 4242, Version: "1.2.3", Jobs: []string{"backup", "report"}, Now: t0})
	if err != nil || prev != nil {
		t.Fatalf("first NodeRegister = %+v, %v; want nil", prev, err)
	}
	if err := s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "web-1", Incarnation: incA, Now: t0.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	nodes, err := s.NodesList(ctx, true)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("NodesList = %v, %v", nodes, err)
	}
	n := nodes[0]
	if n.ID != "web-1" || n.Incarnation != incA || n.Host != "web-1.example" || n.PID != 4242 || n.Version != "1.2.3" ||
		fmt.Sprint(n.Jobs) != "[backup report]" || !n.StartedAt.Equal(t0) || !n.HeartbeatAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("node: %+v", n)
	}
	// Without the jobs: the same node, no job list.
	nodes, err = s.NodesList(ctx, false)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("NodesList without jobs = %v, %v", nodes, err)
	}
	if m := nodes[0]; len(m.Jobs) != 0 || m.ID != n.ID || m.Incarnation != n.Incarnation || m.PID != n.PID ||
		!m.HeartbeatAt.Equal(n.HeartbeatAt) || m.Age < n.Age {
		t.Fatalf("node without jobs: %+v, with: %+v", m, n)
	}

	// Registering over a row without naming its incarnation changes
	// nothing and reports the stored row.
	held, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "web-1", Incarnation: incB, Host: "web-2.example", Now: t0.Add(time.Minute)})
	wantErr(t, err, store.ErrLocked)
	if held == nil || held.Incarnation != incA || held.Host != "web-1.example" || held.Age != 30*time.Second {
		t.Fatalf("held node: %+v", held)
	}
	wantHeld(t, err, "web-1", incA)
	_, err = s.NodeRegister(ctx, store.NodeRegisterParams{ID: "web-1", Incarnation: incB, Replace: "some-other", Now: t0.Add(time.Minute)})
	wantErr(t, err, store.ErrLocked)
	wantHeld(t, err, "web-1", incA)
	_, err = s.NodeRegister(ctx, store.NodeRegisterParams{ID: "web-7", Incarnation: incB, Replace: incA, Now: t0.Add(time.Minute)})
	wantErr(t, err, store.ErrLocked)
	wantHeld(t, err, "web-7", "")

	// A new incarnation that names the stored one takes the row over and
	// reports the one it replaced.
	prev, err = s.NodeRegister(ctx, store.NodeRegisterParams{ID: "web-1", Incarnation: incB, Host: "web-1.example",
		PID: 4343, Version: "1.2.4", Replace: incA, Now: t0.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if prev == nil || prev.Incarnation != incA || prev.PID != 4242 || prev.Age != 90*time.Second || !prev.HeartbeatAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("replaced node: %+v", prev)
	}
	err = s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "web-1", Incarnation: incA, Now: t0.Add(3 * time.Minute)})
	wantErr(t, err, store.ErrFenced)
	wantNodeFenced(t, err, store.NodeFencedError{ID: "web-1", Incarnation: incA, Found: incB, FoundHeartbeatAt: t0.Add(2 * time.Minute)})
	if err := s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "web-1", Incarnation: incB, Now: t0.Add(3 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	err = s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "web-9", Incarnation: incA, Now: t0})
	wantErr(t, err, store.ErrNotFound)

	if _, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "web-2", Incarnation: incA, Now: t0}); err != nil {
		t.Fatal(err)
	}
	nodes, err = s.NodesList(ctx, true)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("NodesList = %v, %v", nodes, err)
	}
	byID := map[string]*store.Node{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	if n := byID["web-1"]; n.Incarnation != incB || n.Version != "1.2.4" || len(n.Jobs) != 0 || !n.HeartbeatAt.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("node after re-registration: %+v", n)
	}

	// Delete is fenced by the incarnation.
	wantErr(t, s.NodeDelete(ctx, store.NodeDeleteParams{ID: "web-1", Incarnation: incA}), store.ErrFenced)
	wantErr(t, s.NodeDelete(ctx, store.NodeDeleteParams{ID: "web-9", Incarnation: incA}), store.ErrNotFound)
	if err := s.NodeDelete(ctx, store.NodeDeleteParams{ID: "web-1", Incarnation: incB}); err != nil {
		t.Fatal(err)
	}
	nodes, err = s.NodesList(ctx, true)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "web-2" {
		t.Fatalf("NodesList after delete = %v, %v", nodes, err)
	}

	// A silent node is marked lost by compare-and-set on its incarnation
	// and on the heartbeat it was judged by; its heartbeats are refused
	// from then on, and the row is deleted by its lost incarnation.
	hb := nodes[0].HeartbeatAt
	_, err = s.NodeMarkLost(ctx, store.NodeMarkLostParams{ID: "web-2", Incarnation: incA, HeartbeatAt: hb.Add(-time.Second)})
	wantErr(t, err, store.ErrFenced) // it heartbeated after it was judged
	wantNodeFenced(t, err, store.NodeFencedError{ID: "web-2", Incarnation: incA, HeartbeatAt: hb.Add(-time.Second),
		Found: incA, FoundHeartbeatAt: hb})
	_, err = s.NodeMarkLost(ctx, store.NodeMarkLostParams{ID: "web-2", Incarnation: incB, HeartbeatAt: hb})
	wantErr(t, err, store.ErrFenced)
	wantNodeFenced(t, err, store.NodeFencedError{ID: "web-2", Incarnation: incB, HeartbeatAt: hb, Found: incA, FoundHeartbeatAt: hb})
	_, err = s.NodeMarkLost(ctx, store.NodeMarkLostParams{ID: "web-9", Incarnation: incA, HeartbeatAt: hb})
	wantErr(t, err, store.ErrNotFound)
	lost, err := s.NodeMarkLost(ctx, store.NodeMarkLostParams{ID: "web-2", Incarnation: incA, HeartbeatAt: hb})
	if err != nil || lost != store.LostIncarnation(incA) {
		t.Fatalf("NodeMarkLost = %q, %v; want %q", lost, err, store.LostIncarnation(incA))
	}
	if from, ok := store.LostFrom(lost); !ok || from != incA {
		t.Fatalf("LostFrom(%q) = %q, %v", lost, from, ok)
	}
	wantErr(t, s.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "web-2", Incarnation: incA, Now: t0.Add(time.Hour)}), store.ErrFenced)
	_, err = s.NodeMarkLost(ctx, store.NodeMarkLostParams{ID: "web-2", Incarnation: incA, HeartbeatAt: hb})
	wantErr(t, err, store.ErrFenced)
	nodes, err = s.NodesList(ctx, false)
	if err != nil || len(nodes) != 1 || nodes[0].Incarnation != lost || !nodes[0].HeartbeatAt.Equal(hb) {
		t.Fatalf("NodesList after the mark = %v, %v; want web-2 %s, heartbeat %s", nodes, err, lost, hb)
	}
	if err := s.NodeDelete(ctx, store.NodeDeleteParams{ID: "web-2", Incarnation: lost}); err != nil {
		t.Fatal(err)
	}
}

// testManyJobNames: the calls that take job names accept more names than a
// statement can take variables (SQLite: 32,766); a config may hold 100,000.
func testManyJobNames(t *testing.T, s store.Store) {
	ctx := t.Context()
	names := make([]string, 40000)
	limits := make(map[string]int, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("job-%05d", i)
		limits[names[i]] = 1
	}
	mustInsert(t, s, manual("job-39999", t0))
	if _, err := s.ScheduleFire(ctx, store.FireParams{Job: "job-00007", Cursor: t0, Now: t0}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ScheduleCursors(ctx, names)
	if err != nil || len(cs) != 1 || cs["job-00007"] == nil {
		t.Fatalf("ScheduleCursors with %d names = %d cursors, %v", len(names), len(cs), err)
	}
	next, err := s.RunsNextDue(ctx, names, time.Time{})
	if err != nil || !next.Equal(t0) {
		t.Fatalf("RunsNextDue with %d names = %s, %v", len(names), next, err)
	}
	last, err := s.JobsLastRun(ctx, names)
	if err != nil || last["job-39999"] == nil {
		t.Fatalf("JobsLastRun with %d names = %v, %v", len(names), last, err)
	}
	runs, err := s.RunsClaim(ctx, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 10, Now: t0})
	if err != nil || len(runs) != 1 {
		t.Fatalf("RunsClaim with %d limited jobs = %d runs, %v", len(limits), len(runs), err)
	}
}

// testPruneInPages: a prune of more runs than one page of a store's
// batches, made over a span of time and mixed with runs that stay (still
// running, finished after the horizon, made after it), deletes exactly the
// runs that finished before the horizon.
func testPruneInPages(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 2500
	horizon := t0.Add(time.Hour)
	ps := make([]store.RunInsertParams, n)
	for i := range ps {
		// Ten runs made at each second, over 250 seconds: pages end
		// inside a second's runs too.
		ps[i] = manual("bulk", t0.Add(time.Duration(i/10)*time.Second))
	}
	if _, err := s.RunInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	limits := map[string]int{"bulk": 0}
	claimed, err := s.RunsClaim(ctx, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: n,
		Now: t0.Add(5 * time.Minute)})
	if err != nil || len(claimed) != n {
		t.Fatalf("RunsClaim: %d runs, %v; want %d", len(claimed), err, n)
	}
	var (
		before, after []*jobs.Run
		gone, stays   []string
	)
	for i, r := range claimed {
		switch {
		case i%5 != 0: // finished before the horizon
			before, gone = append(before, r), append(gone, r.ID)
		case i%10 == 5: // finished after it
			after, stays = append(after, r), append(stays, r.ID)
		default: // still running
			stays = append(stays, r.ID)
		}
	}
	completeAll(t, s, before, t0.Add(10*time.Minute))
	completeAll(t, s, after, horizon.Add(time.Minute))
	mustInsert(t, s, manual("later", horizon.Add(time.Second)))
	later := complete(t, s, claimOne(t, s, "later", incA, horizon.Add(time.Second)), horizon.Add(2*time.Second))
	stays = append(stays, later.ID)

	got, err := s.RunsPrune(ctx, horizon)
	if err != nil || got != len(gone) {
		t.Fatalf("RunsPrune = %d, %v; want %d", got, err, len(gone))
	}
	for _, id := range gone {
		if _, err := s.RunGet(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("run %s finished before the horizon: RunGet error %v, want not found", id, err)
		}
	}
	for _, id := range stays {
		mustGet(t, s, id)
	}
	if got, err := s.RunsPrune(ctx, horizon); err != nil || got != 0 {
		t.Fatalf("second RunsPrune = %d, %v", got, err)
	}
}

// wantHeld checks that err is NodeRegister's refusal of node id, whose row
// belongs to incarnation held ("": there is no row).
func wantHeld(t *testing.T, err error, id, held string) {
	t.Helper()
	var e *store.NodeHeldError
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want a *store.NodeHeldError", err)
	}
	got := ""
	if e.Held != nil {
		got = e.Held.Incarnation
	}
	if e.ID != id || got != held {
		t.Fatalf("NodeHeldError of node %s held by %q, want node %s held by %q", e.ID, got, id, held)
	}
}

// wantNodeFenced checks that err is the refusal of a node write, with the
// write's row and what it found in it.
func wantNodeFenced(t *testing.T, err error, want store.NodeFencedError) {
	t.Helper()
	var e *store.NodeFencedError
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want a *store.NodeFencedError", err)
	}
	if e.ID != want.ID || e.Incarnation != want.Incarnation || !e.HeartbeatAt.Equal(want.HeartbeatAt) ||
		e.Found != want.Found || !e.FoundHeartbeatAt.Equal(want.FoundHeartbeatAt) {
		t.Fatalf("NodeFencedError %+v, want %+v", *e, want)
	}
}

// testRunsCount: RunsCount counts the runs of each status but completed,
// across jobs and nodes, with a zero for a status no run has.
func testRunsCount(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := map[jobs.Status]int64{jobs.StatusPending: 0, jobs.StatusRunning: 0, jobs.StatusRetrying: 0,
		jobs.StatusCancelled: 0, jobs.StatusDeadLetter: 0}
	check := func(when string) {
		t.Helper()
		got, err := s.RunsCount(ctx)
		if err != nil {
			t.Fatalf("RunsCount %s: %v", when, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("RunsCount %s = %v, want %v", when, got, want)
		}
	}
	check("of an empty store")

	// One run of each status, of jobs a and b, and a second pending one.
	mustInsert(t, s, manual("a", t0))
	mustInsert(t, s, manual("b", t0.Add(time.Hour)))
	complete(t, s, claimOne(t, s, "a", incA, t0), t0.Add(time.Second))
	mustInsert(t, s, manual("a", t0.Add(2*time.Second)))
	claimOne(t, s, "a", incA, t0.Add(2*time.Second))
	mustInsert(t, s, manual("b", t0))
	fail(t, s, claimOne(t, s, "b", incB, t0), t0.Add(time.Second))
	dead := mustInsert(t, s, store.RunInsertParams{Job: "c", Trigger: jobs.TriggerManual, ScheduledAt: t0, NotBefore: t0,
		Retry: jobs.RetryPolicy{MaxAttempts: 1}, Node: nodeA, Now: t0})
	fail(t, s, claimOne(t, s, "c", incA, t0), t0.Add(time.Second))
	if r := mustGet(t, s, dead.ID); r.Status != jobs.StatusDeadLetter {
		t.Fatalf("the run of c is %s, want dead_letter", r.Status)
	}
	cancelled := mustInsert(t, s, manual("c", t0.Add(time.Hour)))
	if _, err := s.RunCancel(ctx, userCancel(cancelled.ID, nodeA, t0)); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, manual("d", t0.Add(time.Hour)))
	want = map[jobs.Status]int64{jobs.StatusPending: 2, jobs.StatusRunning: 1, jobs.StatusRetrying: 1,
		jobs.StatusCancelled: 1, jobs.StatusDeadLetter: 1}
	check("with a run of each status")
}

// testAttemptsClipped: RunAttemptsClipped reads the attempts RunAttempts
// does, oldest first, the running one included, with the output of each
// longer than twice the bound read as its head and its tail, byte for
// byte (invalid UTF-8 and NUL too), and the length stored; it selects one
// attempt by number, or the newest ones; a run that does not exist is
// ErrNotFound, an attempt that does not, none.
func testAttemptsClipped(t *testing.T, s store.Store) {
	ctx := t.Context()
	long := "H\x00\xffead-" + strings.Repeat("<", 1000) + "-tail\xfe"
	short := "short\n"
	mustInsert(t, s, manual("clip", t0))
	r := claimOne(t, s, "clip", incA, t0)
	mustTransition(t, s, jobs.FailAttempt(r, fenceOf(r), r.Node, jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1"),
		Output: long, OutputBytes: 5000, Truncated: true}, jobs.ReasonFailed, t0.Add(time.Second), nil))
	r = claimOne(t, s, "clip", incA, t0.Add(time.Minute))
	mustTransition(t, s, jobs.FailAttempt(r, fenceOf(r), r.Node, jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1"),
		Output: short, OutputBytes: int64(len(short))}, jobs.ReasonFailed, t0.Add(time.Minute+time.Second), nil))
	r = claimOne(t, s, "clip", incA, t0.Add(2*time.Minute))

	whole, err := s.RunAttempts(ctx, r.ID)
	if err != nil || len(whole) != 3 {
		t.Fatalf("RunAttempts = %v, %v", whole, err)
	}
	describe := func(as []*store.ClippedAttempt) string {
		var b strings.Builder
		for _, a := range as {
			fmt.Fprintf(&b, "%d %s %q|%q %d/%d;", a.Number, a.Status, a.Output, a.Tail, a.StoredBytes, a.OutputBytes)
		}
		return b.String()
	}
	for _, tt := range []struct {
		name string
		p    store.AttemptsParams
		want string
	}{
		{"all, bounded", store.AttemptsParams{RunID: r.ID, Keep: 10},
			fmt.Sprintf("1 retrying %q|%q %d/5000;2 retrying %q|\"\" 6/6;3 running \"\"|\"\" 0/0;", long[:10], long[len(long)-10:], len(long), short)},
		{"all, whole", store.AttemptsParams{RunID: r.ID},
			fmt.Sprintf("1 retrying %q|\"\" %d/5000;2 retrying %q|\"\" 6/6;3 running \"\"|\"\" 0/0;", long, len(long), short)},
		{"an output of twice the bound is whole", store.AttemptsParams{RunID: r.ID, Number: 2, Keep: 3},
			fmt.Sprintf("2 retrying %q|\"\" 6/6;", short)},
		{"one, bounded", store.AttemptsParams{RunID: r.ID, Number: 1, Keep: 500},
			fmt.Sprintf("1 retrying %q|%q %d/5000;", long[:500], long[len(long)-500:], len(long))},
		{"the newest two", store.AttemptsParams{RunID: r.ID, Newest: 2, Keep: 2},
			fmt.Sprintf("2 retrying %q|%q 6/6;3 running \"\"|\"\" 0/0;", short[:2], short[4:])},
		{"the running one", store.AttemptsParams{RunID: r.ID, Number: 3}, "3 running \"\"|\"\" 0/0;"},
		{"no such attempt", store.AttemptsParams{RunID: r.ID, Number: 9}, ""},
	} {
		got, err := s.RunAttemptsClipped(ctx, tt.p)
		if err != nil || describe(got) != tt.want {
			t.Errorf("%s: RunAttemptsClipped(%+v) =\n%s, %v\nwant\n%s", tt.name, tt.p, describe(got), err, tt.want)
		}
	}
	got, err := s.RunAttemptsClipped(ctx, store.AttemptsParams{RunID: r.ID})
	if err != nil || len(got) != 3 {
		t.Fatal(err)
	}
	for i, a := range got {
		w := *whole[i]
		if a.Attempt.RunID != w.RunID || a.Node != w.Node || a.Incarnation != w.Incarnation || !a.StartedAt.Equal(w.StartedAt) ||
			!a.FinishedAt.Equal(w.FinishedAt) || a.Error != w.Error || a.Reason != w.Reason || a.Truncated != w.Truncated ||
			(a.ExitCode == nil) != (w.ExitCode == nil) || a.ExitCode != nil && *a.ExitCode != *w.ExitCode {
			t.Errorf("attempt %d: clipped %+v, whole %+v", i+1, a.Attempt, w)
		}
	}
	_, err = s.RunAttemptsClipped(ctx, store.AttemptsParams{RunID: "no-such-run", Keep: 10})
	wantErr(t, err, store.ErrNotFound)
	fresh := mustInsert(t, s, manual("fresh", t0))
	if got, err := s.RunAttemptsClipped(ctx, store.AttemptsParams{RunID: fresh.ID}); err != nil || len(got) != 0 {
		t.Errorf("a run not started: %v, %v", got, err)
	}
}
