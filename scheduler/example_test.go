package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// A Go program embeds the engine: a Go handler and a command job side by side
// on the embedded SQLite store.
func ExampleScheduler() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "schedulerd-example-")
	defer os.RemoveAll(dir)

	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "schedulerd.db"), Lock: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	greeted := make(chan string, 1)
	release := make(chan struct{})
	greet := &jobs.Definition{
		Name: "greet",
		Handler: func(ctx context.Context) error {
			run, _ := jobs.InfoFrom(ctx) // run id, attempt, scheduled time, payload
			greeted <- fmt.Sprintf("hello, %s (attempt %d)", run.Payload, run.Attempt)
			<-release
			return nil
		},
	}
	nightly, _ := schedule.Parse("0 3 * * *", time.UTC)
	backup := &jobs.Definition{Name: "backup", Schedule: nightly, Command: []string{"/bin/true"}}
	for _, d := range []*jobs.Definition{greet, backup} {
		d.WithDefaults()
	}

	sched, err := scheduler.New(st, scheduler.Config{NodeID: "example"}, []*jobs.Definition{greet, backup})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sched.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer sched.Stop(ctx)

	run, err := sched.Trigger(ctx, "greet", scheduler.TriggerParams{Payload: "world", DedupID: "greet-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-greeted)

	// The dedup id is refused while that run is not finished.
	_, err = sched.Trigger(ctx, "greet", scheduler.TriggerParams{DedupID: "greet-1"})
	fmt.Println("second trigger refused:", errors.Is(err, store.ErrDuplicate))
	close(release)
	fmt.Println("run", run.Job, run.Trigger)
	// Output:
	// hello, world (attempt 1)
	// second trigger refused: true
	// run greet manual
}
