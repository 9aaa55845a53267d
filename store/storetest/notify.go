package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Notifiers of the notification cases: ops takes the default events,
// pager every failure too, and chat reminds every hour.
var (
	opsTarget   = jobs.NotifyTarget{Notifier: "ops", Events: jobs.DefaultNotifyEvents}
	pagerTarget = jobs.NotifyTarget{Notifier: "pager", Events: []jobs.NotifyEvent{jobs.EventFailed, jobs.EventDeadLetter, jobs.EventResolved}}
	chatTarget  = jobs.NotifyTarget{Notifier: "chat", Events: jobs.DefaultNotifyEvents, Renotify: time.Hour}
)

// once1 is a policy without retries: a failed attempt is a dead letter.
var once1 = jobs.RetryPolicy{MaxAttempts: 1, Backoff: jobs.BackoffFixed}

// runOnce makes a manual run of job at at, claims it a second later, and
// ends it then, with success or not, carrying targets.
func runOnce(t *testing.T, s store.Store, job string, at time.Time, ok bool, targets ...jobs.NotifyTarget) *jobs.Run {
	t.Helper()
	p := manual(job, at)
	p.Retry = once1
	mustInsert(t, s, p)
	r := claimOne(t, s, job, incA, at.Add(time.Second))
	var tr jobs.Transition
	if ok {
		tr = jobs.Complete(fenceOf(r), nodeB, jobs.Result{ExitCode: ptr(0)}, at.Add(2*time.Second))
	} else {
		res := jobs.Result{ExitCode: ptr(3), Err: errors.New("exit status 3")}
		tr = jobs.FailAttempt(r, fenceOf(r), nodeB, res, jobs.ReasonFailed, at.Add(2*time.Second), nil)
	}
	tr.Notify = targets
	return mustTransition(t, s, tr)
}

func listNotifications(t *testing.T, s store.Store, f store.NotificationFilter) []*store.Notification {
	t.Helper()
	ns, err := s.NotificationsList(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// describeNotifications writes notifications oldest first, one a line.
func describeNotifications(ns []*store.Notification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[len(ns)-1-i] = fmt.Sprintf("%s %s %s %s", n.Notifier, n.Job, n.Event, n.State)
	}
	return out
}

func wantNotifications(t *testing.T, s store.Store, job string, want ...string) []*store.Notification {
	t.Helper()
	ns := listNotifications(t, s, store.NotificationFilter{Job: job, Limit: 1000})
	got := describeNotifications(ns)
	// Notifications of one change share a time: compare them as sets
	// within the order of changes by sorting equal-time neighbours.
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Fatalf("notifications of %s:\n got %q\nwant %q", job, got, w)
	}
	return ns
}

// testNotifyTransition: a run's failure writes, in its transaction, one
// pending notification per notifier that takes the event, with the event
// JSON (its id the notification's); a transition without notifiers writes
// none.
func testNotifyTransition(t *testing.T, s store.Store) {
	runOnce(t, s, "quiet", t0, false)
	wantNotifications(t, s, "quiet")

	run := runOnce(t, s, "backup", t0, false, opsTarget, pagerTarget, jobs.NotifyTarget{Notifier: "resolved-only", Events: []jobs.NotifyEvent{jobs.EventResolved}})
	ns := wantNotifications(t, s, "backup", "ops backup dead_letter pending", "pager backup dead_letter pending")
	for _, n := range ns {
		var pl store.EventPayload
		if err := json.Unmarshal(n.Payload, &pl); err != nil {
			t.Fatalf("payload %s: %v", n.Payload, err)
		}
		if pl.ID != n.ID || pl.Event != jobs.EventDeadLetter || pl.Job != "backup" || pl.RunID != run.ID || pl.Attempt != 1 ||
			pl.Status != jobs.StatusDeadLetter || pl.Reason != jobs.ReasonFailed || pl.ExitCode == nil || *pl.ExitCode != 3 ||
			pl.Error != "exit status 3" || pl.Node != nodeB || !pl.At.Equal(t0.Add(2*time.Second)) || pl.Since == nil {
			t.Errorf("payload %s", n.Payload)
		}
		if n.RunID != run.ID || n.Attempts != 0 || !n.NextAttemptAt.Equal(t0.Add(2*time.Second)) || !n.CreatedAt.Equal(t0.Add(2*time.Second)) {
			t.Errorf("notification %+v", n)
		}
	}
	if ns[0].ID == ns[1].ID {
		t.Errorf("two notifications share the id %s", ns[0].ID)
	}
	states, err := s.JobNotifyStates(t.Context(), []string{"backup", "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	if st := states["backup"]; st == nil || !st.FailingSince.Equal(t0.Add(2*time.Second)) || len(st.Told) != 2 {
		t.Errorf("state of backup: %+v", st)
	}
	if states["quiet"] != nil {
		t.Errorf("a job without notifiers has a state: %+v", states["quiet"])
	}
}

// testNotifySuppression: a job that fails 100 times in a row notifies each
// notifier once when it starts failing (and chat, with renotify 1h, once
// more an hour later), once when it succeeds again (resolved), and once
// when it fails again after that. A success of a job that was not failing
// notifies no one.
func testNotifySuppression(t *testing.T, s store.Store) {
	targets := []jobs.NotifyTarget{opsTarget, chatTarget}
	runOnce(t, s, "etl", t0.Add(-time.Hour), true, targets...)
	wantNotifications(t, s, "etl")
	for i := range 100 {
		runOnce(t, s, "etl", t0.Add(time.Duration(i)*time.Minute), false, targets...)
	}
	wantNotifications(t, s, "etl", "ops etl dead_letter pending", "chat etl dead_letter pending", "chat etl dead_letter pending")
	runOnce(t, s, "etl", t0.Add(2*time.Hour), true, targets...)
	runOnce(t, s, "etl", t0.Add(3*time.Hour), true, targets...)
	runOnce(t, s, "etl", t0.Add(4*time.Hour), false, targets...)
	ns := wantNotifications(t, s, "etl",
		"ops etl dead_letter pending", "chat etl dead_letter pending", "chat etl dead_letter pending",
		"ops etl resolved pending", "chat etl resolved pending",
		"ops etl dead_letter pending", "chat etl dead_letter pending")
	reminders := 0
	for _, n := range ns {
		var pl store.EventPayload
		if err := json.Unmarshal(n.Payload, &pl); err != nil {
			t.Fatal(err)
		}
		if pl.Reminder {
			reminders++
			if n.Notifier != "chat" || !pl.At.Equal(t0.Add(60*time.Minute+2*time.Second)) || pl.Since == nil || !pl.Since.Equal(t0.Add(2*time.Second)) {
				t.Errorf("reminder %s", n.Payload)
			}
		}
		if n.Event == jobs.EventResolved && (pl.Since == nil || !pl.Since.Equal(t0.Add(2*time.Second))) {
			t.Errorf("resolved %s: since is not when the job began failing", n.Payload)
		}
	}
	if reminders != 1 {
		t.Errorf("%d reminders, want 1", reminders)
	}
}

// failTwice makes a manual run of job at at with two attempts, and fails
// both: the first is retried (failed), the second gives up (dead_letter),
// 13 seconds after at. The transitions carry targets.
func failTwice(t *testing.T, s store.Store, job string, at time.Time, targets ...jobs.NotifyTarget) {
	t.Helper()
	p := manual(job, at)
	p.Retry = jobs.RetryPolicy{MaxAttempts: 2, Backoff: jobs.BackoffFixed, InitialDelay: 10 * time.Second}
	mustInsert(t, s, p)
	res := jobs.Result{ExitCode: ptr(1), Err: errors.New("exit status 1")}
	for i, want := range []jobs.Status{jobs.StatusRetrying, jobs.StatusDeadLetter} {
		start := at.Add(time.Second + time.Duration(i)*11*time.Second)
		r := claimOne(t, s, job, incA, start)
		tr := jobs.FailAttempt(r, fenceOf(r), nodeB, res, jobs.ReasonFailed, start.Add(time.Second), nil)
		tr.Notify = targets
		if got := mustTransition(t, s, tr); got.Status != want {
			t.Fatalf("attempt %d of a run of %s ended %s, want %s", i+1, job, got.Status, want)
		}
	}
}

// testNotifyDeadLetterAfterFailed: a notifier that takes failed and
// dead_letter is told of the first failed attempt of a failing state and
// then of the first dead letter as well (the run gave up), once each
// however often the job fails; one that takes failed alone is told once.
// A success ends the state, and the next failure tells both again. A
// notifier told of a dead letter is not told of a later failed attempt.
func testNotifyDeadLetterAfterFailed(t *testing.T, s store.Store) {
	retries := jobs.NotifyTarget{Notifier: "retries", Events: []jobs.NotifyEvent{jobs.EventFailed}}
	targets := []jobs.NotifyTarget{pagerTarget, retries}
	for i := range 5 {
		failTwice(t, s, "flaky", t0.Add(time.Duration(i)*20*time.Second), targets...)
	}
	first := []string{"pager flaky failed pending", "retries flaky failed pending", "pager flaky dead_letter pending"}
	ns := wantNotifications(t, s, "flaky", first...)
	for _, n := range ns {
		var pl store.EventPayload
		if err := json.Unmarshal(n.Payload, &pl); err != nil || pl.Reminder || pl.Since == nil || !pl.Since.Equal(t0.Add(2*time.Second)) {
			t.Errorf("%s %s: %s, %v", n.Notifier, n.Event, n.Payload, err)
		}
	}
	runOnce(t, s, "flaky", t0.Add(time.Hour), true, targets...)
	failTwice(t, s, "flaky", t0.Add(2*time.Hour), targets...)
	wantNotifications(t, s, "flaky", append(first, "pager flaky resolved pending",
		"pager flaky failed pending", "retries flaky failed pending", "pager flaky dead_letter pending")...)

	// Told of the dead letter first: a later failed attempt is the same
	// failing state.
	runOnce(t, s, "gives-up", t0, false, pagerTarget)
	failTwice(t, s, "gives-up", t0.Add(time.Minute), pagerTarget)
	wantNotifications(t, s, "gives-up", "pager gives-up dead_letter pending")
}

// testNotifyClaimLease: a claim leases due notifications to one
// incarnation; another claim finds none until the lease runs out, then
// takes them (the first node was killed). The first node's late failure is
// fenced; its late delivery still counts, once.
func testNotifyClaimLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	runOnce(t, s, "a", t0, false, opsTarget, pagerTarget)
	at := t0.Add(time.Minute)
	claim := func(inc string, at time.Time) []*store.Notification {
		t.Helper()
		ns, err := s.NotificationsClaim(ctx, store.NotificationsClaimParams{Node: inc, Incarnation: inc, Limit: 10, Lease: 30 * time.Second, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	if ns := claim(incA, t0); len(ns) != 0 {
		t.Fatalf("claimed %d notifications before they were due", len(ns))
	}
	first := claim(incA, at)
	if len(first) != 2 || first[0].LeaseIncarnation != incA || !first[0].LeaseUntil.Equal(at.Add(30*time.Second)) {
		t.Fatalf("first claim: %+v", first)
	}
	if ns := claim(incB, at.Add(29*time.Second)); len(ns) != 0 {
		t.Fatalf("claimed %d leased notifications", len(ns))
	}
	next, err := s.NotificationsNextDue(ctx)
	if err != nil || !next.Equal(at.Add(30*time.Second)) {
		t.Fatalf("next due %v, %v; want the end of the lease", next, err)
	}
	second := claim(incB, at.Add(30*time.Second))
	if len(second) != 2 || second[0].ID != first[0].ID || second[0].LeaseIncarnation != incB {
		t.Fatalf("second claim: %+v", second)
	}
	err = s.NotificationFinish(ctx, store.NotificationFinishParams{ID: first[0].ID, Incarnation: incA, Error: "late", NextAttemptAt: at.Add(time.Hour), Now: at.Add(31 * time.Second)})
	wantErr(t, err, store.ErrFenced)
	for _, inc := range []string{incA, incB} {
		if err := s.NotificationFinish(ctx, store.NotificationFinishParams{ID: first[0].ID, Incarnation: inc, Delivered: true, Now: at.Add(32 * time.Second)}); err != nil {
			t.Fatalf("delivered by %s: %v", inc, err)
		}
	}
	got := listNotifications(t, s, store.NotificationFilter{State: store.NotificationDelivered})
	if len(got) != 1 || got[0].ID != first[0].ID || got[0].Attempts != 1 || !got[0].DeliveredAt.Equal(at.Add(32*time.Second)) || got[0].LeaseIncarnation != "" {
		t.Fatalf("delivered: %+v", got)
	}
	err = s.NotificationFinish(ctx, store.NotificationFinishParams{ID: "no-such-id", Incarnation: incB, Delivered: true})
	wantErr(t, err, store.ErrNotFound)

	// A node's new process releases its previous process's leases, and
	// no one else's: the other one is due at once, ahead of its lease.
	runOnce(t, s, "b", t0, false, opsTarget)
	later := at.Add(time.Hour)
	leased, err := s.NotificationsClaim(ctx, store.NotificationsClaimParams{Node: nodeA, Incarnation: incA, Limit: 10, Lease: time.Hour, Now: later})
	if err != nil || len(leased) != 2 {
		t.Fatalf("claimed %d, %v", len(leased), err)
	}
	if n, err := s.NotificationsRelease(ctx, store.NotificationsReleaseParams{Node: nodeB, Incarnation: incB}); err != nil || n != 0 {
		t.Fatalf("another node released %d, %v", n, err)
	}
	if n, err := s.NotificationsRelease(ctx, store.NotificationsReleaseParams{Node: nodeA, Incarnation: incA}); err != nil || n != 0 {
		t.Fatalf("the live incarnation released %d, %v", n, err)
	}
	if n, err := s.NotificationsRelease(ctx, store.NotificationsReleaseParams{Node: nodeA, Incarnation: "new-inc"}); err != nil || n != 2 {
		t.Fatalf("the new incarnation released %d, %v; want 2", n, err)
	}
	if again := claim("new-inc", later); len(again) != 2 {
		t.Fatalf("claimed %d after the release, want 2", len(again))
	}
}

// testNotifyRetryAndFailed: a failed delivery is due again at the time
// given, with its error; one marked failed stays failed and visible, and
// is never claimed again. Pruning deletes finished ones only.
func testNotifyRetryAndFailed(t *testing.T, s store.Store) {
	ctx := t.Context()
	runOnce(t, s, "a", t0, false, opsTarget)
	at := t0.Add(time.Minute)
	claim := func(at time.Time) []*store.Notification {
		t.Helper()
		ns, err := s.NotificationsClaim(ctx, store.NotificationsClaimParams{Node: nodeA, Incarnation: incA, Limit: 10, Lease: time.Minute, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	n := claim(at)[0]
	if err := s.NotificationFinish(ctx, store.NotificationFinishParams{ID: n.ID, Incarnation: incA, Error: "503 Service Unavailable", NextAttemptAt: at.Add(10 * time.Second), Now: at}); err != nil {
		t.Fatal(err)
	}
	if ns := claim(at.Add(9 * time.Second)); len(ns) != 0 {
		t.Fatalf("claimed before its next attempt")
	}
	if next, err := s.NotificationsNextDue(ctx); err != nil || !next.Equal(at.Add(10*time.Second)) {
		t.Fatalf("next due %v, %v", next, err)
	}
	n = claim(at.Add(10 * time.Second))[0]
	if n.Attempts != 1 || n.LastError != "503 Service Unavailable" {
		t.Fatalf("retried notification: %+v", n)
	}
	if err := s.NotificationFinish(ctx, store.NotificationFinishParams{ID: n.ID, Incarnation: incA, Error: "timeout", Failed: true, Now: at.Add(11 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if ns := claim(at.Add(time.Hour)); len(ns) != 0 {
		t.Fatalf("claimed a failed notification")
	}
	if next, err := s.NotificationsNextDue(ctx); err != nil || !next.IsZero() {
		t.Fatalf("next due %v, %v; want none", next, err)
	}
	failed := listNotifications(t, s, store.NotificationFilter{State: store.NotificationFailed})
	if len(failed) != 1 || failed[0].Attempts != 2 || failed[0].LastError != "timeout" {
		t.Fatalf("failed: %+v", failed)
	}
	runOnce(t, s, "a", t0.Add(time.Hour), true, opsTarget) // resolved: pending
	if n, err := s.NotificationsPrune(ctx, t0.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want the failed one", n, err)
	}
	wantNotifications(t, s, "a", "ops a resolved pending")
}

// testNotifyClaimConcurrent: claimers racing over 200 notifications take
// each exactly once while the leases hold.
func testNotifyClaimConcurrent(t *testing.T, s store.Store) {
	many := make([]jobs.NotifyTarget, 50)
	for i := range many {
		many[i] = jobs.NotifyTarget{Notifier: fmt.Sprintf("n%02d", i), Events: jobs.DefaultNotifyEvents}
	}
	for i := range 4 {
		runOnce(t, s, fmt.Sprintf("job%d", i), t0, false, many...)
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inc := fmt.Sprintf("inc-%d", c)
			for {
				ns, err := s.NotificationsClaim(t.Context(), store.NotificationsClaimParams{Node: inc, Incarnation: inc, Limit: 7, Lease: time.Hour, Now: t0.Add(time.Minute)})
				if err != nil {
					t.Error(err)
					return
				}
				if len(ns) == 0 {
					return
				}
				mu.Lock()
				for _, n := range ns {
					seen[n.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Errorf("claimed %d notifications, want 200", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("notification %s claimed %d times", id, n)
		}
	}
}

// testNotifyExpire: a run that expires tells the notifiers that RunsExpire
// gives for its job, in the transaction that cancels it.
func testNotifyExpire(t *testing.T, s store.Store) {
	p := manual("report", t0)
	p.NotAfter = t0.Add(time.Minute)
	mustInsert(t, s, p)
	q := manual("other", t0)
	q.NotAfter = t0.Add(time.Minute)
	mustInsert(t, s, q)
	notify := func(job string) []jobs.NotifyTarget {
		if job == "report" {
			return []jobs.NotifyTarget{opsTarget}
		}
		return nil
	}
	got, err := s.RunsExpire(t.Context(), store.RunsExpireParams{Node: nodeA, Now: t0.Add(time.Minute), Notify: notify})
	if err != nil || len(got) != 2 {
		t.Fatalf("expired %d runs, %v", len(got), err)
	}
	wantNotifications(t, s, "report", "ops report expired pending")
	wantNotifications(t, s, "other")
}

// testNotifyOverdue: a job whose last success is older than its window
// becomes overdue once, whichever nodes ask, with one notification per
// notifier; a success ends it (resolved). A job that never succeeded
// counts from Since.
func testNotifyOverdue(t *testing.T, s store.Store) {
	ctx := t.Context()
	runOnce(t, s, "nightly", t0, true, opsTarget) // finished at t0+2s
	overdue := func(node string, at time.Time) (*store.JobNotifyState, bool) {
		t.Helper()
		st, made, err := s.JobOverdue(ctx, store.JobOverdueParams{Job: "nightly", Within: 2 * time.Hour, Since: t0.Add(-time.Hour),
			Notify: []jobs.NotifyTarget{opsTarget}, Node: node, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return st, made
	}
	if _, made := overdue(nodeA, t0.Add(2*time.Hour+time.Second)); made {
		t.Fatal("overdue before its window ended")
	}
	due := t0.Add(2*time.Hour + 2*time.Second)
	st, made := overdue(nodeA, due)
	if !made || !st.OverdueSince.Equal(due) {
		t.Fatalf("at the end of the window: made %t, state %+v", made, st)
	}
	if st, made := overdue(nodeB, due.Add(time.Minute)); made || !st.OverdueSince.Equal(due) {
		t.Fatalf("a second node made it overdue again: %t, %+v", made, st)
	}
	ns := wantNotifications(t, s, "nightly", "ops nightly overdue pending")
	var pl store.EventPayload
	if err := json.Unmarshal(ns[0].Payload, &pl); err != nil || pl.Event != jobs.EventOverdue || pl.Node != nodeA || pl.Since == nil {
		t.Fatalf("payload %s: %v", ns[0].Payload, err)
	}
	// The error says the window and the last success.
	if want := "no run completed within expect_success_within (2h): the last success was at 2026-03-01T12:00:02Z"; pl.Error != want {
		t.Errorf("overdue error %q, want %q", pl.Error, want)
	}
	runOnce(t, s, "nightly", due.Add(time.Hour), true, opsTarget)
	wantNotifications(t, s, "nightly", "ops nightly overdue pending", "ops nightly resolved pending")
	states, err := s.JobNotifyStates(ctx, []string{"nightly"})
	if err != nil || !states["nightly"].OverdueSince.IsZero() {
		t.Fatalf("after a success: %+v, %v", states["nightly"], err)
	}

	never := store.JobOverdueParams{Job: "never", Within: 90 * time.Minute, Since: t0.Add(-30 * time.Minute), Notify: []jobs.NotifyTarget{opsTarget}, Node: nodeA}
	never.Now = t0.Add(59 * time.Minute)
	if _, made, err := s.JobOverdue(ctx, never); err != nil || made {
		t.Fatalf("a job that never succeeded, before Since + Within: %t, %v", made, err)
	}
	never.Now = t0.Add(time.Hour)
	if _, made, err := s.JobOverdue(ctx, never); err != nil || !made {
		t.Fatalf("a job that never succeeded, at Since + Within: %t, %v", made, err)
	}
	ns = wantNotifications(t, s, "never", "ops never overdue pending")
	if err := json.Unmarshal(ns[0].Payload, &pl); err != nil ||
		pl.Error != "no run completed within expect_success_within (1h30m): none ever did; the cluster has expected one since 2026-03-01T11:30:00Z" {
		t.Errorf("overdue error of a job that never succeeded: %q, %v", pl.Error, err)
	}
}

// testNotifySkipped: a fire that skips ticks (catch-up and overlap) tells
// the notifiers that take skipped, in its transaction, once per fire; one
// that skips nothing, or whose compare-and-set lost, tells no one.
func testNotifySkipped(t *testing.T, s store.Store) {
	skippy := jobs.NotifyTarget{Notifier: "skippy", Events: []jobs.NotifyEvent{jobs.EventSkipped}}
	targets := []jobs.NotifyTarget{opsTarget, skippy}
	fire := func(p store.FireParams) *store.FireResult {
		t.Helper()
		p.Notify = targets
		return mustFire(t, s, p)
	}
	fire(store.FireParams{Job: "every", Cursor: t0, Node: nodeA, Now: t0})
	wantNotifications(t, s, "every")
	// Three ticks missed beyond misfire_grace, not caught up.
	res := fire(store.FireParams{Job: "every", Expect: t0, Cursor: t0.Add(4 * time.Minute), Skipped: 3, LastSkipped: t0.Add(3 * time.Minute),
		Runs: []store.RunInsertParams{tick("every", t0.Add(4*time.Minute))}, Overlap: jobs.OverlapSkip, Node: nodeA, Now: t0.Add(4 * time.Minute)})
	if !res.Advanced || len(res.Created) != 1 {
		t.Fatalf("fire: %+v", res)
	}
	wantNotifications(t, s, "every", "skippy every skipped pending")
	// The next tick meets the active run: skipped by overlap.
	res = fire(store.FireParams{Job: "every", Expect: t0.Add(4 * time.Minute), Cursor: t0.Add(5 * time.Minute),
		Runs: []store.RunInsertParams{tick("every", t0.Add(5*time.Minute))}, Overlap: jobs.OverlapSkip, Node: nodeA, Now: t0.Add(5 * time.Minute)})
	if res.SkippedOverlap != 1 {
		t.Fatalf("fire: %+v", res)
	}
	// A stale compare-and-set writes nothing.
	fire(store.FireParams{Job: "every", Expect: t0, Cursor: t0.Add(9 * time.Minute), Skipped: 5, Node: nodeB, Now: t0.Add(9 * time.Minute)})
	ns := wantNotifications(t, s, "every", "skippy every skipped pending", "skippy every skipped pending")
	var pl store.EventPayload
	if err := json.Unmarshal(ns[len(ns)-1].Payload, &pl); err != nil || pl.Event != jobs.EventSkipped || !strings.HasPrefix(pl.Error, "3 tick(s) skipped") {
		t.Fatalf("payload %s: %v", ns[len(ns)-1].Payload, err)
	}
}
