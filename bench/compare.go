package main

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Figure 1 on PostgreSQL: schedulerd's burn-downs, River's own benchmark
// and a pgbench ceiling take turns on the same server, pass by pass, on a
// quiet host and then while a busy-loop process keeps one core busy. The
// targets are ratios to River's rate, which the host's speed does not
// move as it moves an absolute rate.

// busyLoopScript keeps one core busy: a shell loop of builtins, which
// forks nothing and makes no system calls.
const busyLoopScript = "while :; do :; done"

// busyLabel names the loaded condition in figure names and raw lines.
func busyLabel(busy bool) string {
	if busy {
		return ", one core busy"
	}
	return ""
}

// passRates are one contender's rates in pass order; NaN for a pass that
// measured nothing.
type passRates []float64

// measured returns the rates of the passes that measured.
func (p passRates) measured() []float64 {
	var out []float64
	for _, r := range p {
		if !math.IsNaN(r) {
			out = append(out, r)
		}
	}
	return out
}

// pairRatios returns a[i] / b[i] for each pass i in which both measured:
// two contenders of the same turn, which the host's drift between turns
// does not separate.
func pairRatios(a, b passRates) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if !math.IsNaN(a[i]) && !math.IsNaN(b[i]) && b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// ratioList is the ratios of the passes in the order they ran.
func ratioList(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = withUnit(r, "x")
	}
	return fmt.Sprintf("%d passes: %s", len(rs), strings.Join(parts, ", "))
}

// ceilingScript is the pgbench ceiling of figure 1's turns: figure 6's
// batched claim-and-complete at the engine's batch size.
var ceilingScript = batchedScript(shapeBatch)

// pgTurns runs figure 1 on PostgreSQL: the quiet host, then one core busy.
func pgTurns(ctx context.Context, e *env) []error {
	rep, o := e.rep, e.opts
	rep.Note(secThroughput, "PostgreSQL, conditions: the passes run twice over, first on the quiet host (%d cores), "+
		"then while a process that the benchmark starts keeps one core busy, as another program on a shared host "+
		"would: `/bin/sh -c '%s'` at normal priority, started before the first of those passes and killed after "+
		"the last; the raw lines give the CPU it got.", runtime.NumCPU(), busyLoopScript)
	rep.Note(secThroughput, "PostgreSQL, ceiling: each turn ends with pgbench claiming and completing the backlog's "+
		"%s rows (rounded down to whole batches per client) of a minimal queue table, %s per claim and per completion "+
		"with %d clients, on a fresh database of the same server "+
		"(figure 6's method and batched script): what the server does with the least a queue can write. A rate's "+
		"share of the ceiling is the median of its passes' shares, each over the ceiling of the same turn; a ratio to "+
		"River is the median of its passes' ratios, each over River's pass of the same turn.",
		thousands(int64(o.sizes.throughputRuns)), thousands(int64(ceilingScript.batch)), o.sizes.pgbenchClients)
	var refs references
	var err error
	if refs.river, err = e.river(); err != nil {
		rep.Note(secThroughput, "River reference not measured: %v", err)
	} else {
		riverNote(e, refs.river)
	}
	if refs.pgbench, err = pgbenchPath(); err != nil {
		rep.Note(secThroughput, "The pgbench ceiling not measured: %v", err)
	}
	var errs []error
	for _, busy := range []bool{false, true} {
		errs = append(errs, pgCondition(ctx, e, refs, busy)...)
		if ctx.Err() != nil {
			break
		}
	}
	return errs
}

// references are what takes turns with schedulerd: River's CLI and
// pgbench, each empty when it is not to be had here.
type references struct {
	river   riverBuild
	pgbench string
}

// turns are the rates of one condition's passes, in pass order.
type turns struct {
	busy           bool
	results        map[int][]burnResult // by node count: the passes that measured
	rates          map[int]passRates    // by node count
	river, ceiling passRates
}

// turnNodes are the node counts of schedulerd's burn-downs in a turn.
var turnNodes = []int{1, 2}

// turnSpec is schedulerd's burn-down with nodes nodes in a turn.
func turnSpec(o options, nodes int, busy bool) burnSpec {
	return burnSpec{kind: kindPostgres, nodes: nodes, runs: o.sizes.throughputRuns, limit: o.sizes.throughputCap,
		concurrency: o.throughputConcurrency, profile: nodes == 1, busy: busy, passes: o.sizes.throughputPasses}
}

// pgCondition runs the passes of one condition in turns and adds their
// figures.
func pgCondition(ctx context.Context, e *env, refs references, busy bool) []error {
	var t *turns
	errs := withBusyLoop(e, busy, "passes", func() (errs []error) {
		t, errs = runTurns(ctx, e, refs, busy)
		return errs
	})
	if t != nil {
		t.addFigures(e, refs)
	}
	return errs
}

// withBusyLoop runs passes, with the busy loop on one core when busy, and
// writes the CPU the loop got; what names the passes in that line.
func withBusyLoop(e *env, busy bool, what string, passes func() []error) []error {
	if !busy {
		return passes()
	}
	loop, err := startBusyLoop()
	if err != nil {
		return []error{err}
	}
	defer loop.stop()
	errs := passes()
	cpu, wall := loop.stop()
	e.rep.Rawf(secThroughput, "Busy loop (`/bin/sh -c '%s'`, pid %d): %.1f CPU s over %s (%.2f cores) while the "+
		"%s with one core busy ran", busyLoopScript, loop.pid(), cpu.Seconds(), wall.Round(time.Second),
		cpu.Seconds()/wall.Seconds(), what)
	return errs
}

// runTurns runs the passes, each a turn of schedulerd on 1 and 2 nodes,
// River, and the pgbench ceiling.
func runTurns(ctx context.Context, e *env, refs references, busy bool) (*turns, []error) {
	o := e.opts
	t := &turns{busy: busy, results: map[int][]burnResult{}, rates: map[int]passRates{}}
	riverOK := refs.river.bin != ""
	var errs []error
	for pass := 1; pass <= o.sizes.throughputPasses && ctx.Err() == nil; pass++ {
		label := passLabel(pass, o.sizes.throughputPasses) + busyLabel(busy)
		for _, n := range turnNodes {
			sp := turnSpec(o, n, busy)
			sp.pass = pass
			res, err := burnDown(ctx, e, sp)
			if err != nil {
				errs = append(errs, fmt.Errorf("PostgreSQL, %d node(s)%s: %w", n, label, err))
				t.rates[n] = append(t.rates[n], math.NaN())
				continue
			}
			t.results[n] = append(t.results[n], res)
			t.rates[n] = append(t.rates[n], res.rate)
		}
		river := math.NaN()
		if riverOK {
			rate, ok, err := riverPass(ctx, e, refs.river, label)
			if err != nil {
				errs = append(errs, fmt.Errorf("the River reference%s: %w", label, err))
			}
			if ok {
				river = rate
			} else {
				riverOK = false
			}
		}
		t.river = append(t.river, river)
		ceiling := math.NaN()
		if refs.pgbench != "" {
			r, err := pgbenchRun(ctx, e, secThroughput, refs.pgbench, "pgbench ceiling, "+ceilingScript.name+label,
				ceilingScript.text, ceilingScript.batch, o.sizes.pgbenchClients)
			if err != nil {
				errs = append(errs, fmt.Errorf("the pgbench ceiling%s: %w", label, err))
			} else {
				ceiling = r
			}
		}
		t.ceiling = append(t.ceiling, ceiling)
	}
	return t, errs
}

// share is a contender's share of the ceiling: the median of its passes'
// shares; empty when no pass of both measured.
func (t *turns) share(p passRates) string {
	if fr := pairRatios(p, t.ceiling); len(fr) > 0 {
		return fmt.Sprintf("%.1f%% of the ceiling", 100*median(fr))
	}
	return ""
}

// addFigures adds the condition's figures: schedulerd's rates, River's
// and the ceiling's, and the ratios to River that have the targets.
func (t *turns) addFigures(e *env, refs references) {
	rep, o := e.rep, e.opts
	for _, n := range turnNodes {
		if len(t.results[n]) > 0 {
			addBurnFigure(e, turnSpec(o, n, t.busy), t.results[n], t.share(t.rates[n]))
		}
	}
	if m := t.river.measured(); len(m) > 0 {
		f := Figure{Section: secThroughput, Name: "reference: " + refs.river.name() + ", its own burn-down, 1 client" +
			busyLabel(t.busy), Store: "PostgreSQL", Value: median(m), Unit: "runs/s"}
		if len(m) > 1 {
			f.Note = "median of " + passList(m)
		}
		if s := t.share(t.river); s != "" {
			f.Text = withUnit(f.Value, f.Unit) + ", " + s
		}
		rep.Add(f)
	}
	if m := t.ceiling.measured(); len(m) > 0 {
		f := Figure{Section: secThroughput, Store: "PostgreSQL", Value: median(m), Unit: "runs/s",
			Name: fmt.Sprintf("reference: pgbench ceiling, %s, %d clients%s", ceilingScript.name, o.sizes.pgbenchClients,
				busyLabel(t.busy))}
		if len(m) > 1 {
			f.Note = "median of " + passList(m)
		}
		rep.Add(f)
	}
	for _, n := range turnNodes {
		rs := pairRatios(t.rates[n], t.river)
		if len(rs) == 0 {
			continue
		}
		name := "schedulerd 1 node / River"
		if n > 1 {
			name = fmt.Sprintf("schedulerd %d nodes / River", n)
		}
		f := Figure{Section: secThroughput, Name: name + busyLabel(t.busy), Store: "PostgreSQL", Value: median(rs),
			Unit: "x", Target: atLeast(riverRatioTarget)}
		if len(rs) > 1 {
			f.Note = "median of " + ratioList(rs)
		}
		rep.Add(f)
	}
	for _, n := range turnNodes {
		rs := pairRatios(t.rates[n], t.ceiling)
		if len(rs) == 0 {
			continue
		}
		for i := range rs {
			rs[i] *= 100
		}
		f := Figure{Section: secThroughput, Name: fmt.Sprintf("schedulerd %d node(s) / the pgbench ceiling%s", n, busyLabel(t.busy)),
			Store: "PostgreSQL", Value: median(rs), Unit: "%", Target: atLeast(ceilingShareTarget)}
		if len(rs) > 1 {
			parts := make([]string, len(rs))
			for i, r := range rs {
				parts[i] = fmt.Sprintf("%.1f%%", r)
			}
			f.Note = fmt.Sprintf("median of %d passes: %s", len(rs), strings.Join(parts, ", "))
		}
		rep.Add(f)
	}
}

// The targets of figure 1 on PostgreSQL: schedulerd's rate at least
// riverRatioTarget times River's, and at least ceilingShareTarget percent
// of the pgbench ceiling, each in the same turn.
const (
	riverRatioTarget   = 2.0
	ceilingShareTarget = 50
)

// busyLoop is a process that keeps one core busy.
type busyLoop struct {
	cmd     *exec.Cmd
	start   time.Time
	stopped bool
	cpu     time.Duration
	wall    time.Duration
}

// startBusyLoop starts the loop. The kernel kills it when the thread that
// started it exits (Pdeathsig; Go ends a thread only when a goroutine
// locked to it returns, which this program does not do), so that a
// benchmark killed outright leaves no loop behind.
func startBusyLoop() (*busyLoop, error) {
	cmd := exec.Command("/bin/sh", "-c", busyLoopScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the busy loop: %w", err)
	}
	return &busyLoop{cmd: cmd, start: time.Now()}, nil
}

func (l *busyLoop) pid() int { return l.cmd.Process.Pid }

// stop kills the loop (once) and returns the CPU time it used and the
// time it ran.
func (l *busyLoop) stop() (cpu, wall time.Duration) {
	if !l.stopped {
		l.stopped = true
		ticks, _ := cpuTicks(l.pid())
		l.cpu = time.Duration(ticks) * time.Second / clockTicks
		l.wall = time.Since(l.start)
		_ = l.cmd.Process.Kill()
		_ = l.cmd.Wait()
	}
	return l.cpu, l.wall
}
