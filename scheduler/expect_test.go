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
