package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// overdueMetric returns the schedulerd_job_overdue line of job; "" when
// it has none.
func overdueMetric(s *Scheduler, job string) string {
	var b strings.Builder
	s.WriteJobMetrics(&b)
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, `schedulerd_job_overdue{job="`+job+`"}`) {
			return l
		}
	}
	return ""
}

// TestRetiredJobStillExpected: a job with expect_success_within that a
// reload removes is still expected, cluster-wide, from its last success:
// it becomes overdue once after its window (one notification, to the
// notifier its expectation names, which this node's config has), shown by
// Retired, Overdue and schedulerd_job_overdue; a restart whose config
// does not declare it either keeps it so, without a second notification;
// Forget ends it, and nothing is told after.
func TestRetiredJobStillExpected(t *testing.T) {
	ops := jobs.NotifyTarget{Notifier: "ops", Events: jobs.DefaultNotifyEvents}
	h := newHarnessWith(t, func(h *harness) { h.cfg.Notifiers = []jobs.NotifyTarget{ops} }, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("nightly", h.succeed, func(d *jobs.Definition) {
			d.ExpectSuccessWithin = time.Hour
			d.Notify = []jobs.NotifyTarget{ops}
		})}
	})
	ctx := context.Background()
	if _, err := h.s.Trigger(ctx, "nightly", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	h.resultsUntil("the success", func() bool { return h.s.lastSuccess("nightly") == t0 })

	others := []*jobs.Definition{job("other", h.succeed)}
	h.advanceTo(t0.Add(10 * time.Minute))
	if err := h.s.Reload(ctx, others); err != nil {
		t.Fatal(err)
	}
	retired := h.s.Retired()
	if len(retired) != 1 || retired[0].Job != "nightly" || retired[0].Within != time.Hour || !retired[0].LastSuccess.Equal(t0) ||
		retired[0].Overdue || strings.Join(retired[0].Notify, ",") != "ops" {
		t.Fatalf("retired after the reload: %+v", retired)
	}
	h.advanceTo(t0.Add(time.Hour - time.Second))
	if h.s.Overdue("nightly") || overdueMetric(h.s, "nightly") != `schedulerd_job_overdue{job="nightly"} 0` {
		t.Fatalf("overdue before the window ended: %q", overdueMetric(h.s, "nightly"))
	}
	h.advanceTo(t0.Add(time.Hour))
	h.advanceTo(t0.Add(time.Hour + time.Minute))
	h.advanceTo(t0.Add(2 * time.Hour))
	if !h.s.Overdue("nightly") || overdueMetric(h.s, "nightly") != `schedulerd_job_overdue{job="nightly"} 1` {
		t.Fatalf("a removed job did not become overdue: %q", overdueMetric(h.s, "nightly"))
	}
	wantJobNotifications(t, h, "nightly", "ops overdue")

	// A restart with a config that does not declare it either.
	h.stop()
	h.start(others)
	h.advanceTo(t0.Add(3 * time.Hour))
	if r := h.s.Retired(); len(r) != 1 || !r[0].Overdue || !h.s.Overdue("nightly") {
		t.Fatalf("retired after a restart: %+v", r)
	}
	wantJobNotifications(t, h, "nightly", "ops overdue")

	if err := h.s.Forget(ctx, "other", "socket:test"); !errors.Is(err, ErrJobDeclared) {
		t.Fatalf("forget of a declared job: %v, want ErrJobDeclared", err)
	}
	if err := h.s.Forget(ctx, "nightly", "socket:test"); err != nil {
		t.Fatal(err)
	}
	if r := h.s.Retired(); len(r) != 0 || h.s.Overdue("nightly") || overdueMetric(h.s, "nightly") != "" {
		t.Fatalf("forgotten, still retired: %+v, metric %q", r, overdueMetric(h.s, "nightly"))
	}
	if err := h.s.Forget(ctx, "nightly", "socket:test"); !errors.Is(err, ErrNotExpected) {
		t.Fatalf("forget twice: %v, want ErrNotExpected", err)
	}
	states, err := h.st.JobNotifyStates(ctx, []string{"nightly"})
	if err != nil || states["nightly"].Troubled() {
		t.Fatalf("forgotten, the job is still troubled in the store: %+v, %v", states["nightly"], err)
	}
	h.advanceTo(t0.Add(5 * time.Hour))
	wantJobNotifications(t, h, "nightly", "ops overdue")
}

// TestExpectationEndedByConfig: a reload that still declares the job but
// without expect_success_within ends its expectation in the store, so no
// node expects it any more; a key added back starts a new expectation
// from then, not from the first one.
func TestExpectationEndedByConfig(t *testing.T) {
	expect := func(d *jobs.Definition) { d.ExpectSuccessWithin = time.Hour }
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("nightly", h.succeed, expect)}
	})
	ctx := context.Background()
	list := func() []*store.Expectation {
		t.Helper()
		es, err := h.st.ExpectationsList(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	if es := list(); len(es) != 1 || !es[0].Since.Equal(t0) {
		t.Fatalf("expectations at start: %+v", es)
	}
	if err := h.s.Reload(ctx, []*jobs.Definition{job("nightly", h.succeed)}); err != nil {
		t.Fatal(err)
	}
	if es := list(); len(es) != 0 || len(h.s.Retired()) != 0 {
		t.Fatalf("expectations after the key was removed: %+v, retired %+v", es, h.s.Retired())
	}
	h.advanceTo(t0.Add(30 * time.Minute))
	if err := h.s.Reload(ctx, []*jobs.Definition{job("nightly", h.succeed, expect)}); err != nil {
		t.Fatal(err)
	}
	h.advanceTo(t0.Add(time.Hour + time.Minute))
	if h.s.Overdue("nightly") {
		t.Fatal("overdue by the window of an expectation that was ended")
	}
	h.advanceTo(t0.Add(90 * time.Minute))
	if !h.s.Overdue("nightly") {
		t.Fatal("not overdue an hour after the key was added back")
	}
}

// retiredHarness starts a node that declares nightly (expect within an
// hour, notifier ops) and reloads it without it at t0, so that nightly
// is retired: expected, never succeeded, due at t0 + 1h.
func retiredHarness(t *testing.T) (*harness, jobs.NotifyTarget) {
	t.Helper()
	ops := jobs.NotifyTarget{Notifier: "ops", Events: jobs.DefaultNotifyEvents}
	h := newHarnessWith(t, func(h *harness) { h.cfg.Notifiers = []jobs.NotifyTarget{ops} }, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("nightly", h.succeed, func(d *jobs.Definition) {
			d.ExpectSuccessWithin = time.Hour
			d.Notify = []jobs.NotifyTarget{ops}
		})}
	})
	if err := h.s.Reload(context.Background(), []*jobs.Definition{job("other", h.succeed)}); err != nil {
		t.Fatal(err)
	}
	if r := h.s.Retired(); len(r) != 1 || r[0].Job != "nightly" || !r[0].Since.Equal(t0) {
		t.Fatalf("retired: %+v", r)
	}
	return h, ops
}

// TestRetiredJobResolvedByAnotherNode: a retired job that is overdue is
// resolved by a success of a run that another node (one that still
// declares it) ends: this node learns it from the store's feed of
// results, and its window counts from that success.
func TestRetiredJobResolvedByAnotherNode(t *testing.T) {
	h, ops := retiredHarness(t)
	ctx := context.Background()
	h.advanceTo(t0.Add(time.Hour))
	if !h.s.Overdue("nightly") {
		t.Fatal("not overdue at the end of its window")
	}
	wantJobNotifications(t, h, "nightly", "ops overdue")

	// node-b declares nightly, runs it and records the success.
	at := t0.Add(2 * time.Hour)
	h.clock.Set(at)
	if _, err := h.st.RunInsert(ctx, store.RunInsertParams{Job: "nightly", Trigger: jobs.TriggerManual, ScheduledAt: at, NotBefore: at,
		Retry: jobs.RetryPolicy{MaxAttempts: 1}, Node: "node-b", Now: at}); err != nil {
		t.Fatal(err)
	}
	rs, err := h.st.RunsClaim(ctx, store.ClaimParams{Node: "node-b", Incarnation: "inc-b", Jobs: store.NewJobLimits(map[string]int{"nightly": 0}), Limit: 1, Now: at})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim on node-b: %v, %v", rs, err)
	}
	tr := jobs.Complete(jobs.Fence{RunID: rs[0].ID, Attempt: rs[0].Attempt, Incarnation: "inc-b"}, "node-b", jobs.Result{ExitCode: new(int)}, at)
	tr.Notify = []jobs.NotifyTarget{ops}
	if _, err := h.st.RunTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	h.resultsUntil("the success on node-b", func() bool { return !h.s.Overdue("nightly") })
	wantJobNotifications(t, h, "nightly", "ops overdue", "ops resolved")
	if r := h.s.Retired(); len(r) != 1 || !r[0].LastSuccess.Equal(at) || r[0].Overdue {
		t.Fatalf("retired after the success: %+v", r)
	}
	h.advanceTo(at.Add(time.Hour - time.Second))
	if h.s.Overdue("nightly") {
		t.Fatal("overdue before the window from the success ended")
	}
	h.advanceTo(at.Add(time.Hour))
	if !h.s.Overdue("nightly") {
		t.Fatal("not overdue an hour after the success")
	}
	wantJobNotifications(t, h, "nightly", "ops overdue", "ops resolved", "ops overdue")
}

// TestRetiredJobForgottenByAnotherNode: a retired job forgotten through
// another node goes from this one too: before its window ends, at the
// next reading of the retired jobs' expectations (a minute at most), and
// it never becomes overdue; a node that asks the store to make it overdue
// meanwhile is told it is not expected, and writes nothing.
func TestRetiredJobForgottenByAnotherNode(t *testing.T) {
	h, _ := retiredHarness(t)
	ctx := context.Background()
	h.advanceTo(t0.Add(time.Minute)) // a reading of the expectations
	if err := h.st.ExpectationForget(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	h.advanceTo(t0.Add(2 * time.Minute))
	if r := h.s.Retired(); len(r) != 0 || overdueMetric(h.s, "nightly") != "" {
		t.Fatalf("forgotten elsewhere, still retired here: %+v, metric %q", r, overdueMetric(h.s, "nightly"))
	}

	// Forgotten between two readings (the last at t0 + 59m30s, the next
	// due a minute later), at the end of its window.
	h2, _ := retiredHarness(t)
	h2.advanceTo(t0.Add(59*time.Minute + 30*time.Second))
	if err := h2.st.ExpectationForget(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	h2.advanceTo(t0.Add(time.Hour))
	if r := h2.s.Retired(); len(r) != 0 || h2.s.Overdue("nightly") {
		t.Fatalf("forgotten elsewhere, overdue here: %+v", r)
	}
	wantJobNotifications(t, h2, "nightly")
}
