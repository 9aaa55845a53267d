package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

const secBurst = "9 burst"

// Targets of the burst (issue 42): every node of the cluster.
const (
	burstLagTarget = 2000 // ms, p99 firing lag
	burstRSSTarget = 150  // MiB, the largest VmRSS of any node
)

// burstNodeEnv holds, in a child process of the benchmark, the JSON config
// of the one node it runs (burstNodeConfig); see runBurstNode.
const burstNodeEnv = "SCHEDULERD_BENCH_BURST_NODE"

// burstNodeConfig is what a child node of the burst needs.
type burstNodeConfig struct {
	Kind        string `json:"kind"`
	DSN         string `json:"dsn,omitempty"`
	Path        string `json:"path,omitempty"`
	NodeID      string `json:"node_id"`
	Jobs        int    `json:"jobs"`
	Spec        string `json:"spec"`
	Concurrency int    `json:"concurrency"`
	// CPUProfile, when set, is where the node writes a CPU profile of the
	// time from its Start returning to its Stop.
	CPUProfile string `json:"cpu_profile,omitempty"`
	// HeapProfile, when set, is where the node writes a heap profile
	// (in use), and beside it its goroutines, each time its VmRSS is the
	// largest yet, at most once a second: the last ones are of about the
	// peak.
	HeapProfile string `json:"heap_profile,omitempty"`
}

// burstReady is the first line a child prints: its node has started.
type burstReady struct {
	Ready   bool  `json:"ready"`
	StartUS int64 `json:"start_us"` // how long Start took
	RSS     int64 `json:"rss"`      // VmRSS once started, bytes
}

// burstNodeResult is the last line a child prints, after its node stopped.
type burstNodeResult struct {
	// One entry per handler start: the job's index, the attempt, the
	// lag (handler start minus the run's ScheduledAt) in microseconds,
	// the tick (Unix microseconds) and the run id.
	Job     []int32  `json:"job"`
	Attempt []int32  `json:"attempt"`
	LagUS   []int64  `json:"lag_us"`
	TickUS  []int64  `json:"tick_us"`
	RunID   []string `json:"run_id"`
	MaxRSS  int64    `json:"max_rss"` // largest VmRSS sampled every 100 ms, Start to Stop
	HWM     int64    `json:"hwm"`     // VmHWM at the end: the peak since exec
	Samples int      `json:"samples"`
	// At the largest VmRSS sample: the Go runtime's goroutine stacks, its
	// heap objects (bytes) and the goroutines (runtime/metrics).
	Stacks     uint64 `json:"stacks"`
	Heap       uint64 `json:"heap"`
	Goroutines uint64 `json:"goroutines"`
	Error      string `json:"error,omitempty"`
}

// burstRecord is one handler start in a child.
type burstRecord struct {
	job, attempt int32
	lag, tick    int64
	id           uuid.UUID
}

// runBurst is figure 9: many schedules due in the same second, on one node
// and on a cluster of three, each node its own process.
func runBurst(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	n := o.sizes.burstJobs
	rep.Section(secBurst)
	rep.Note(secBurst, "Method: %s cron jobs with a no-op Go handler, each with one daily schedule due at the same "+
		"second: a 6-field spec `S M H * * *` (UTC) at a wall time computed so that it comes %s after the benchmark "+
		"starts the nodes (later if `-burst-lead` says so), the same shape as `0 3 * * *`: once a day, every job at "+
		"one second. Each node is its own process (this program started again in a hidden mode), so that its memory "+
		"is its own: it opens the store, starts one node (concurrency %s, one slot per schedule as in figure 2; the "+
		"engine's defaults otherwise) and the daemon's memory settings (GOGC 25 while the jobs are put in force, "+
		"then the heap's headroom as `schedulerd run` sets it), and records each handler start. The lag of a tick "+
		"is the handler's start (wall clock) minus the run's ScheduledAt, over every tick of every node. RSS: "+
		"each node samples its own VmRSS from /proc every 100 ms from its Start to its Stop; the figure is the "+
		"largest sample of any node (VmHWM, the peak since exec, is in the raw lines). The benchmark waits until "+
		"the store shows every run of the burst completed (it counts them once a second, at most %s after the tick), "+
		"then stops the nodes.",
		thousands(int64(n)), burstLead(o, n), thousands(int64(n)), burstDrain)
	rep.Note(secBurst, "SQLite is one node by design (the store is a local file held by one process with a lock), "+
		"so it has no 3-node figure. The three PostgreSQL nodes start at once on an empty database and share the "+
		"burst: each claims what it can.")
	rep.Note(secBurst, "Checks: every tick ran exactly once in the cluster (%s handler starts, each job once, at "+
		"attempt 1 and at the burst's tick, no run id twice) and the store shows %s runs, all completed at attempt 1. "+
		"The nodes are stopped once the store shows every run completed, or %s after the tick: runs not completed by "+
		"then are late, not lost (pending, or running when a node's stop gave up waiting for its results), and are "+
		"counted in a figure of their own, whose target is none.",
		thousands(int64(n)), thousands(int64(n)), burstDrain)
	rep.Note(secBurst, "The nodes' CPU profiles (`-burst-profile DIR`) show where a node's time goes.")
	var errs []error
	for _, kind := range o.stores {
		for _, nodes := range o.burstNodes {
			if nodes > 1 && kind != kindPostgres {
				continue
			}
			if err := burstCase(ctx, e, kind, nodes); err != nil {
				errs = append(errs, fmt.Errorf("%s, %d node(s): %w", storeName(kind), nodes, err))
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return errors.Join(errs...)
}

// burstDrain bounds the wait, after the tick, for every run of the burst
// to complete.
const burstDrain = 2 * time.Minute

// burstLead is how long after the nodes are started the burst is due:
// time for each node to start (Start writes a cursor per job), then twice
// the time the engine may take to fire the round ahead (roundAhead), and
// a margin; -burst-lead overrides it.
func burstLead(o options, n int) time.Duration {
	if o.burstLead > 0 {
		return o.burstLead
	}
	return 3*time.Second + time.Duration(n)*200*time.Microsecond + 2*roundAhead(n)
}

// roundAhead is how far ahead of its tick the engine starts to fire a
// round of n jobs on a fast store: 50 ms earlier for each further 500
// (scheduler/ticks.go, roundLead), at most 10 s.
func roundAhead(n int) time.Duration {
	return min(10*time.Second, time.Duration((n+499)/500)*50*time.Millisecond)
}

// burstChild is a child node process.
type burstChild struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte // the child's stdout, line by line
	stderr *strings.Builder
	ready  burstReady
	readAt time.Time
	res    burstNodeResult
}

// startBurstChild starts one node process.
func startBurstChild(cfg burstNodeConfig) (*burstChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	c := &burstChild{id: cfg.NodeID, lines: make(chan []byte, 4), stderr: &strings.Builder{}}
	c.cmd = exec.Command(exe)
	c.cmd.Env = append(os.Environ(), burstNodeEnv+"="+string(js))
	c.cmd.Stderr = &lockedWriter{w: c.stderr}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(c.lines)
		r := bufio.NewReaderSize(out, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

// lockedWriter serializes writes (the child's stderr, read at the end).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// next reads the child's next line into v, waiting at most until deadline.
func (c *burstChild) next(ctx context.Context, deadline time.Time, v any) error {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%s: no answer in time", c.id)
	case line, ok := <-c.lines:
		if !ok {
			_ = c.cmd.Wait()
			return fmt.Errorf("%s exited: %s", c.id, tail([]byte(c.stderr.String())))
		}
		if err := json.Unmarshal(line, v); err != nil {
			return fmt.Errorf("%s: %w", c.id, err)
		}
		return nil
	}
}

// kill ends a child that has not finished (an error path).
func (c *burstChild) kill() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// burstCase measures one store with the given number of nodes.
func burstCase(ctx context.Context, e *env, kind string, nodes int) error {
	rep, o := e.rep, e.opts
	n := o.sizes.burstJobs
	b, err := e.newBackend(ctx, kind, "burst")
	if err != nil {
		return err
	}
	defer b.close(context.WithoutCancel(ctx))
	label := fmt.Sprintf("%s, %d node", b.name, nodes)
	if nodes > 1 {
		label += "s"
	}

	// The tick: whole seconds, burstLead from now.
	launched := time.Now()
	tick := launched.Add(burstLead(o, n)).UTC().Truncate(time.Second).Add(time.Second)
	spec := fmt.Sprintf("%d %d %d * * *", tick.Second(), tick.Minute(), tick.Hour())
	var children []*burstChild
	defer func() {
		for _, c := range children {
			if c.cmd.ProcessState == nil {
				c.kill()
			}
		}
	}()
	for i := range nodes {
		cfg := burstNodeConfig{Kind: kind, DSN: b.dsn, Path: b.path, NodeID: fmt.Sprintf("node-%d", i+1),
			Jobs: n, Spec: spec, Concurrency: n}
		if o.burstProfile != "" {
			cfg.CPUProfile = filepath.Join(o.burstProfile, fmt.Sprintf("burst-%s-%dnodes-%s.pprof", kind, nodes, cfg.NodeID))
			cfg.HeapProfile = filepath.Join(o.burstProfile, fmt.Sprintf("burst-%s-%dnodes-%s.heap", kind, nodes, cfg.NodeID))
		}
		c, err := startBurstChild(cfg)
		if err != nil {
			return err
		}
		children = append(children, c)
	}
	for _, c := range children {
		if err := c.next(ctx, tick.Add(time.Minute), &c.ready); err != nil {
			return err
		}
		c.readAt = time.Now()
		rep.Rawf(secBurst, "%s: %s started in %s (Start %s), %s before the tick; VmRSS then %s", label, c.id,
			c.readAt.Sub(launched).Round(time.Millisecond), (time.Duration(c.ready.StartUS) * time.Microsecond).Round(time.Millisecond),
			tick.Sub(c.readAt).Round(time.Millisecond), mib(c.ready.RSS))
	}
	late := ""
	if last := children[len(children)-1].readAt; tick.Sub(last) < roundAhead(n)+time.Second {
		// The engine fires a large round ahead: a node that starts later
		// than that fires part of it at its time.
		late = fmt.Sprintf("a node was ready only %s before the tick (raise -burst-lead)", tick.Sub(last).Round(time.Millisecond))
		rep.Rawf(secBurst, "%s: %s", label, late)
	}

	// Where the server's time goes (figure 1's sampler, with the waits).
	var sampler *activitySampler
	if kind == kindPostgres {
		sampler = startWaitSampler(ctx, b, 50*time.Millisecond)
	}
	// Wait for the store to show every run of the burst completed.
	done := int64(-1)
	for deadline := tick.Add(burstDrain); time.Now().Before(deadline); {
		if time.Now().After(tick) {
			done, err = b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status = 'completed' AND scheduled_at = ?`, b.db.t(tick))
			if err != nil {
				return err
			}
			if done >= int64(n) {
				break
			}
		}
		// Once a second: the count reads the runs, and the server is the
		// cluster's.
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
	settled := time.Now()
	if sampler != nil {
		for _, l := range sampler.report(8) {
			rep.Rawf(secBurst, "%s: server: %s", label, l)
		}
	}
	for _, c := range children {
		_ = c.stdin.Close() // the child stops its node and reports
	}
	for _, c := range children {
		if err := c.next(ctx, time.Now().Add(2*time.Minute), &c.res); err != nil {
			return err
		}
		if err := c.cmd.Wait(); err != nil {
			return fmt.Errorf("%s: %w: %s", c.id, err, tail([]byte(c.stderr.String())))
		}
		if c.res.Error != "" {
			return fmt.Errorf("%s: %s", c.id, c.res.Error)
		}
	}

	// The lags of every tick of every node, and the checks.
	var lags durations
	var maxRSS, maxHWM int64
	perJob := make([]int, n)
	ids := make(map[string]int, n)
	notFirst, wrongTick, badJob := 0, 0, 0
	for _, c := range children {
		r := c.res
		var own durations
		for i := range r.Job {
			d := time.Duration(r.LagUS[i]) * time.Microsecond
			lags, own = append(lags, d), append(own, d)
			if j := int(r.Job[i]); j >= 0 && j < n {
				perJob[j]++
			} else {
				badJob++
			}
			ids[r.RunID[i]]++
			if r.Attempt[i] != 1 {
				notFirst++
			}
			if r.TickUS[i] != tick.UnixMicro() {
				wrongTick++
			}
		}
		maxRSS, maxHWM = max(maxRSS, r.MaxRSS), max(maxHWM, r.HWM)
		rep.Rawf(secBurst, "%s: %s ran %s ticks, lag %s; VmRSS at most %s (%d samples; then goroutine stacks %s, "+
			"heap objects %s, %s goroutines), VmHWM %s", label, c.id, thousands(int64(len(r.Job))), own.summary(),
			mib(r.MaxRSS), r.Samples, mib(int64(r.Stacks)), mib(int64(r.Heap)), thousands(int64(r.Goroutines)), mib(r.HWM))
	}
	rep.Rawf(secBurst, "%s: burst at %s of %s jobs; the store showed %s completed %s after the tick; lag %s",
		label, tick.Format("15:04:05"), thousands(int64(n)), thousands(done), settled.Sub(tick).Round(time.Millisecond), lags.summary())

	missing, twice, dupIDs := 0, 0, 0
	for _, c := range perJob {
		switch {
		case c == 0:
			missing++
		case c > 1:
			twice += c - 1
		}
	}
	for _, c := range ids {
		if c > 1 {
			dupIDs += c - 1
		}
	}
	counts, err := b.db.statusCounts(ctx, "")
	if err != nil {
		return err
	}
	var total int64
	for _, c := range counts {
		total += c
	}
	good, err := b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status = 'completed' AND attempt = 1
		AND trigger_kind = 'schedule' AND scheduled_at = ?`, b.db.t(tick))
	if err != nil {
		return err
	}
	rep.Rawf(secBurst, "%s: checks: %d jobs without a handler start, %d extra starts of a job, %d run ids twice, "+
		"%d at attempt > 1, %d at another tick; store: %d runs, %d completed at attempt 1 at the tick (%v)",
		label, missing, twice, dupIDs, notFirst, wrongTick, total, good, counts)
	fail := func(format string, args ...any) {
		rep.Failf(secBurst, "%s: "+format, append([]any{label}, args...)...)
	}
	// A burst that the nodes did not finish within burstDrain leaves runs
	// pending (or running, when a node's stop gave up waiting for its
	// results): late, not lost, and another node or a restart runs them.
	// That is a figure with its target, not a failed check; a tick run
	// twice, or at another attempt or tick, is one.
	drained := done >= int64(n)
	if !drained {
		rep.Add(Figure{Section: secBurst, Name: fmt.Sprintf("%s daily schedules due at once, %d node(s): runs not "+
			"completed %s after the tick", thousands(int64(n)), nodes, burstDrain), Store: b.name,
			Value: float64(int64(n) - max(done, 0)), Unit: "runs", Target: atMost(0), Note: fmt.Sprintf("statuses %v", counts)})
	}
	if badJob > 0 || (drained && missing > 0) {
		fail("%d of %d ticks without a handler start", missing+badJob, n)
	}
	if twice > 0 || dupIDs > 0 {
		fail("%d ticks started more than once, %d run ids started more than once", twice, dupIDs)
	}
	if notFirst > 0 || wrongTick > 0 {
		fail("%d handler starts at attempt > 1, %d at another tick", notFirst, wrongTick)
	}
	if total != int64(n) || (drained && good != int64(n)) {
		fail("the store shows %d runs, %d completed at attempt 1 at the tick; want %d and %d", total, good, n, n)
	}

	note := late
	if missing > 0 {
		note = strings.Trim(note+"; "+fmt.Sprintf("%d of %d ticks had not run when the nodes stopped", missing, n), "; ")
	}
	name := fmt.Sprintf("%s daily schedules due at once, %d node", thousands(int64(n)), nodes)
	if nodes > 1 {
		name += "s"
	}
	var t99 *Target
	var tRSS *Target
	if n == 100_000 { // the targets are for 100,000 schedules
		t99, tRSS = atMost(burstLagTarget), atMost(burstRSSTarget)
	}
	rep.Add(Figure{Section: secBurst, Name: name + ": lag p50", Store: b.name, Value: msf(lags.quantile(0.5)), Unit: "ms", Note: note})
	rep.Add(Figure{Section: secBurst, Name: name + ": lag p99", Store: b.name, Value: msf(lags.quantile(0.99)), Unit: "ms", Target: t99, Note: note})
	rep.Add(Figure{Section: secBurst, Name: name + ": lag max", Store: b.name, Value: msf(lags.max()), Unit: "ms"})
	rep.Add(Figure{Section: secBurst, Name: name + ": RSS, largest node", Store: b.name, Value: float64(maxRSS) / (1 << 20),
		Unit: "MiB", Target: tRSS, Note: "VmHWM " + mib(maxHWM)})
	if o.burstProfile != "" {
		for _, c := range children {
			p := filepath.Join(o.burstProfile, fmt.Sprintf("burst-%s-%dnodes-%s.pprof", kind, nodes, c.id))
			for _, l := range profileTop(p, 25) {
				rep.Rawf(secBurst, "%s: %s profile: %s", label, c.id, l)
			}
		}
	}
	return nil
}

// runBurstNode is the child's side: it runs one node of the burst as its
// config (burstNodeEnv) says, prints burstReady once the node has started,
// runs until its standard input closes, stops the node and prints its
// burstNodeResult. It returns the exit code.
func runBurstNode(js string) int {
	var cfg burstNodeConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench: burst node:", err)
		return 2
	}
	res, err := burstNode(cfg)
	if err != nil {
		res.Error = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "bench: burst node:", err)
		return 1
	}
	return 0
}

func burstNode(cfg burstNodeConfig) (burstNodeResult, error) {
	var res burstNodeResult
	ctx := context.Background()
	// As `schedulerd run` does (cmd/schedulerd/memory.go): a lean collector
	// while the jobs are put in force.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(25)
	}
	var st store.Store
	var err error
	if cfg.Kind == kindPostgres {
		st, err = postgres.Open(ctx, postgres.Options{DSN: cfg.DSN})
	} else {
		st, err = sqlite.Open(ctx, sqlite.Options{Path: cfg.Path, Lock: true})
	}
	if err != nil {
		return res, err
	}
	defer st.Close()

	var mu sync.Mutex
	recs := make([]burstRecord, 0, cfg.Jobs)
	defs := make([]*jobs.Definition, cfg.Jobs)
	for i := range defs {
		s, err := schedule.Parse(cfg.Spec, time.UTC)
		if err != nil {
			return res, err
		}
		defs[i] = &jobs.Definition{Name: fmt.Sprintf("burst-%06d", i), Schedule: s, Handler: func(ctx context.Context) error {
			now := time.Now()
			info, _ := jobs.InfoFrom(ctx)
			id, _ := uuid.Parse(info.RunID)
			r := burstRecord{job: int32(i), attempt: int32(info.Attempt), lag: now.Sub(info.ScheduledAt).Microseconds(),
				tick: info.ScheduledAt.UnixMicro(), id: id}
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
			return nil
		}}
		defs[i].WithDefaults()
	}
	sched, err := scheduler.New(st, scheduler.Config{
		NodeID: cfg.NodeID, Concurrency: cfg.Concurrency,
		StoreClock: cfg.Kind == kindPostgres, ExclusiveStore: cfg.Kind == kindSQLite,
		Logger: slog.New(slog.DiscardHandler),
	}, defs)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := sched.Start(ctx); err != nil {
		return res, err
	}
	startTook := time.Since(t0)
	// As `schedulerd run` does once the jobs are in force.
	settleHeap()

	// VmRSS every 100 ms until the node stops.
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	ms := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/sched/goroutines:goroutines"}}
	var heapAt time.Time
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _, err := memory(os.Getpid()); err == nil {
				if rss > res.MaxRSS {
					metrics.Read(ms)
					res.MaxRSS, res.Stacks, res.Heap, res.Goroutines = rss, ms[0].Value.Uint64(), ms[1].Value.Uint64(), ms[2].Value.Uint64()
					if cfg.HeapProfile != "" && time.Since(heapAt) >= time.Second {
						heapAt = time.Now()
						writeProfile("heap", 0, cfg.HeapProfile)
						writeProfile("goroutine", 1, strings.TrimSuffix(cfg.HeapProfile, ".heap")+".goroutines.txt")
					}
				}
				res.Samples++
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	var prof *os.File
	if cfg.CPUProfile != "" {
		if prof, err = os.Create(cfg.CPUProfile); err == nil {
			err = pprof.StartCPUProfile(prof)
		}
		if err != nil {
			sched.Stop(ctx)
			return res, err
		}
	}
	rss, _, _ := memory(os.Getpid())
	if err := json.NewEncoder(os.Stdout).Encode(burstReady{Ready: true, StartUS: startTook.Microseconds(), RSS: rss}); err != nil {
		sched.Stop(ctx)
		return res, err
	}

	// Run until the parent closes standard input.
	_, _ = io.Copy(io.Discard, os.Stdin)
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	sched.Stop(stopCtx)
	cancel()
	if prof != nil {
		pprof.StopCPUProfile()
		_ = prof.Close()
	}
	close(stopSampling)
	<-sampled
	_, res.HWM, _ = memory(os.Getpid())

	mu.Lock()
	defer mu.Unlock()
	for _, r := range recs {
		res.Job = append(res.Job, r.job)
		res.Attempt = append(res.Attempt, r.attempt)
		res.LagUS = append(res.LagUS, r.lag)
		res.TickUS = append(res.TickUS, r.tick)
		res.RunID = append(res.RunID, r.id.String())
	}
	return res, nil
}

// writeProfile writes the named profile into path, replacing it; a
// failure leaves the last one.
func writeProfile(name string, debug int, path string) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		f.Close()
		return
	}
	if f.Close() == nil {
		_ = os.Rename(tmp, path)
	}
}

// settleHeap is what `schedulerd run` does once its jobs are in force
// (cmd/schedulerd/memory.go, settleMemory): it returns the garbage of
// the start and lets the heap grow 16 MiB beyond the live heap between
// collections (GOGC within [25, 100]), unless GOGC or GOMEMLIMIT are set.
func settleHeap() {
	debug.FreeOSMemory()
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	pct := 100
	if ms.HeapAlloc > 0 {
		pct = int(min(100, max(25, (16<<20)*100/ms.HeapAlloc)))
	}
	debug.SetGCPercent(pct)
}
