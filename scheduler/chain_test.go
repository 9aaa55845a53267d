package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// TestChainRuns: a run of etl that completes makes a run of report, one
// that ends dead_letter or expires a run of page, each once, carrying
// etl's payload and its run id (jobs.Info.ParentRunID), with its own
// job's retry policy; the loop runs them at once.
func TestChainRuns(t *testing.T) {
	fail := false
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{
			job("etl", func(ctx context.Context) error {
				if fail {
					return h.fail(ctx)
				}
				return h.succeed(ctx)
			}, func(d *jobs.Definition) {
				d.Retry.MaxAttempts = 1
				d.OnSuccess, d.OnFailure = []string{"report"}, []string{"page"}
			}),
			job("report", h.succeed, func(d *jobs.Definition) { d.Retry.MaxAttempts = 5 }),
			job("page", h.succeed),
		}
	})
	ctx := context.Background()
	check := func(parent *jobs.Run, child jobs.Info, job string) {
		t.Helper()
		if child.Job != job || child.ParentRunID != parent.ID || child.Trigger != jobs.TriggerChain || child.Payload != parent.Payload {
			t.Fatalf("child of %s (%s): %+v, want job %s", parent.ID, parent.Status, child, job)
		}
		kids, err := h.st.RunChildren(ctx, parent.ID)
		if err != nil || len(kids) != 1 || kids[0].ID != child.RunID {
			t.Fatalf("children of %s: %v, %v", parent.ID, kids, err)
		}
		if want, _ := h.s.Job(job); kids[0].MaxAttempts != want.Retry.MaxAttempts {
			t.Fatalf("child %s: max attempts %d, want %d", job, kids[0].MaxAttempts, want.Retry.MaxAttempts)
		}
	}

	r, err := h.s.Trigger(ctx, "etl", TriggerParams{Payload: "day=1"})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	got := h.handled(2)
	check(h.run(r.ID), got[1], "report")

	fail = true
	r, err = h.s.Trigger(ctx, "etl", TriggerParams{Payload: "day=2"})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	got = h.handled(2)
	if p := h.run(r.ID); p.Status != jobs.StatusDeadLetter {
		t.Fatalf("etl is %s", p.Status)
	}
	check(h.run(r.ID), got[1], "page")

	// A run that never started by its not_after expires: a failure.
	now := h.clock.Now()
	r, err = h.s.Trigger(ctx, "etl", TriggerParams{Payload: "day=3", NotBefore: now.Add(time.Hour), NotAfter: now.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	h.advanceTo(now.Add(3 * time.Hour))
	got = h.handled(1)
	if p := h.run(r.ID); p.Status != jobs.StatusCancelled || p.Reason != jobs.ReasonExpired {
		t.Fatalf("etl is %s (%s)", p.Status, p.Reason)
	}
	check(h.run(r.ID), got[0], "page")

	// A user's cancel is no failure.
	r, err = h.s.Trigger(ctx, "etl", TriggerParams{NotBefore: h.clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Cancel(ctx, r.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if kids, err := h.st.RunChildren(ctx, r.ID); err != nil || len(kids) != 0 {
		t.Fatalf("children of a cancelled run: %v, %v", kids, err)
	}
}
