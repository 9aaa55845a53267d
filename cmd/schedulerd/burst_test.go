package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
)

// TestKilledDuringBurstEveryTickOnce is guarantees 1, 2 and 6 when the
// daemon dies inside a burst: more jobs are due at the same second than one
// fire transaction holds, so the results of attempts wait while the burst
// is fired and claimed (README, "Bursts"). The daemon is SIGKILLed part way
// through a burst's attempts, or while it catches up the ticks missed while
// it was down, and restarted. Every tick of every job must have exactly one
// run, every run must complete, and an attempt cut by the kill is
// retried in the same run. On SQLite and on PostgreSQL, where a burst's
// claims run while its next part is fired.
func TestKilledDuringBurstEveryTickOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process test of about 40 seconds; run without -short")
	}
	t.Run("sqlite", func(t *testing.T) {
		e := newEnv(t)
		testKilledDuringBurst(t, e, "", e.openStore)
	})
	t.Run("postgres", func(t *testing.T) {
		pg.Require(t)
		dsn := pg.NewDatabase(t)
		open := func() store.Store {
			st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		testKilledDuringBurst(t, newEnv(t), fmt.Sprintf("store = %q", dsn), open)
	})
}

func testKilledDuringBurst(t *testing.T, e *env, daemon string, openStore func() store.Store) {
	const (
		nJobs  = 600 // more than one fire transaction (500)
		period = 5 * time.Second
	)
	witness := filepath.Join(e.dir, "witness")
	var cfg strings.Builder
	for i := range nJobs {
		fmt.Fprintf(&cfg, `[[job]]
name = "b%03d"
schedule = "*/5 * * * * *"
timezone = "UTC"
shell = 'echo "$SCHEDULERD_JOB $SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID" >> %s'
catchup = "all"
misfire_grace = "5m"
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "1s" }
`, i, witness)
	}
	e.writeConfigWith(64, daemon, cfg.String())

	lineCount := func() int {
		b, err := os.ReadFile(witness)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var start time.Time // the first READY=1: every cursor exists by then
	midway, atStart := 0, 0
	for i := 0; i < 6; i++ {
		d := e.start(true)
		if start.IsZero() {
			start = time.Now()
		}
		if i > 0 && rng.IntN(3) == 0 {
			// The ticks missed while down are one burst, fired at once.
			time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
			atStart++
		} else {
			// Part way through the attempts of a burst: some have
			// written their line, others run or wait to start.
			before, k := lineCount(), 1+rng.IntN(nJobs-1)
			waitFor(t, fmt.Sprintf("%d more witness lines", k), 3*period,
				func() bool { return lineCount() >= before+k })
			midway++
		}
		d.kill()
	}
	d := e.start(true)
	end := time.Now().Truncate(period)

	// Wait until every tick of every job from start to end has a run that
	// ended, then stop.
	st := openStore()
	type key struct {
		job  string
		tick int64
	}
	var runs []*jobs.Run
	missing := 0
	waitFor(t, "every tick run to its end", 90*time.Second, func() bool {
		var err error
		runs, err = st.RunsList(context.Background(), store.RunFilter{Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		ended := map[key]bool{}
		for _, r := range runs {
			if r.Status.Terminal() {
				ended[key{r.Job, r.ScheduledAt.Unix()}] = true
			}
		}
		missing = 0
		for i := range nJobs {
			for tk := start.Truncate(period).Add(period); !tk.After(end); tk = tk.Add(period) {
				if !ended[key{fmt.Sprintf("b%03d", i), tk.Unix()}] {
					missing++
				}
			}
		}
		return missing == 0
	})
	d.stop()

	runs, err := st.RunsList(context.Background(), store.RunFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	runOf := map[key]string{}
	retried := 0
	for _, r := range runs {
		k := key{r.Job, r.ScheduledAt.Unix()}
		if other, ok := runOf[k]; ok {
			t.Errorf("%s tick %s has two runs: %s and %s", r.Job, r.ScheduledAt.UTC().Format(time.RFC3339), other, r.ID)
		}
		runOf[k] = r.ID
		if r.Status != jobs.StatusCompleted {
			t.Errorf("run %s (%s tick %s) ended %s, want completed", r.ID, r.Job, r.ScheduledAt.UTC().Format(time.RFC3339), r.Status)
		}
		if r.Attempt > 1 {
			retried++
		}
	}
	// What the attempts themselves saw: each line names the run of its
	// tick, and every run of the store has at least one line.
	seen := map[string]bool{}
	for job, ticks := range witnessTicks(t, witness) {
		for tick, ids := range ticks {
			k := key{job, tick}
			for id := range ids {
				if runOf[k] != id {
					t.Errorf("%s tick %s ran as run %s; the store's run of that tick is %q",
						job, time.Unix(tick, 0).UTC().Format(time.RFC3339), id, runOf[k])
				}
				seen[id] = true
			}
		}
	}
	for _, r := range runs {
		if !seen[r.ID] {
			t.Errorf("run %s (%s tick %s) completed with no witness line", r.ID, r.Job, r.ScheduledAt.UTC().Format(time.RFC3339))
		}
	}
	t.Logf("%d kills part way through a burst, %d while catching up; %d runs over %s, %d retried",
		midway, atStart, len(runs), end.Sub(start).Round(time.Second), retried)
}
