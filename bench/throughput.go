package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store"
)

const secThroughput = "1 throughput"

// runThroughput is figure 1: burn down a backlog of runs of a no-op Go
// handler with 1 and 2 nodes, and of /bin/true command jobs; on PostgreSQL
// in turns with River's own benchmark and a pgbench ceiling, on a quiet
// host and with one core kept busy (compare.go).
func runThroughput(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	rep.Section(secThroughput)
	rep.Note(secThroughput, "Method: %s runs of one job are inserted before the start with `RunInsertMany`, in "+
		"transactions of %s; then the nodes start (in this process, each with its own store handle, "+
		"concurrency %d, the engine's other defaults) and burn the backlog down. Concurrency %d is the number of "+
		"workers River's benchmark gives its one queue; one "+
		"more 1-node run at concurrency %d, without a target, shows what smaller batches cost. The clock runs from the "+
		"first node's Start to the moment the last completion is committed (the nodes' counts of completed "+
		"results, which a node adds to once the transaction that wrote them has committed, read from memory "+
		"every 5 ms, reach the total); the rate is the number of runs the store shows "+
		"completed divided by that time. A run is capped at %s: the rate is then what the store shows "+
		"completed after the nodes stopped, over the time until they stopped. Command jobs run `/bin/true` "+
		"(%s runs, capped at %s). PostgreSQL: the planner statistics are those of the empty queue "+
		"(VACUUM ANALYZE before the insert), as when a backlog comes to a server that was quiet; only "+
		"autovacuum, which is on, may refresh them during the burn-down.",
		thousands(int64(o.sizes.throughputRuns)), thousands(insertChunk), o.throughputConcurrency,
		o.throughputConcurrency, o.concurrency, o.sizes.throughputCap,
		thousands(int64(o.sizes.commandRuns)), o.sizes.commandCap)
	rep.Note(secThroughput, "Where the time goes: the 1-node runs take a CPU profile of this process (`runtime/pprof`), "+
		"and on PostgreSQL sample pg_stat_activity every 20 ms to see which statements keep the server busy.")
	rep.Note(secThroughput, "Checks: every run completed exactly once (the handler saw each run id once, at "+
		"attempt 1; the store shows attempt 1 and one attempt row per completed run); nothing left running, "+
		"retrying or dead; when not capped, no run left pending.")
	rep.Note(secThroughput, "Targets: on PostgreSQL, schedulerd's rate divided by River's, both burning down the same "+
		"backlog on the same server in the same run, taking turns: at least %s, on the quiet host and with one "+
		"core busy, and at least %.0f%% of the pgbench ceiling of the same turn. An absolute rate (earlier 45,000 runs/s, "+
		"River's published figure on other hardware) measures "+
		"the host as much as the engine: the host's speed drifts within minutes, and the pgbench ceiling beside "+
		"each figure shows how near any engine can come on this host. River's own benchmark, with the settings it "+
		"ships for throughput, measures the same host at the same moments, so the ratio says what the engine does: "+
		"twice as fast as River, while keeping each run's history and attempts. SQLite keeps its absolute target "+
		"of %s runs/s, and the target of a share of the bare loop's rate below.", withUnit(riverRatioTarget, "x"),
		float64(ceilingShareTarget), thousands(sqliteThroughputTarget))
	passes := o.sizes.throughputPasses
	if passes > 1 {
		rep.Note(secThroughput, "Passes: the host's speed drifts by 10-30%% within minutes, so each burn-down with a target "+
			"(and the references) runs %d times, the figures of a store taking turns pass by pass (PostgreSQL: "+
			"1 node, 2 nodes, River, the pgbench ceiling, then again), and its figure is the median pass; the table "+
			"lists every pass, and the raw lines below each one. The CPU profile and the server's statements are "+
			"those of the last pass on the quiet host (every 1-node pass has the profiler on).", passes)
	}
	var errs []error
	for _, kind := range o.stores {
		if kind == kindPostgres {
			errs = append(errs, pgTurns(ctx, e)...)
		} else {
			rep.Note(secThroughput, "SQLite is one node by design (the store is a local file held by one "+
				"process with a lock), so it has no 2-node figure.")
			sp := burnSpec{kind: kind, nodes: 1, runs: o.sizes.throughputRuns, limit: o.sizes.throughputCap,
				concurrency: o.throughputConcurrency, profile: true}
			rep.Note(secThroughput, "SQLite, ceiling: each pass ends with a bare claim-and-complete loop: plain SQL on "+
				"one connection with the store writer's settings (WAL, synchronous=NORMAL, foreign keys, immediate "+
				"transactions; SQLite's own checkpoints), on a fresh file whose schema and backlog of %s runs the store "+
				"wrote: claim %s runs in one transaction (the claim's update of the run, in start order), then complete "+
				"them in another (the run's update and its attempt's row). What SQLite allows for the rows the engine "+
				"must write per run; the engine's rate over it, median of the passes' ratios, has the target %s. As on "+
				"PostgreSQL, the passes run on the quiet host, then again with one core kept busy by the same loop.",
				thousands(int64(o.sizes.throughputRuns)), thousands(bareBatch), withUnit(sqliteBareTarget, "x"))
			for _, busy := range []bool{false, true} {
				errs = append(errs, sqliteCondition(ctx, e, sp, busy)...)
				if ctx.Err() != nil {
					break
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		if o.concurrency != o.throughputConcurrency {
			sp := burnSpec{kind: kind, nodes: 1, runs: o.sizes.throughputRuns,
				limit: o.sizes.throughputCap, concurrency: o.concurrency, extra: true}
			if res, err := burnDown(ctx, e, sp); err != nil {
				errs = append(errs, fmt.Errorf("%s, 1 node at concurrency %d: %w", storeName(kind), o.concurrency, err))
			} else {
				addBurnFigure(e, sp, []burnResult{res}, "")
			}
		}
		sp := burnSpec{kind: kind, nodes: 1, runs: o.sizes.commandRuns,
			limit: o.sizes.commandCap, concurrency: o.throughputConcurrency, command: true}
		if res, err := burnDown(ctx, e, sp); err != nil {
			errs = append(errs, fmt.Errorf("%s, command jobs: %w", storeName(kind), err))
		} else {
			addBurnFigure(e, sp, []burnResult{res}, "")
		}
	}
	return errors.Join(errs...)
}

// sqliteThroughputTarget is the SQLite burn-down's target, in runs per
// second. PostgreSQL's is a ratio to River's rate (compare.go).
const sqliteThroughputTarget = 15000

// sqliteCondition runs the SQLite passes of one condition (the quiet
// host, or one core kept busy), the engine's burn-down and the bare loop
// taking turns, and adds their figures.
func sqliteCondition(ctx context.Context, e *env, sp burnSpec, busy bool) []error {
	sp.busy = busy
	passes := e.opts.sizes.throughputPasses
	var (
		results      []burnResult
		engine, bare passRates
	)
	errs := withBusyLoop(e, busy, "SQLite passes", func() (errs []error) {
		for pass := 1; pass <= passes && ctx.Err() == nil; pass++ {
			sp.pass, sp.passes = pass, passes
			label := passLabel(pass, passes) + busyLabel(busy)
			res, err := burnDown(ctx, e, sp)
			if err != nil {
				errs = append(errs, fmt.Errorf("SQLite%s: %w", label, err))
				engine = append(engine, math.NaN())
			} else {
				results = append(results, res)
				engine = append(engine, res.rate)
			}
			r, err := sqliteBare(ctx, e, label, sp.runs)
			if err != nil {
				errs = append(errs, fmt.Errorf("SQLite, bare loop%s: %w", label, err))
			}
			bare = append(bare, r)
		}
		return errs
	})
	if len(results) > 0 {
		addBurnFigure(e, sp, results, "")
	}
	addBareFigures(e, engine, bare, busy)
	return errs
}

// sqliteBareTarget is the SQLite burn-down's target as a share of the
// bare loop's rate (sqliteceiling.go).
const sqliteBareTarget = 0.80

// addBareFigures adds the bare loop's figure and the engine's ratio to it.
func addBareFigures(e *env, engine, bare passRates, busy bool) {
	if m := bare.measured(); len(m) > 0 {
		fig := Figure{Section: secThroughput, Name: fmt.Sprintf("reference: bare claim-and-complete loop, claim %s, complete %s, "+
			"on a file of the store's schema%s", thousands(bareBatch), thousands(bareBatch), busyLabel(busy)), Store: "SQLite", Value: median(m), Unit: "runs/s"}
		if len(m) > 1 {
			fig.Note = "median of " + passList(m)
		}
		e.rep.Add(fig)
	}
	if rs := pairRatios(engine, bare); len(rs) > 0 {
		fig := Figure{Section: secThroughput, Name: "schedulerd 1 node / the bare loop" + busyLabel(busy), Store: "SQLite",
			Value: median(rs), Unit: "x", Target: atLeast(sqliteBareTarget)}
		if len(rs) > 1 {
			fig.Note = "median of " + ratioList(rs)
		}
		e.rep.Add(fig)
	}
}

// insertChunk is the number of runs per RunInsertMany transaction.
const insertChunk = 5000

// burnSpec describes one burn-down.
type burnSpec struct {
	kind        string
	nodes       int
	runs        int
	limit       time.Duration
	concurrency int
	command     bool // /bin/true instead of a no-op Go handler
	profile     bool // take a CPU profile of this process
	// extra: a run beside the figure (other settings): no target, and
	// not the result the database ceiling is compared with.
	extra bool
	// busy: a busy-loop process keeps one core busy (compare.go).
	busy bool
	// pass of passes: a burn-down of a figure measured several times.
	pass, passes int
}

// what names the burn-down in the table and the raw lines.
func (sp burnSpec) what() string {
	what := fmt.Sprintf("no-op Go handler, %d node", sp.nodes)
	if sp.nodes > 1 {
		what += "s"
	}
	if sp.command {
		what = "command job /bin/true, 1 node"
	}
	if sp.extra {
		what += fmt.Sprintf(", concurrency %d", sp.concurrency)
	}
	return what + busyLabel(sp.busy)
}

// burnResult is what one burn-down measured.
type burnResult struct {
	rate      float64 // runs completed per second
	completed int64
	capped    bool
}

// addBurnFigure adds the figure of the passes of the burn-down sp: the
// median pass's rate, and for a figure with a target the result that
// figure 6 compares with. share, when not empty, follows the rate (its
// share of the pgbench ceiling).
func addBurnFigure(e *env, sp burnSpec, passes []burnResult, share string) {
	rates := make([]float64, len(passes))
	var notes []string
	for i, p := range passes {
		rates[i] = p.rate
		if p.capped {
			notes = append(notes, fmt.Sprintf("capped at %s: %s of %s runs", sp.limit,
				thousands(p.completed), thousands(int64(sp.runs))))
		}
	}
	fig := Figure{Section: secThroughput, Name: sp.what(), Store: storeName(sp.kind), Value: median(rates), Unit: "runs/s"}
	if len(rates) > 1 {
		notes = append([]string{"median of " + passList(rates)}, notes...)
	}
	fig.Note = strings.Join(notes, "; ")
	if share != "" {
		fig.Text = withUnit(fig.Value, fig.Unit) + ", " + share
	}
	if !sp.command && !sp.extra && !sp.busy {
		if sp.kind == kindSQLite {
			fig.Target = atLeast(sqliteThroughputTarget)
		}
		e.setResult(fmt.Sprintf("throughput/%s/%d", sp.kind, sp.nodes), fig.Value)
	}
	e.rep.Add(fig)
}

// passLabel names pass of passes in a raw line; nothing for a figure
// measured once.
func passLabel(pass, passes int) string {
	if passes <= 1 {
		return ""
	}
	return fmt.Sprintf(", pass %d of %d", pass, passes)
}

// passList is the rates of the passes in the order they ran.
func passList(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = num(r)
	}
	return fmt.Sprintf("%d passes: %s runs/s", len(rates), strings.Join(parts, ", "))
}

// execLog records, per run id, how often a handler ran it.
type execLog struct {
	mu       sync.Mutex
	seen     map[string]int32
	n        atomic.Int64
	notFirst atomic.Int64 // executions with attempt != 1
}

func newExecLog(n int) *execLog { return &execLog{seen: make(map[string]int32, n)} }

// handler is a no-op Go handler that records the run it executes.
func (l *execLog) handler(ctx context.Context) error {
	info, _ := jobs.InfoFrom(ctx)
	if info.Attempt != 1 {
		l.notFirst.Add(1)
	}
	l.mu.Lock()
	l.seen[info.RunID]++
	l.mu.Unlock()
	l.n.Add(1)
	return nil
}

// duplicates returns the number of run ids executed more than once.
func (l *execLog) duplicates() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := 0
	for _, c := range l.seen {
		if c > 1 {
			d++
		}
	}
	return d
}

// node is a scheduler running in this process with its own store handle.
type node struct {
	id    string
	st    store.Store
	sched *scheduler.Scheduler
}

// completedBy is how many results of completed runs the nodes have
// written.
func completedBy(nodes []*node) int64 {
	var n int64
	for _, nd := range nodes {
		n += nd.sched.Metrics().Results[jobs.StatusCompleted]
	}
	return n
}

// nodeConfig is the engine config of an in-process benchmark node.
func nodeConfig(kind, id string, concurrency int) scheduler.Config {
	return scheduler.Config{
		NodeID: id, Concurrency: concurrency,
		StoreClock: kind == kindPostgres, ExclusiveStore: kind == kindSQLite,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// startNodes makes and starts nodes on the given store handles.
func startNodes(ctx context.Context, kind string, sts []store.Store, concurrency int, defs []*jobs.Definition) ([]*node, error) {
	var nodes []*node
	for i, st := range sts {
		id := fmt.Sprintf("node-%d", i+1)
		s, err := scheduler.New(st, nodeConfig(kind, id, concurrency), defs)
		if err != nil {
			stopNodes(nodes)
			return nil, err
		}
		if err := s.Start(ctx); err != nil {
			stopNodes(nodes)
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		nodes = append(nodes, &node{id: id, st: st, sched: s})
	}
	return nodes, nil
}

// stopNodes stops the nodes at once (in parallel) and waits.
func stopNodes(nodes []*node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			n.sched.Stop(ctx)
		}()
	}
	wg.Wait()
}

// openHandles opens n store handles on b.
func openHandles(ctx context.Context, b *backend, n int) ([]store.Store, error) {
	var sts []store.Store
	for range n {
		st, err := b.open(ctx)
		if err != nil {
			closeAll(sts)
			return nil, err
		}
		sts = append(sts, st)
	}
	return sts, nil
}

func closeAll(sts []store.Store) {
	for _, st := range sts {
		_ = st.Close()
	}
}

// insertRuns inserts n due runs of d in transactions of insertChunk.
func insertRuns(ctx context.Context, st store.Store, d *jobs.Definition, n int, notBefore time.Time) error {
	for done := 0; done < n; {
		k := min(insertChunk, n-done)
		ps := make([]store.RunInsertParams, k)
		for i := range ps {
			ps[i] = store.RunInsertParams{
				Job: d.Name, Trigger: jobs.TriggerManual, NotBefore: notBefore,
				Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, Node: "bench",
			}
		}
		if _, err := st.RunInsertMany(ctx, ps); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		done += k
	}
	return nil
}

// postmasterPID returns the pid of the PostgreSQL server of b, or 0 when it
// is not a local process (an external server).
func postmasterPID(ctx context.Context, b *backend) int {
	if b.kind != kindPostgres {
		return 0
	}
	pid, err := b.db.int(ctx, `SELECT pg_backend_pid()`)
	if err != nil {
		return 0
	}
	return ppidOf(int(pid))
}

// burnDown runs one burn-down, writes its raw lines and checks, and
// returns what it measured; the caller adds the figure.
func burnDown(ctx context.Context, e *env, sp burnSpec) (burnResult, error) {
	rep := e.rep
	b, err := e.newBackend(ctx, sp.kind, "throughput")
	if err != nil {
		return burnResult{}, err
	}
	defer b.close(context.WithoutCancel(ctx))
	what := sp.what() + passLabel(sp.pass, sp.passes)
	// The last pass (or the only one) on the quiet host reports its
	// profile and statements.
	last := sp.pass == sp.passes && !sp.busy
	log := newExecLog(sp.runs)
	d := &jobs.Definition{Name: "noop", Handler: log.handler}
	if sp.command {
		d = &jobs.Definition{Name: "true", Command: []string{"/bin/true"}}
	}
	d.WithDefaults()

	sts, err := openHandles(ctx, b, sp.nodes)
	if err != nil {
		return burnResult{}, err
	}
	defer closeAll(sts)
	// The planner statistics of the empty queue: the backlog comes to a
	// server that was quiet, as a real one arrives, and nothing refreshes
	// them but autovacuum.
	if b.kind == kindPostgres {
		if err := b.db.exec(ctx, `VACUUM ANALYZE`); err != nil {
			return burnResult{}, err
		}
	}
	t0 := time.Now()
	if err := insertRuns(ctx, sts[0], d, sp.runs, time.Now()); err != nil {
		return burnResult{}, err
	}
	insertTook := time.Since(t0)
	rep.Rawf(secThroughput, "%s, %s: inserted %s runs in %s (%s runs/s)", b.name, what, thousands(int64(sp.runs)),
		insertTook.Round(time.Millisecond), num(rate(int64(sp.runs), insertTook)))

	var prof *os.File
	if sp.profile && e.opts.profile {
		if prof, err = os.Create(filepath.Join(e.dir, fmt.Sprintf("throughput-%s.pprof", b.kind))); err == nil {
			if err := pprof.StartCPUProfile(prof); err != nil {
				prof.Close()
				prof = nil
			}
		}
	}
	stopProfile := func() {
		if prof != nil {
			pprof.StopCPUProfile()
			prof.Close()
		}
	}
	profiling := prof != nil
	defer func() {
		if profiling {
			stopProfile()
		}
	}()
	stmts0 := int64(0)
	for _, st := range sts {
		stmts0 += statements(st)
	}
	pm := postmasterPID(ctx, b)
	var pg0 int64
	if pm > 0 {
		pg0, _ = processTreeTicks(pm)
	}
	cpu0 := selfCPU()
	var sampler *activitySampler
	if profiling && b.kind == kindPostgres {
		sampler = startSampler(ctx, b, 20*time.Millisecond)
	}

	start := time.Now()
	nodes, err := startNodes(ctx, b.kind, sts, sp.concurrency, []*jobs.Definition{d})
	if err != nil {
		return burnResult{}, err
	}
	capped := false
	var end time.Time
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for end.IsZero() {
		select {
		case <-ctx.Done():
			stopNodes(nodes)
			return burnResult{}, ctx.Err()
		case now := <-tick.C:
			if now.Sub(start) >= sp.limit {
				capped = true
				end = now
				continue
			}
			// A node counts a result once the transaction that wrote it
			// has committed: the nodes' counts say when the last
			// completion is committed, from memory, so that asking costs
			// the server nothing while it burns the backlog down (the
			// store's count of active runs, asked every 10 ms, took 4% of
			// the server's busy time). The store's statuses are read
			// after the nodes stopped.
			if completedBy(nodes) >= int64(sp.runs) {
				end = time.Now()
			}
		}
	}
	stopNodes(nodes)
	if capped {
		end = time.Now()
	}
	elapsed := end.Sub(start)
	cpu := selfCPU() - cpu0
	var pgTicks int64
	if pm > 0 {
		if t, err := processTreeTicks(pm); err == nil {
			pgTicks = t - pg0
		}
	}
	if profiling {
		profiling = false
		stopProfile()
	}
	var serverTop []string
	if sampler != nil {
		serverTop = sampler.report(8)
	}
	stmts := int64(0)
	for _, st := range sts {
		stmts += statements(st)
	}
	stmts -= stmts0

	counts, err := b.db.statusCounts(ctx, "")
	if err != nil {
		return burnResult{}, err
	}
	completed := counts[string(jobs.StatusCompleted)]
	r := rate(completed, elapsed)
	rep.Rawf(secThroughput, "%s, %s: %s completed in %s = %s runs/s%s; statuses %v", b.name, what,
		thousands(completed), elapsed.Round(time.Millisecond), num(r), map[bool]string{true: " (capped)"}[capped], counts)
	cpuLine := fmt.Sprintf("%s, %s: CPU of this process %.1f s (%.2f cores)", b.name, what, cpu.Seconds(), cpu.Seconds()/elapsed.Seconds())
	pgCPU := float64(pgTicks) / clockTicks
	if pm > 0 {
		cpuLine += fmt.Sprintf(", PostgreSQL server %.1f s (%.2f cores)", pgCPU, pgCPU/elapsed.Seconds())
	}
	if completed > 0 {
		cpuLine += fmt.Sprintf("; per run: this process %.1f µs", 1e6*cpu.Seconds()/float64(completed))
		if pm > 0 {
			cpuLine += fmt.Sprintf(", the server %.1f µs", 1e6*pgCPU/float64(completed))
		}
	}
	if completed > 0 && stmts >= 0 {
		cpuLine += fmt.Sprintf("; %.1f SQL statements per run", float64(stmts)/float64(completed))
	}
	rep.Rawf(secThroughput, "%s", cpuLine)
	if sp.nodes > 1 {
		per := map[string]int64{}
		_ = b.db.rows(ctx, `SELECT node, COUNT(*) FROM runs WHERE status = 'completed' GROUP BY node`, nil, func(c []any) error {
			per[c[0].(string)] = c[1].(int64)
			return nil
		})
		rep.Rawf(secThroughput, "%s, %s: completions per node %v", b.name, what, per)
	}
	if prof != nil && last {
		rep.Rawf(secThroughput, "  CPU profile of this process (go tool pprof -top -cum, the engine's and the stores' frames):")
		for _, l := range profileTop(prof.Name(), 16) {
			rep.Rawf(secThroughput, "    %s", l)
		}
	}
	if len(serverTop) > 0 && last {
		rep.Rawf(secThroughput, "  PostgreSQL statements by share of busy server time (pg_stat_activity sampled):")
		for _, l := range serverTop {
			rep.Rawf(secThroughput, "    %s", l)
		}
	}

	// Correctness.
	fail := func(format string, args ...any) {
		rep.Failf(secThroughput, "%s, %s: "+format, append([]any{b.name, what}, args...)...)
	}
	total := int64(0)
	for st, n := range counts {
		total += n
		if st != string(jobs.StatusCompleted) && st != string(jobs.StatusPending) {
			fail("%d runs ended %s", n, st)
		}
	}
	if total != int64(sp.runs) {
		fail("the store holds %d runs, want %d", total, sp.runs)
	}
	if !capped && completed != int64(sp.runs) {
		fail("%d of %d runs completed", completed, sp.runs)
	}
	if n, err := b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE (status = 'completed' AND attempt <> 1) OR (status = 'pending' AND attempt <> 0)`); err != nil || n != 0 {
		fail("%d runs with a wrong attempt number (completed runs must be at attempt 1) %v", n, err)
	}
	if n, err := b.db.int(ctx, `SELECT COUNT(*) FROM attempts`); err != nil || n != completed {
		fail("%d attempt rows for %d completed runs %v", n, completed, err)
	}
	if !sp.command {
		if got := log.n.Load(); got != completed {
			fail("the handler ran %d times for %d completed runs", got, completed)
		}
		if dup := log.duplicates(); dup > 0 {
			fail("%d runs executed more than once", dup)
		}
		if nf := log.notFirst.Load(); nf > 0 {
			fail("%d executions at an attempt other than 1", nf)
		}
	}
	return burnResult{rate: r, completed: completed, capped: capped}, nil
}
