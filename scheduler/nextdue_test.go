package scheduler_test

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// TestBlockedRunDoesNotHideALaterOne: a run that is due but waits for its
// job's limit must not keep the loop from waking when another job's run
// becomes due. The loop asked the store for the earliest not_before of
// the waiting runs, got the blocked run's (already past) and slept until
// the next poll: a run due 5 s later started 10 s late. Found by the
// simulator (a jittered tick's run started at the next tick's fire).
func TestBlockedRunDoesNotHideALaterOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedulerd.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		time.Sleep(time.Until(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)))
		st, err := sqlite.Open(ctx, sqlite.Options{Path: path, Lock: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		release := make(chan struct{})
		busy := &jobs.Definition{Name: "busy", MaxConcurrency: 1, Handler: func(ctx context.Context) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}}
		later := &jobs.Definition{Name: "later", Handler: func(context.Context) error { return nil }}
		for _, d := range []*jobs.Definition{busy, later} {
			d.WithDefaults()
		}
		s, err := scheduler.New(st, scheduler.Config{NodeID: "n", Concurrency: 4}, []*jobs.Definition{busy, later})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		// busy runs one run; its second waits for the first.
		for range 2 {
			if _, err := s.Trigger(ctx, "busy", scheduler.TriggerParams{}); err != nil {
				t.Fatal(err)
			}
		}
		due := time.Now().Add(5 * time.Second)
		r, err := s.Trigger(ctx, "later", scheduler.TriggerParams{NotBefore: due})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		as, err := st.RunAttempts(ctx, r.ID)
		if err != nil || len(as) != 1 {
			t.Fatalf("attempts of the later run: %v, %v", as, err)
		}
		if !as[0].StartedAt.Equal(due) {
			t.Errorf("the later run started at %s, %s after its not_before", as[0].StartedAt, as[0].StartedAt.Sub(due))
		}
		close(release)
		s.Stop(ctx)
	})
}
