package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestNextJitter: next shows the delayed starts of a job with jitter, the
// same from --schedule and --jitter as from the job of the config, with
// the values the delay function is documented to give; check-config shows
// the delays too.
func TestNextJitter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "schedulerd.toml")
	cfg := `[defaults]
jitter = "5m"

[[job]]
name = "backup"
schedule = "0 3 * * *"
timezone = "UTC"
command = ["/bin/true"]
not_after = 2026-03-04T00:00:00Z

[[job]]
name = "plain"
schedule = "0 3 * * *"
timezone = "UTC"
jitter = "0s"
command = ["/bin/true"]

[[job]]
name = "reindex"
command = ["/bin/true"]
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The delays of TestJitterDelayValues (jobs), computed apart from the
	// daemon's code.
	want := "2026-03-02T03:03:47.525Z  tick 2026-03-02T03:00:00Z +3m47.525s\n" +
		"2026-03-03T03:04:29.482Z  tick 2026-03-03T03:00:00Z +4m29.482s\n"
	from := "2026-03-01T12:00:00Z"
	r := runBinary(t, "", "", "next", "--schedule", "0 3 * * *", "--timezone", "UTC", "--job", "backup", "--jitter", "5m", "--from", from, "-n", "2")
	if r.code != 0 || r.stdout != want {
		t.Errorf("next --schedule --jitter: exit %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, want)
	}
	// The job of the config: its jitter from [defaults], and its ticks up
	// to not_after only.
	r = runBinary(t, "", "", "next", "--job", "backup", "--config", path, "--from", from, "-n", "5")
	if r.code != 0 || r.stdout != want {
		t.Errorf("next --job: exit %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, want)
	}
	r = runBinary(t, "", "", "next", "--job", "backup", "--config", path, "--from", from, "-n", "1", "--json")
	if j := jsonOne(t, r.stdout); r.code != 0 || j["tick"] != "2026-03-02T03:00:00Z" || j["start"] != "2026-03-02T03:03:47.525Z" {
		t.Errorf("next --json: exit %d %v %s", r.code, j, r.stderr)
	}
	// Without jitter: the ticks alone, as before; --json has start = tick.
	r = runBinary(t, "", "", "next", "--job", "plain", "--config", path, "--from", from, "-n", "1")
	if r.code != 0 || r.stdout != "2026-03-02T03:00:00Z\n" {
		t.Errorf("next of a job with jitter 0s: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, "", "", "next", "--schedule", "0 3 * * *", "--timezone", "UTC", "--from", from, "-n", "1", "--json")
	if j := jsonOne(t, r.stdout); r.code != 0 || j["tick"] != "2026-03-02T03:00:00Z" || j["start"] != "2026-03-02T03:00:00Z" {
		t.Errorf("next --json without jitter: exit %d %v %s", r.code, j, r.stderr)
	}

	r = runBinary(t, dir, "", "check-config", "--config", path, "-n", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "T03:00:00Z +") {
		t.Errorf("check-config does not show the delay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"next", "--schedule", "@hourly", "--jitter", "5m"}, "--jitter needs --job"},
		{[]string{"next", "--schedule", "@hourly", "--job", "a", "--jitter", "-5m"}, `--jitter: want a duration such as "5m", got "-5m"`},
		{[]string{"next", "--schedule", "@hourly", "--job", "a", "--jitter", "300"}, `--jitter: want a duration`},
		{[]string{"next", "--job", "nope", "--config", path}, `declares no job "nope"`},
		{[]string{"next", "--job", "reindex", "--config", path}, "job reindex has no schedule (trigger)"},
		{[]string{"next", "--job", "backup", "--config", path, "--jitter", "1m"}, "--timezone and --jitter go with --schedule"},
		{[]string{"next"}, "give --schedule, or --job"},
	} {
		r := runBinary(t, "", "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d %q; want exit %d and %q", c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
}

// jitterWitness reads the lines "TICK RUN UNIXTIME" that the jittered
// jobs append: per run, its tick and when its process ran.
func jitterWitness(t *testing.T, path string) map[string]witnessRun {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]witnessRun{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fs := strings.Fields(l)
		if len(fs) != 3 {
			continue
		}
		tick, err1 := time.Parse(time.RFC3339, fs[0])
		secs, err2 := strconv.ParseFloat(fs[2], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("witness line %q", l)
		}
		if _, dup := out[fs[1]]; dup {
			t.Errorf("run %s executed twice", fs[1])
		}
		out[fs[1]] = witnessRun{tick: tick, at: time.Unix(0, int64(secs*1e9))}
	}
	return out
}

type witnessRun struct{ tick, at time.Time }

// jitterJob is a job firing every 5 seconds with a jitter of 4 seconds,
// appending "TICK RUN UNIXTIME" to witness when it runs.
func jitterJob(witness string) string {
	return fmt.Sprintf(`[[job]]
name = "spread"
schedule = "*/5 * * * * *"
timezone = "UTC"
jitter = "4s"
start_deadline = "1m"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $(date +%%s.%%N)" >> %s'
`, witness)
}

// checkJitterRuns checks the runs of the spread job: one per tick, each
// with not_before at the tick plus the delay that the test computes itself
// for it, in [tick, tick+jitter), none started before it, by the store or
// by the witness. It returns the runs by tick.
func checkJitterRuns(t *testing.T, st store.Store, def *jobs.Definition, witness string) map[int64]*jobs.Run {
	t.Helper()
	runs, err := st.RunsList(context.Background(), store.RunFilter{Job: def.Name, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	w := jitterWitness(t, witness)
	byTick := map[int64]*jobs.Run{}
	delayed := 0
	for _, r := range runs {
		tick := r.ScheduledAt
		if other, dup := byTick[tick.UnixMicro()]; dup {
			t.Errorf("tick %s fired twice: runs %s and %s", tick.Format(time.RFC3339), other.ID, r.ID)
		}
		byTick[tick.UnixMicro()] = r
		start := def.TickStart(tick)
		if !r.NotBefore.Equal(start) || r.NotBefore.Before(tick) || !r.NotBefore.Before(tick.Add(def.Jitter)) {
			t.Errorf("run of %s: not_before %s, want %s, in [tick, tick+%s)", tick.Format(time.RFC3339), r.NotBefore, start, def.Jitter)
		}
		if r.NotBefore.After(tick) {
			delayed++
		}
		if !r.StartedAt.IsZero() && r.StartedAt.Before(r.NotBefore) {
			t.Errorf("run of %s started at %s, before its not_before %s", tick.Format(time.RFC3339), r.StartedAt, r.NotBefore)
		}
		if wr, ok := w[r.ID]; ok && (!wr.tick.Equal(tick) || wr.at.Before(r.NotBefore)) {
			t.Errorf("run %s of %s: its process ran at %s for tick %s; not_before %s", r.ID, tick.Format(time.RFC3339), wr.at, wr.tick, r.NotBefore)
		}
	}
	if delayed == 0 {
		t.Errorf("none of %d runs was delayed", len(runs))
	}
	return byTick
}

// waitRun waits for the run of the spread job's tick and returns it once
// cond holds for it.
func waitRun(t *testing.T, st store.Store, tick time.Time, what string, timeout time.Duration, cond func(*jobs.Run) bool) *jobs.Run {
	t.Helper()
	var run *jobs.Run
	waitFor(t, what, timeout, func() bool {
		runs, err := st.RunsList(context.Background(), store.RunFilter{Job: "spread", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ScheduledAt.Equal(tick) && cond(r) {
				run = r
				return true
			}
		}
		return false
	})
	return run
}

// TestJitterProcess: a daemon runs a job with jitter = "4s" every 5
// seconds: each tick's run starts at its delayed time, in [tick,
// tick+jitter), and `jobs` shows the next start. A restart (SIGTERM, then
// a new daemon) while a run waits for its delay leaves that run waiting:
// it starts once, at its time, and its tick fires no second run.
func TestJitterProcess(t *testing.T) {
	proctest.Long(t, "ticks of real time and a restart")
	e := newEnv(t)
	witness := filepath.Join(e.dir, "witness")
	e.writeConfig(jitterJob(witness))
	cfg, err := config.Load(e.config)
	if err != nil {
		t.Fatal(err)
	}
	def := cfg.Jobs[0]
	st := e.openStore()
	d := e.start(true)
	first := def.Schedule.Next(time.Now())

	// jobs shows the next tick and its start.
	j := jsonOne(t, e.cli("jobs", "--json").stdout)
	next, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(j["next_fire"]))
	start, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(j["next_start"]))
	if err1 != nil || err2 != nil || !start.Equal(def.TickStart(next)) {
		t.Errorf("jobs --json: next_fire %v, next_start %v; want next_start %s", j["next_fire"], j["next_start"], def.TickStart(next))
	}
	if tbl := e.cli("jobs").stdout; !strings.Contains(tbl, "spread") || (start.After(next) && !strings.Contains(tbl, " +"+start.Sub(next).String())) {
		t.Errorf("jobs table does not show the delay %s:\n%s", start.Sub(next), tbl)
	}

	// Two ticks run at their delayed starts.
	for _, tick := range []time.Time{first, def.Schedule.Next(first)} {
		r := waitRun(t, st, tick, "the run of "+tick.Format(time.RFC3339)+" to complete", 30*time.Second,
			func(r *jobs.Run) bool { return r.Status == jobs.StatusCompleted })
		// On a quiet machine the attempt starts within a few milliseconds
		// of not_before; 3s leaves room for a busy one.
		if late := r.StartedAt.Sub(r.NotBefore); late < 0 || late > 3*time.Second {
			t.Errorf("run of %s started %s after its not_before %s", tick.Format(time.RFC3339), late, r.NotBefore)
		}
	}

	// Restart while a run waits for its delay: a tick whose delay is at
	// least 2s, whose run is seen pending after its tick (a run fired
	// ahead is taken back by a stop before its tick) and at least half a
	// second before its start (a busy machine may take more tries).
	var waiting *jobs.Run
	for tick, tries := def.Schedule.Next(time.Now().Add(time.Second)), 0; waiting == nil; tick = def.Schedule.Next(tick) {
		if def.TickStart(tick).Sub(tick) < 2*time.Second {
			continue
		}
		if tries++; tries > 5 {
			t.Fatal("no run was seen waiting for its delay in 5 tries")
		}
		time.Sleep(time.Until(tick.Add(100 * time.Millisecond))) // real time: the daemon is a real process
		r := waitRun(t, st, tick, "the run of "+tick.Format(time.RFC3339), 30*time.Second, func(*jobs.Run) bool { return true })
		if r.Status == jobs.StatusPending && time.Now().Before(r.NotBefore.Add(-500*time.Millisecond)) {
			waiting = r
		}
	}
	d.stop()
	if r, err := st.RunGet(context.Background(), waiting.ID); err != nil || r.Status != jobs.StatusPending {
		t.Fatalf("after the stop, the waiting run is %v (%v); want pending", r, err)
	}
	d = e.start(true)
	r := waitRun(t, st, waiting.ScheduledAt, "the waiting run to complete after the restart", 30*time.Second,
		func(r *jobs.Run) bool { return r.Status.Terminal() })
	if r.ID != waiting.ID || r.Status != jobs.StatusCompleted || r.Attempt != 1 || r.StartedAt.Before(waiting.NotBefore) {
		t.Errorf("after the restart: run %s %s attempt %d started %s; want %s completed, attempt 1, from %s",
			r.ID, r.Status, r.Attempt, r.StartedAt, waiting.ID, waiting.NotBefore)
	}
	// One more tick after the restart, then stop and look at every run.
	last := def.Schedule.Next(time.Now())
	waitRun(t, st, last, "a run after the restart to complete", 30*time.Second, func(r *jobs.Run) bool { return r.Status == jobs.StatusCompleted })
	d.stop()
	byTick := checkJitterRuns(t, st, def, witness)
	for tick := first; !tick.After(last); tick = def.Schedule.Next(tick) {
		if byTick[tick.UnixMicro()] == nil {
			t.Errorf("tick %s never fired", tick.Format(time.RFC3339))
		}
	}
	t.Logf("%d ticks, each once; the run of %s waited across a restart and started at %s (not_before %s)",
		len(byTick), waiting.ScheduledAt.Format(time.RFC3339), r.StartedAt, waiting.NotBefore)
}

// TestClusterJitter: two nodes on one PostgreSQL database fire a job with
// jitter; each node in turn fires alone while the other is stopped. Every
// tick fires once, and every run's not_before is the delay that the test
// computes itself: the nodes agree with each other and with it.
func TestClusterJitter(t *testing.T) {
	proctest.Long(t, "a cluster firing in turns")
	witness := filepath.Join(t.TempDir(), "witness")
	c := newCluster(t, 2, jitterJob(witness))
	cfg, err := config.Parse("jitter.toml", []byte(jitterJob(witness)))
	if err != nil {
		t.Fatal(err)
	}
	def := cfg.Jobs[0]
	firedBy := func(id string) string {
		ev, err := c.st.RunEvents(context.Background(), id)
		if err != nil || len(ev) == 0 {
			t.Fatalf("events of run %s: %v %v", id, ev, err)
		}
		return ev[0].Node
	}
	// waitTicks waits for n ticks from now to complete, and returns the
	// nodes that fired them.
	waitTicks := func(n int) map[string]int {
		nodes := map[string]int{}
		tick := def.Schedule.Next(time.Now())
		for range n {
			r := waitRun(t, c.st, tick, "the run of "+tick.Format(time.RFC3339)+" to complete", 30*time.Second,
				func(r *jobs.Run) bool { return r.Status.Terminal() })
			nodes[firedBy(r.ID)]++
			tick = def.Schedule.Next(tick)
		}
		return nodes
	}
	from := def.Schedule.Next(time.Now())
	both := waitTicks(2)
	c.node("node-1").d.stop()
	alone2 := waitTicks(2)
	c.start("node-1")
	c.node("node-2").d.stop()
	alone1 := waitTicks(2)
	c.start("node-2")
	last := def.Schedule.Next(time.Now())
	waitRun(t, c.st, last, "a run with both nodes back", 30*time.Second, func(r *jobs.Run) bool { return r.Status.Terminal() })
	for _, id := range c.ids() {
		c.node(id).d.stop()
	}
	if alone2["node-1"] > 0 || alone2["node-2"] == 0 || alone1["node-2"] > 0 || alone1["node-1"] == 0 {
		t.Errorf("ticks fired by node with node-1 stopped %v, with node-2 stopped %v", alone2, alone1)
	}
	byTick := checkJitterRuns(t, c.st, def, witness)
	for tick := from; !tick.After(last); tick = def.Schedule.Next(tick) {
		r := byTick[tick.UnixMicro()]
		switch {
		case r == nil:
			t.Errorf("tick %s never fired", tick.Format(time.RFC3339))
		case r.Status != jobs.StatusCompleted:
			t.Errorf("run of %s: %s", tick.Format(time.RFC3339), r.Status)
		}
	}
	t.Logf("%d ticks, each once, with the computed delay; fired by %v with both, %v and %v alone", len(byTick), both, alone2, alone1)
}
