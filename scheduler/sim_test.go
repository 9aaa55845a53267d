package scheduler_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/internal/engineconf"
	"github.com/schedulerd/schedulerd/internal/pgtest"
	"github.com/schedulerd/schedulerd/internal/wallclock"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/scheduler/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// The simulator's flags (make sim): without them, go test runs the
// regression seeds of testdata/sim-seeds.txt on both stores.
var (
	simTime   = flag.Duration("sim.time", 0, "after the regression seeds, run random seeds for this long")
	simSeed   = flag.Int64("sim.seed", 0, "run this seed alone (and shrink its timeline if it fails)")
	simStores = flag.String("sim.stores", "sqlite,postgres", "the stores to run each seed on")
	simShrink = flag.Duration("sim.shrink", 3*time.Minute, "how long to spend shortening a failing timeline")
	simJumps  = flag.String("sim.jumps", "all", "step the clock in 4 timelines of 10: all (forward and back), on (forward only) or off")
	simFrom   = flag.Int64("sim.from", 0, "with -sim.time: the random seeds are this one and the next ones (default: from the clock)")
)

// pg is the PostgreSQL server of the simulator's runs on PostgreSQL.
var pg *pgtest.Server

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(pgtest.Main(m, &pg))
}

// TestSim runs the real engine on real stores on the fake clock of
// testing/synctest through seeded timelines of configs and events, and
// checks the store's history against the reference model
// (scheduler/model) and against invariants that hold whatever the model
// says. A failure prints its seed, the store, what differs and the
// shortened timeline; `make sim SEED=N` replays it.
func TestSim(t *testing.T) {
	if !slices.Contains([]string{"off", "on", "all"}, *simJumps) {
		t.Fatalf("-sim.jumps: %q is not off, on or all", *simJumps)
	}
	stores := strings.Split(*simStores, ",")
	for _, s := range stores {
		if s == "postgres" {
			pg.Require(t)
		} else if s != "sqlite" {
			t.Fatalf("-sim.stores: unknown store %q", s)
		}
	}
	seeds := regressionSeeds(t) // also notes how each steps the clock
	if *simSeed != 0 {
		seeds = []int64{*simSeed}
	}
	failed := 0
	ran := 0
	runSeed := func(seed int64) {
		for _, kind := range stores {
			ran++
			if !simulate(t, seed, kind) {
				failed++
			}
		}
	}
	for _, seed := range seeds {
		runSeed(seed)
	}
	if *simSeed == 0 && *simTime > 0 {
		deadline := time.Now().Add(*simTime)
		base := time.Now().UnixNano()
		if *simFrom != 0 {
			base = *simFrom
		}
		fmt.Printf("sim: random seeds from %d for %s\n", base, *simTime)
		for i := int64(0); time.Now().Before(deadline); i++ {
			runSeed(base + i)
		}
	}
	// On standard output, which make sim shows as it goes.
	fmt.Printf("sim: %d seeds on %s (%d regression seeds), %d runs failed, %d timelines drawn again for ambiguity\n",
		ran/len(stores), strings.Join(stores, " and "), len(seeds), failed, redrawn.Load())
}

// redrawn counts the timelines that the model found ambiguous.
var redrawn atomic.Int64

// regressionSeeds reads testdata/sim-seeds.txt: a seed a line (a comment
// after #), each one that once failed.
func regressionSeeds(t *testing.T) []int64 {
	f, err := os.Open(filepath.Join("testdata", "sim-seeds.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var seeds []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		modes := map[string]string{"nojumps": "off", "jumps=on": "on", "jumps=all": "all"}
		if err != nil || len(fields) > 2 || len(fields) == 2 && modes[fields[1]] == "" {
			t.Fatalf("testdata/sim-seeds.txt: %q: want SEED [nojumps|jumps=on|jumps=all]", line)
		}
		if len(fields) == 2 {
			seedJumps[n] = modes[fields[1]]
		}
		seeds = append(seeds, n)
	}
	return seeds
}

// simulate runs seed on the store kind, and reports whether it passed.
// The model draws the timeline again while it finds one ambiguous.
func simulate(t *testing.T, seed int64, kind string) bool {
	var sc *scenario
	var want *model.Result
	for draw := 0; ; draw++ {
		sc = genScenario(seed, draw)
		evs, _ := sc.modelEvents()
		want = model.Simulate(sc.settings(), evs, sc.outcome, sc.end)
		if len(want.Ambiguous) == 0 {
			break
		}
		redrawn.Add(1)
		if draw == 50 {
			t.Logf("seed %d: every timeline of 50 draws is ambiguous, e.g. %s", seed, want.Ambiguous[0])
			return true
		}
	}
	problems, log := runAndCheck(t, sc, kind, want)
	if len(problems) == 0 {
		return true
	}
	report := fmt.Sprintf("seed %d (draw %d) on %s: %d problems:\n  %s\n", seed, sc.draw, kind, len(problems),
		strings.Join(firstN(problems, 20), "\n  "))
	short := shrink(t, sc, kind)
	report += fmt.Sprintf("timeline (%d of %d events after shrinking):\n%s", countLive(short), len(sc.events), short)
	log = append(append(log, "\n--- the model's trace\n"...), strings.Join(want.Trace, "\n")...)
	if path, err := writeLog(seed, kind, log); err == nil {
		report += "engine log: " + path + "\n"
	}
	report += fmt.Sprintf("replay: make sim SEED=%d\n", seed)
	fmt.Print(report)
	t.Error(report)
	return false
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

func countLive(sc *scenario) int {
	n := 0
	for _, e := range sc.events {
		if !e.dropped {
			n++
		}
	}
	return n
}

func writeLog(seed int64, kind string, log []byte) (string, error) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("schedulerd-sim-%d-%s.log", seed, kind))
	return path, os.WriteFile(path, log, 0o600)
}

// shrink drops the events of a failing timeline one at a time while it
// still fails (on the model's terms: unambiguous, and the engine
// differs), for at most -sim.shrink.
func shrink(t *testing.T, sc *scenario, kind string) *scenario {
	deadline := time.Now().Add(*simShrink)
	cur := sc
	for changed := true; changed && time.Now().Before(deadline); {
		changed = false
		for i := len(cur.events) - 1; i >= 1 && time.Now().Before(deadline); i-- {
			if cur.events[i].dropped || !droppable(cur, i) {
				continue
			}
			next := *cur
			next.events = slices.Clone(cur.events)
			next.events[i].dropped = true
			evs, _ := next.modelEvents()
			want := model.Simulate(next.settings(), evs, next.outcome, next.end)
			if len(want.Ambiguous) > 0 {
				continue
			}
			if problems, _ := runAndCheck(t, &next, kind, want); len(problems) > 0 {
				cur, changed = &next, true
			}
		}
	}
	return cur
}

// droppable reports whether event i can be left out with the timeline
// still well formed: a start, stop or kill only with the matching ones,
// so that only a running daemon gets commands; the final stop stays.
func droppable(sc *scenario, i int) bool {
	if i == len(sc.events)-1 {
		return false
	}
	switch sc.events[i].kind {
	case model.Start, model.Stop, model.Kill:
		return false
	case model.Jump:
		return false // the events after it are in the clock it stepped
	}
	return true
}

// simNode is one process of the daemon in a run of the simulator.
type simNode struct {
	st    store.Store
	s     *scheduler.Scheduler
	stop  context.CancelFunc // ends a Stop at once (SIGKILL)
	ended chan struct{}      // closed when the process has ended
	dead  atomic.Bool        // killed: nothing it does reaches the store
}

// observed is what a run of the simulator saw.
type observed struct {
	runs     []*jobs.Run
	attempts map[string][]*jobs.Attempt
	cursors  map[string]*store.Cursor
	labels   map[string]string // run id -> label of its trigger
	refused  map[int]string    // event index -> error
	execs    []execution
}

// execution is one call of a job's handler: which attempt, from when to
// when (until the process ended, for one a SIGKILL ended).
type execution struct {
	run        string
	attempt    int
	start, end time.Time
}

// runAndCheck runs the scenario on a fresh store of kind and compares the
// result with want; it returns the problems and the engine's log.
func runAndCheck(t *testing.T, sc *scenario, kind string, want *model.Result) ([]string, []byte) {
	var (
		obs      *observed
		runErr   error
		logBuf   syncBuffer
		problems []string
	)
	t.Run(fmt.Sprintf("seed=%d/%s", sc.seed, kind), func(t *testing.T) {
		var open func() (store.Store, error)
		switch kind {
		case "sqlite":
			path := filepath.Join(t.TempDir(), "schedulerd.db")
			open = func() (store.Store, error) {
				return sqlite.Open(context.Background(), sqlite.Options{Path: path, Lock: true})
			}
		case "postgres":
			dsn := pg.NewDatabase(t)
			open = func() (store.Store, error) {
				return postgres.Open(context.Background(), postgres.Options{DSN: dsn, NoListen: true})
			}
		}
		synctest.Test(t, func(t *testing.T) {
			obs, runErr = drive(sc, open, &logBuf)
		})
	})
	if runErr != nil {
		return []string{"the run failed: " + runErr.Error()}, logBuf.Bytes()
	}
	problems = append(problems, compare(sc, want, obs)...)
	problems = append(problems, invariants(sc, obs)...)
	return problems, logBuf.Bytes()
}

// syncBuffer is a bytes.Buffer for several goroutines, bounded.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() < 64<<20 {
		s.b.Write(p)
	}
	return len(p), nil
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// simClock is the machine's wall clock in the simulator: the bubble's time
// moved by the steps of the timeline. Timers for an instant follow it
// (wallclock), as the real clock's do; elapsed time is the bubble's.
type simClock struct {
	scheduler.RealClock
	off   atomic.Int64
	steps wallclock.Steps
}

func (c *simClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *simClock) TimerAt(deadline time.Time) scheduler.Timer {
	return wallclock.NewTimer(c.Now, &c.steps, deadline)
}

// step steps the clock by d.
func (c *simClock) step(d time.Duration) {
	c.off.Add(int64(d))
	c.steps.Notify()
}

// sleepUntil sleeps until the clock reads t.
func (c *simClock) sleepUntil(t time.Time) { time.Sleep(t.Sub(c.Now())) }

// drive runs the timeline inside the synctest bubble: time moves only
// when every goroutine of the engine waits, so each event is applied to
// an engine that has done all it had to do before it.
func drive(sc *scenario, open func() (store.Store, error), logw *syncBuffer) (*observed, error) {
	ctx := context.Background()
	clock := &simClock{}
	clock.sleepUntil(sc.t0)
	obs := &observed{labels: map[string]string{}, refused: map[int]string{}, attempts: map[string][]*jobs.Attempt{}}
	var (
		mu    sync.Mutex
		node  *simNode
		nodes []*simNode
	)
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	handler := func() jobs.Handler {
		return func(ctx context.Context) error {
			info, _ := jobs.InfoFrom(ctx)
			key := model.RunKey{Job: info.Job, Trigger: info.Trigger, At: info.ScheduledAt}
			if info.Trigger == jobs.TriggerManual {
				key = model.RunKey{Job: info.Job, Trigger: info.Trigger, Label: info.Payload}
			}
			d, ok := sc.outcome(key, info.Attempt)
			start := time.Now()
			tm := time.NewTimer(d)
			defer tm.Stop()
			var err error
			select {
			case <-tm.C:
				if !ok {
					err = errors.New("the simulated attempt failed")
				}
			case <-ctx.Done():
				err = ctx.Err()
			}
			mu.Lock()
			obs.execs = append(obs.execs, execution{run: info.RunID, attempt: info.Attempt, start: start, end: time.Now()})
			mu.Unlock()
			return err
		}
	}
	start := func(cfg int) error {
		c, err := config.Parse("sim.toml", []byte(sc.configs[cfg]))
		if err != nil {
			return err
		}
		st, err := open()
		if err != nil {
			return fmt.Errorf("open the store: %w", err)
		}
		n := &simNode{st: st, ended: make(chan struct{})}
		for _, d := range c.Jobs {
			d.Command, d.Handler = nil, handler()
		}
		ec := engineconf.From(c.Daemon)
		// The engine's clock is the bubble's, passed down to the store;
		// retry jitter draws a constant the model knows.
		ec.StoreClock, ec.Logger, ec.Rand, ec.Clock = false, logger, func() float64 { return 0 }, clock
		s, err := scheduler.New(st, ec, c.Jobs)
		if err != nil {
			st.Close()
			return err
		}
		n.s = s
		if err := s.Start(ctx); err != nil {
			st.Close()
			return fmt.Errorf("start: %w", err)
		}
		node = n
		nodes = append(nodes, n)
		return nil
	}
	reloadDefs := func(cfg int) ([]*jobs.Definition, error) {
		c, err := config.Parse("sim.toml", []byte(sc.configs[cfg]))
		if err != nil {
			return nil, err
		}
		for _, d := range c.Jobs {
			d.Command, d.Handler = nil, handler()
		}
		return c.Jobs, nil
	}
	findRun := func(label string) (string, bool) {
		if job, l, ok := strings.Cut(label, "!"); ok {
			for id, lab := range obs.labels {
				if lab == l && strings.HasPrefix(label, job+"!") {
					return id, true
				}
			}
			return "", false
		}
		job, at, _ := strings.Cut(label, "@")
		tick, err := time.Parse("2006-01-02T15:04:05.000000Z", at)
		if err != nil {
			return "", false
		}
		rs, err := node.st.RunsList(ctx, store.RunFilter{Job: job, Limit: 100000})
		if err != nil {
			return "", false
		}
		for _, r := range rs {
			if r.Trigger == jobs.TriggerSchedule && r.ScheduledAt.Equal(tick) {
				return r.ID, true
			}
		}
		return "", false
	}
	for i, e := range sc.events {
		if e.dropped {
			continue
		}
		clock.sleepUntil(e.at)
		switch e.kind {
		case model.Jump:
			clock.step(e.delta)
		case model.Start:
			if node != nil && !node.dead.Load() {
				<-node.ended // a stop takes at most its grace
			}
			if err := start(e.cfg); err != nil {
				return nil, fmt.Errorf("event #%d: %w", i, err)
			}
		case model.Reload:
			defs, err := reloadDefs(e.cfg)
			if err == nil {
				err = node.s.Reload(ctx, defs)
			}
			if err != nil {
				obs.refused[i] = err.Error()
			}
		case model.Stop:
			n := node
			stopCtx, cancel := context.WithCancel(ctx)
			n.stop = cancel
			go func() {
				n.s.Stop(stopCtx)
				if !n.dead.Load() {
					n.st.Close()
				}
				close(n.ended)
			}()
		case model.Kill:
			n := node
			select {
			case <-n.ended:
				continue // it had stopped already
			default:
			}
			// Nothing the process does from now on reaches the store: it
			// is closed under it, then its attempts are stopped at once.
			n.dead.Store(true)
			n.st.Close()
			if n.stop != nil {
				n.stop()
			} else {
				stopCtx, cancel := context.WithCancel(ctx)
				cancel()
				go func() { n.s.Stop(stopCtx); close(n.ended) }()
			}
		case model.Trigger:
			r, err := node.s.Trigger(ctx, e.job, scheduler.TriggerParams{DedupID: e.dedup, NotBefore: e.nb, NotAfter: e.na, Payload: e.label})
			if err != nil {
				obs.refused[i] = err.Error()
			} else {
				obs.labels[r.ID] = e.label
			}
		case model.Cancel:
			id, ok := findRun(e.label)
			if !ok {
				obs.refused[i] = "no such run"
				continue
			}
			if _, err := node.s.Cancel(ctx, id, ""); err != nil {
				obs.refused[i] = err.Error()
			}
		case model.Pause, model.Resume:
			var err error
			if e.kind == model.Pause {
				_, err = node.s.Pause(ctx, e.job, "")
			} else {
				_, err = node.s.Resume(ctx, e.job, "")
			}
			if err != nil {
				obs.refused[i] = err.Error()
			}
		}
	}
	clock.sleepUntil(sc.end)
	synctest.Wait()
	for _, n := range nodes {
		<-n.ended
	}
	st, err := open()
	if err != nil {
		return nil, fmt.Errorf("open the store to read it: %w", err)
	}
	defer st.Close()
	if obs.runs, err = st.RunsList(ctx, store.RunFilter{Limit: 1_000_000}); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, r := range obs.runs {
		names[r.Job] = true
		if obs.attempts[r.ID], err = st.RunAttempts(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	for _, cfg := range sc.configs {
		c, _ := config.Parse("sim.toml", []byte(cfg))
		for _, d := range c.Jobs {
			names[d.Name] = true
		}
	}
	if obs.cursors, err = st.ScheduleCursors(ctx, sortedStrings(mapsKeys(names))); err != nil {
		return nil, err
	}
	return obs, nil
}

// keyOf names a stored run as the model does.
func keyOf(r *jobs.Run, labels map[string]string) string {
	if r.Trigger == jobs.TriggerManual {
		return model.RunKey{Job: r.Job, Trigger: r.Trigger, Label: labels[r.ID]}.String()
	}
	return model.RunKey{Job: r.Job, Trigger: r.Trigger, At: r.ScheduledAt}.String()
}

// compare lists where the store's history differs from the model's.
func compare(sc *scenario, want *model.Result, obs *observed) []string {
	var out []string
	_, index := sc.modelEvents()
	got := map[string]*jobs.Run{}
	for _, r := range obs.runs {
		k := keyOf(r, obs.labels)
		if got[k] != nil {
			out = append(out, "two runs of "+k)
		}
		got[k] = r
	}
	for _, k := range sortedStrings(mapsKeys(want.Runs)) {
		w, g := want.Runs[k], got[k]
		if g == nil {
			out = append(out, fmt.Sprintf("run %s missing: the model has it %s (%s) after %d attempts", k, w.Status, w.Reason, w.Attempts))
			continue
		}
		var starts []time.Time
		for _, a := range obs.attempts[g.ID] {
			starts = append(starts, a.StartedAt)
		}
		switch {
		case g.Status != w.Status || g.Status.Terminal() && g.Reason != w.Reason:
			out = append(out, fmt.Sprintf("run %s is %s (%s) after %d attempts; the model says %s (%s) after %d", k,
				g.Status, g.Reason, g.Attempt, w.Status, w.Reason, w.Attempts))
		case g.Attempt != w.Attempts:
			out = append(out, fmt.Sprintf("run %s has %d attempts; the model says %d", k, g.Attempt, w.Attempts))
		case !slices.EqualFunc(starts, w.Starts, time.Time.Equal):
			out = append(out, fmt.Sprintf("run %s: attempts started at %s; the model says %s", k, times(starts), times(w.Starts)))
		}
	}
	for _, k := range sortedStrings(mapsKeys(got)) {
		if want.Runs[k] == nil {
			g := got[k]
			out = append(out, fmt.Sprintf("run %s (%s, %s) should not exist", k, g.Status, g.Reason))
		}
	}
	for _, name := range sortedStrings(mapsKeys(obs.cursors)) {
		c := obs.cursors[name]
		if w := want.Skipped[name]; int64(w) != c.Skipped {
			out = append(out, fmt.Sprintf("job %s skipped %d ticks; the model says %d", name, c.Skipped, w))
		}
	}
	for i, ev := range index {
		_, gotRefused := obs.refused[ev]
		why, wantRefused := want.Refused[i]
		if gotRefused != wantRefused {
			e := sc.events[ev]
			out = append(out, fmt.Sprintf("event #%d (%s %s%s): refused %v (%s), the model says %v (%s)", ev, e.kind, e.job, e.label,
				gotRefused, obs.refused[ev], wantRefused, why))
		}
	}
	return out
}

func times(ts []time.Time) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.UTC().Format("15:04:05.000000000")
	}
	return "[" + strings.Join(s, " ") + "]"
}

// invariants lists the violations of what holds whatever the model says.
func invariants(sc *scenario, obs *observed) []string {
	var out []string
	// One run per job and tick.
	seen := map[string]bool{}
	for _, r := range obs.runs {
		if r.Trigger != jobs.TriggerSchedule && r.Trigger != jobs.TriggerOnce {
			continue
		}
		k := keyOf(r, nil)
		if seen[k] {
			out = append(out, "invariant: two runs of the tick "+k)
		}
		seen[k] = true
	}
	// No two attempts of a run overlap, in the store or in execution.
	for id, as := range obs.attempts {
		for i := 1; i < len(as); i++ {
			if as[i].StartedAt.Before(as[i-1].FinishedAt) {
				out = append(out, fmt.Sprintf("invariant: attempts %d and %d of run %s overlap", i, i+1, id))
			}
		}
	}
	byRun := map[string][]execution{}
	for _, e := range obs.execs {
		byRun[e.run] = append(byRun[e.run], e)
	}
	for id, es := range byRun {
		slices.SortFunc(es, func(a, b execution) int { return a.start.Compare(b.start) })
		for i := 1; i < len(es); i++ {
			if es[i].start.Before(es[i-1].end) {
				out = append(out, fmt.Sprintf("invariant: executions of attempts %d and %d of run %s overlap", es[i-1].attempt, es[i].attempt, id))
			}
		}
	}
	// Overlap skip: a tick's run is never made while another run of the
	// job is active; queue: a job's tick runs start in tick order. Both
	// for jobs whose every config has that policy, and read from the
	// runs' times: not after a step back of the clock, which leaves those
	// out of order (the comparison with the model checks such timelines).
	policies := jobPolicies(sc)
	if sc.steppedBack() {
		policies = nil
	}
	byJob := map[string][]*jobs.Run{}
	for _, r := range obs.runs {
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	for job, rs := range byJob {
		switch policies[job] {
		case jobs.OverlapSkip:
			for _, r := range rs {
				if r.Trigger != jobs.TriggerSchedule {
					continue
				}
				for _, o := range rs {
					// o was active when r was made: made before it (or in
					// the same fire, for an earlier tick), not yet ended.
					earlier := o.CreatedAt.Before(r.CreatedAt) ||
						o.CreatedAt.Equal(r.CreatedAt) && o.ScheduledAt.Before(r.ScheduledAt)
					if o != r && earlier && (o.FinishedAt.IsZero() || o.FinishedAt.After(r.CreatedAt)) {
						out = append(out, fmt.Sprintf("invariant: skip job %s made the run of tick %s while run %s was active",
							job, r.ScheduledAt.UTC().Format(time.RFC3339Nano), o.ID))
						break
					}
				}
			}
		case jobs.OverlapQueue:
			var ticks []*jobs.Run
			for _, r := range rs {
				if r.Trigger == jobs.TriggerSchedule && len(obs.attempts[r.ID]) > 0 {
					ticks = append(ticks, r)
				}
			}
			slices.SortFunc(ticks, func(a, b *jobs.Run) int { return a.ScheduledAt.Compare(b.ScheduledAt) })
			for i := 1; i < len(ticks); i++ {
				if obs.attempts[ticks[i].ID][0].StartedAt.Before(obs.attempts[ticks[i-1].ID][0].StartedAt) {
					out = append(out, fmt.Sprintf("invariant: queue job %s started tick %s before tick %s", job,
						ticks[i].ScheduledAt.UTC().Format(time.RFC3339Nano), ticks[i-1].ScheduledAt.UTC().Format(time.RFC3339Nano)))
				}
			}
		}
	}
	// At the end, after the stop: no run is running, and every
	// acknowledged trigger of a job the last config declares has ended.
	last := lastConfigJobs(sc)
	for _, r := range obs.runs {
		if r.Status == jobs.StatusRunning {
			out = append(out, fmt.Sprintf("invariant: run %s of %s is running after the daemon stopped", r.ID, r.Job))
		}
		if r.Trigger == jobs.TriggerManual && last[r.Job] && !r.Status.Terminal() {
			out = append(out, fmt.Sprintf("invariant: triggered run %s of %s is %s at the end", r.ID, r.Job, r.Status))
		}
	}
	return out
}

// jobPolicies returns the overlap policy of each job that has one policy
// in every config of the scenario.
func jobPolicies(sc *scenario) map[string]jobs.Overlap {
	out := map[string]jobs.Overlap{}
	mixed := map[string]bool{}
	for _, cfg := range sc.configs {
		c, _ := config.Parse("sim.toml", []byte(cfg))
		for _, d := range c.Jobs {
			if p, ok := out[d.Name]; ok && p != d.Overlap {
				mixed[d.Name] = true
			}
			out[d.Name] = d.Overlap
		}
	}
	for n := range mixed {
		delete(out, n)
	}
	return out
}

// lastConfigJobs are the jobs of the config the daemon ran last.
func lastConfigJobs(sc *scenario) map[string]bool {
	last := 0
	for _, e := range sc.events {
		if !e.dropped && (e.kind == model.Start || e.kind == model.Reload) {
			last = e.cfg
		}
	}
	c, _ := config.Parse("sim.toml", []byte(sc.configs[last]))
	out := map[string]bool{}
	for _, d := range c.Jobs {
		out[d.Name] = true
	}
	return out
}
