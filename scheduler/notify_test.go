package scheduler

import (
	"context"
	"slices"
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
