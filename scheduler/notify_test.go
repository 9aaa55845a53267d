package scheduler

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestNotificationsOfAttempts: the results of a job's attempts carry its
// notifiers, so the store writes their notifications with the results:
// pager (which takes failed) hears each failed attempt that will retry, ops
// (the default events) the dead letter alone, and both the first success
// after it (resolved).
func TestNotificationsOfAttempts(t *testing.T) {
	ok := false
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("flaky", func(ctx context.Context) error {
			if ok {
				return h.succeed(ctx)
			}
			return h.fail(ctx)
		}, func(d *jobs.Definition) {
			d.Retry = jobs.RetryPolicy{MaxAttempts: 2, Backoff: jobs.BackoffFixed, InitialDelay: 10 * time.Second}
			d.Notify = []jobs.NotifyTarget{
				{Notifier: "ops", Events: jobs.DefaultNotifyEvents},
				{Notifier: "pager", Events: []jobs.NotifyEvent{jobs.EventFailed, jobs.EventResolved}},
			}
		})}
	})
	r, err := h.s.Trigger(context.Background(), "flaky", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	h.advanceTo(h.run(r.ID).NotBefore)
	h.attemptsDone(1)
	if got := h.run(r.ID).Status; got != jobs.StatusDeadLetter {
		t.Fatalf("status %s, want dead_letter", got)
	}
	ok = true
	if _, err := h.s.Trigger(context.Background(), "flaky", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	ns, err := h.st.NotificationsList(context.Background(), store.NotificationFilter{Job: "flaky"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range ns {
		got = append(got, n.Notifier+" "+string(n.Event))
	}
	slices.Sort(got)
	want := []string{"ops dead_letter", "ops resolved", "pager failed", "pager resolved"}
	if !slices.Equal(got, want) {
		t.Errorf("notifications %q, want %q", got, want)
	}
}

// TestOverdue: a job with expect_success_within becomes overdue when its
// last success is older than the window, by the injected clock: once (one
// notification, whatever the iterations), shown by Overdue and the
// schedulerd_job_overdue series; a success ends it (resolved).
func TestOverdue(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("nightly", h.succeed, func(d *jobs.Definition) {
			d.ExpectSuccessWithin = time.Hour
			d.Notify = []jobs.NotifyTarget{{Notifier: "ops", Events: jobs.DefaultNotifyEvents}}
		})}
	})
	if _, err := h.s.Trigger(context.Background(), "nightly", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	h.resultsUntil("the success", func() bool { return h.s.lastSuccess("nightly") == t0 })
	metric := func() string {
		var b strings.Builder
		h.s.WriteJobMetrics(&b)
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "schedulerd_job_overdue{") {
				return l
			}
		}
		return ""
	}
	h.advanceTo(t0.Add(time.Hour - time.Second))
	if h.s.Overdue("nightly") || metric() != `schedulerd_job_overdue{job="nightly"} 0` {
		t.Fatalf("overdue before the window ended: %q", metric())
	}
	h.advanceTo(t0.Add(time.Hour))
	h.advanceTo(t0.Add(time.Hour + time.Minute))
	h.advanceTo(t0.Add(2 * time.Hour))
	if !h.s.Overdue("nightly") || metric() != `schedulerd_job_overdue{job="nightly"} 1` {
		t.Fatalf("not overdue after the window: %q", metric())
	}
	wantJobNotifications(t, h, "nightly", "ops overdue")
	if _, err := h.s.Trigger(context.Background(), "nightly", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	h.resultsUntil("the second success", func() bool { return !h.s.Overdue("nightly") })
	wantJobNotifications(t, h, "nightly", "ops overdue", "ops resolved")
	// The second success's window: overdue again when it ends, not before.
	second := h.s.lastSuccess("nightly")
	h.advanceTo(second.Add(time.Hour - time.Second))
	if h.s.Overdue("nightly") {
		t.Fatal("overdue again before the second success's window ended")
	}
	h.advanceTo(second.Add(time.Hour))
	h.advanceTo(second.Add(time.Hour + time.Second))
	if !h.s.Overdue("nightly") {
		t.Fatal("not overdue again after the second success's window")
	}
	wantJobNotifications(t, h, "nightly", "ops overdue", "ops resolved", "ops overdue")
}

// TestOverdueCheckIdle: the dead man's switch goes over the jobs again
// only when something it reads changed (a result) or a job's window may
// have ended, not at every iteration of an idle loop; and it still finds
// the job overdue at the end of its window.
func TestOverdueCheckIdle(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("nightly", h.succeed, func(d *jobs.Definition) { d.ExpectSuccessWithin = time.Hour })}
	})
	passes := h.s.testSignals.overduePasses.Load()
	for i := 1; i <= 5; i++ {
		h.advanceTo(t0.Add(time.Duration(i) * time.Minute))
	}
	if n := h.s.testSignals.overduePasses.Load() - passes; n != 0 {
		t.Fatalf("%d passes over the jobs in 5 idle iterations; want none", n)
	}
	if _, err := h.s.Trigger(context.Background(), "nightly", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	h.resultsUntil("the success", func() bool { return !h.s.lastSuccess("nightly").IsZero() })
	success := h.s.lastSuccess("nightly")
	passes = h.s.testSignals.overduePasses.Load()
	h.advanceTo(success.Add(2 * time.Second)) // the result changed what the check reads
	if n := h.s.testSignals.overduePasses.Load() - passes; n != 1 {
		t.Fatalf("%d passes over the jobs after a result; want 1", n)
	}
	h.advanceTo(success.Add(time.Hour - time.Second))
	if h.s.Overdue("nightly") {
		t.Fatal("overdue before the window ended")
	}
	h.advanceTo(success.Add(time.Hour))
	if !h.s.Overdue("nightly") {
		t.Fatal("not overdue at the end of its window")
	}
}

func wantJobNotifications(t *testing.T, h *harness, job string, want ...string) {
	t.Helper()
	ns, err := h.st.NotificationsList(context.Background(), store.NotificationFilter{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range ns {
		got = append(got, n.Notifier+" "+string(n.Event))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("notifications of %s: %q, want %q", job, got, want)
	}
}

// overdueAsks is a store that counts the calls of JobOverdue.
type overdueAsks struct {
	store.Store
	n atomic.Int32
}

func (s *overdueAsks) JobOverdue(ctx context.Context, p store.JobOverdueParams) (*store.JobNotifyState, bool, error) {
	s.n.Add(1)
	return s.Store.JobOverdue(ctx, p)
}

// TestOverdueAskedAgainAfterAMinute: a job that this node finds overdue,
// but the store does not (a success this node has not heard of), is asked
// of the store again a minute later, not at every check.
func TestOverdueAskedAgainAfterAMinute(t *testing.T) {
	var asks *overdueAsks
	h := newHarnessWith(t, func(h *harness) {
		h.wrap = func(st store.Store) store.Store {
			asks = &overdueAsks{Store: st}
			return asks
		}
	}, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("nightly", h.succeed, func(d *jobs.Definition) { d.ExpectSuccessWithin = time.Hour })}
	})
	// A success the store's feed never told of: written behind its back.
	db, err := sql.Open("sqlite", "file:"+h.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO job_results (job, last_success_at) VALUES ('nightly', ?)`, t0.Add(30*time.Minute).UnixMicro())
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at   time.Duration
		asks int32
	}{
		{time.Hour - time.Second, 0},
		{time.Hour, 1}, // due by what this node knows: the store says no
		{time.Hour + 30*time.Second, 1},
		{time.Hour + time.Minute - time.Second, 1},
		{time.Hour + time.Minute, 2},
	} {
		h.advanceTo(t0.Add(step.at))
		if got := asks.n.Load(); got != step.asks || h.s.Overdue("nightly") {
			t.Fatalf("at 12:00 + %s: %d asks (want %d), overdue %v", step.at, got, step.asks, h.s.Overdue("nightly"))
		}
	}
}
