package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestKilledDuringBurstEveryTickOnce is guarantees 1, 2 and 6 when the
// daemon dies inside a burst: more jobs are due at the same second than one
// fire transaction holds, so the results of attempts wait while the burst
// is fired and claimed (docs/firing-ahead.md, "Bursts"). The daemon is SIGKILLed part way
// through a burst's attempts, or while it catches up the ticks missed while
// it was down, and restarted. Every tick of every job must have exactly one
// run, every run must complete, and an attempt cut by the kill is
// retried in the same run. On SQLite and on PostgreSQL, where a burst's
// claims run while its next part is fired.
func TestKilledDuringBurstEveryTickOnce(t *testing.T) {
	proctest.Long(t, "SIGKILLs a daemon inside bursts")
	t.Run("sqlite", func(t *testing.T) {
		e := newEnv(t)
		testKilledDuringBurst(t, e, "", e.openStore)
	})
	t.Run("postgres", func(t *testing.T) {
		pg.Require(t)
		dsn := pg.NewDatabase(t)
		open := func() store.Store { return openPostgres(t, dsn) }
		testKilledDuringBurst(t, newEnv(t), fmt.Sprintf("store = %q", dsn), open)
	})
}

func testKilledDuringBurst(t *testing.T, e *env, daemon string, openStore func() store.Store) {
	const nJobs = 600 // more than one fire transaction (500)
	witness := filepath.Join(e.dir, "witness")
	e.writeConfigWith(64, daemon, burstWitnessJobs(nJobs, witness))
	lineCount := func() int { return witnessLines(t, witness) }
	rng := testRNG(t, 2)
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
			waitFor(t, fmt.Sprintf("%d more witness lines", k), 3*burstPeriod,
				func() bool { return lineCount() >= before+k })
			midway++
		}
		d.kill()
	}
	d := e.start(true)
	end := time.Now().Truncate(burstPeriod)

	st := openStore()
	waitBurstTicks(t, st, nJobs, burstPeriod, start, end)
	d.stop()
	runs, retried := checkBurstRuns(t, st, witness, end)
	t.Logf("%d kills part way through a burst, %d while catching up; %d runs over %s, %d retried",
		midway, atStart, len(runs), end.Sub(start).Round(time.Second), retried)
}

// TestClusterKilledDuringBurstEveryTickOnce is the same on three nodes of
// one PostgreSQL database: every node fires each burst of 200 jobs due at
// the same second (in parts, claimed while the next part is fired), so the
// nodes race for the same ticks and runs. A node is SIGKILLed part way
// through a burst's attempts and restarted at once (it takes over its own
// attempts) or after up to 8 s, past inactive_threshold (the others recover
// them). Every tick of every job must have exactly one run, completed, and
// no tick may run as two runs.
func TestClusterKilledDuringBurstEveryTickOnce(t *testing.T) {
	proctest.Long(t, "cluster nodes SIGKILLed inside bursts")
	const nJobs = 200 // more than one part of a round (32) on each node
	witness := filepath.Join(t.TempDir(), "witness")
	c := newCluster(t, 3, burstWitnessJobs(nJobs, witness))
	start := time.Now() // every node is ready: every cursor exists
	rng := testRNG(t, 3)
	late := 0
	const kills = 6
	for range kills {
		before, k := witnessLines(t, witness), 1+rng.IntN(nJobs-1)
		waitFor(t, fmt.Sprintf("%d more witness lines", k), 3*burstPeriod,
			func() bool { return witnessLines(t, witness) >= before+k })
		ids := c.ids()
		id := ids[rng.IntN(len(ids))]
		c.node(id).d.kill()
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(8 * time.Second))))
			late++
		}
		c.start(id)
	}
	end := time.Now().Truncate(burstPeriod)
	waitBurstTicks(t, c.st, nJobs, burstPeriod, start, end)
	for _, id := range c.ids() {
		c.node(id).d.stop()
	}
	runs, retried := checkBurstRuns(t, c.st, witness, end)
	byNode := map[string]int{}
	for _, r := range runs {
		byNode[r.Node]++
	}
	if len(byNode) < 2 {
		t.Errorf("runs ended on nodes %v: the nodes did not share the bursts", byNode)
	}
	t.Logf("%d kills part way through a burst (%d restarted after a pause); %d runs over %s, %d retried; last attempt by node: %v",
		kills, late, len(runs), end.Sub(start).Round(time.Second), retried, byNode)
}

// burstPeriod is how often the burst jobs fire, all at the same second.
const burstPeriod = 5 * time.Second

// burstWitnessJobs declares n jobs due every burstPeriod at the same
// second, each appending "JOB TICK RUN" to witness, with every missed tick
// caught up.
func burstWitnessJobs(n int, witness string) string {
	return witnessJobsEvery(n, burstPeriod, witness)
}

// witnessJobsEvery is burstWitnessJobs with the jobs due every period (whole
// seconds that divide a minute).
func witnessJobsEvery(n int, period time.Duration, witness string) string {
	var cfg strings.Builder
	for i := range n {
		fmt.Fprintf(&cfg, `[[job]]
name = "b%03d"
schedule = "*/%d * * * * *"
timezone = "UTC"
shell = 'echo "$SCHEDULERD_JOB $SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID" >> %s'
catchup = "all"
misfire_grace = "5m"
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "1s" }
`, i, int(period/time.Second), witness)
	}
	return cfg.String()
}

// witnessLines counts the lines the witness jobs wrote so far.
func witnessLines(t *testing.T, witness string) int {
	b, err := os.ReadFile(witness)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// allRuns lists every run in the store, page after page: a busy machine
// makes the tests that use it run long enough for more rounds than one
// page of the listing holds (store.MaxListLimit).
func allRuns(t *testing.T, st store.Store) []*jobs.Run {
	t.Helper()
	var all []*jobs.Run
	f := store.RunFilter{Limit: store.MaxListLimit}
	for {
		page, err := st.RunsList(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < store.MaxListLimit {
			return all
		}
		f.Before = page[len(page)-1].ID
	}
}

type burstTick struct {
	job  string
	tick int64
}

// waitBurstTicks waits until every tick of the n burst jobs, due every
// period, after start up to end, has a run that ended.
func waitBurstTicks(t *testing.T, st store.Store, n int, period time.Duration, start, end time.Time) {
	t.Helper()
	waitFor(t, "every tick run to its end", 90*time.Second, func() bool {
		runs := allRuns(t, st)
		ended := map[burstTick]bool{}
		for _, r := range runs {
			if r.Status.Terminal() {
				ended[burstTick{r.Job, r.ScheduledAt.Unix()}] = true
			}
		}
		for i := range n {
			for tk := start.Truncate(period).Add(period); !tk.After(end); tk = tk.Add(period) {
				if !ended[burstTick{fmt.Sprintf("b%03d", i), tk.Unix()}] {
					return false
				}
			}
		}
		return true
	})
}

// checkBurstRuns checks, once the daemons stopped, that every tick has one
// run, and that every tick up to end (those the test waited for) has its run
// completed, and that the attempts agree: each witness line names the
// store's run of its tick, and every run up to end has a line. A later
// tick's run may be there unfinished: a round is written ahead of its tick
// and claimed just before it, and a daemon stopped then leaves it pending
// for the next start. It returns the runs up to end and the number that
// needed more than one attempt.
func checkBurstRuns(t *testing.T, st store.Store, witness string, end time.Time) (runs []*jobs.Run, retried int) {
	t.Helper()
	all := allRuns(t, st)
	runOf := map[burstTick]string{}
	for _, r := range all {
		k := burstTick{r.Job, r.ScheduledAt.Unix()}
		if other, ok := runOf[k]; ok {
			t.Errorf("%s tick %s has two runs: %s and %s", r.Job, r.ScheduledAt.UTC().Format(time.RFC3339), other, r.ID)
		}
		runOf[k] = r.ID
		if r.ScheduledAt.After(end) {
			continue
		}
		runs = append(runs, r)
		if r.Status != jobs.StatusCompleted {
			t.Errorf("run %s (%s tick %s) ended %s, want completed", r.ID, r.Job, r.ScheduledAt.UTC().Format(time.RFC3339), r.Status)
		}
		if r.Attempt > 1 {
			retried++
		}
	}
	seen := map[string]bool{}
	for job, ticks := range witnessTicks(t, witness) {
		for tick, ids := range ticks {
			k := burstTick{job, tick}
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
			t.Errorf("run %s (%s tick %s, %s) has no witness line", r.ID, r.Job, r.ScheduledAt.UTC().Format(time.RFC3339), r.Status)
		}
	}
	return runs, retried
}
