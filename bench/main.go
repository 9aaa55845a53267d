// Command bench measures schedulerd on SQLite and on PostgreSQL: throughput,
// firing lag, idle cost, recovery time, scale and memory, the database's
// own ceiling for the minimal claim-and-complete (pgbench), the
// dashboard's pages with many jobs, and a burst of many schedules due at
// the same second. It
// checks correctness while it measures (a fast wrong answer is a failure),
// prints a table as results come, and writes BENCHMARKS.md with the command,
// the machine and the raw numbers. `make bench` runs it with the full sizes.
//
// It measures the code as it is and reports a missed target with the
// factor by which it was missed; it never fails for a slow figure, only
// for a failed check or a section that could not run.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// sizes are the amounts of work of each section.
type sizes struct {
	throughputRuns int
	throughputCap  time.Duration
	// throughputPasses is how often each burn-down with a target runs.
	throughputPasses int
	commandRuns      int
	commandCap       time.Duration
	lagJobs          int
	lagWindow        time.Duration
	robfigWindow     time.Duration
	idleJobs         int
	idleWindow       time.Duration
	idleSettle       time.Duration // after the nodes are up, before the window
	memorySettle     time.Duration // after READY=1, before the memory is read
	memoryWindow     time.Duration // VmRSS sampled every second for this long
	recoveryTrials   int
	scaleSmall       int
	scaleLarge       int
	scaleDue         int
	scaleClaims      int
	scaleCap         time.Duration
	memory           []int // schedules
	pgbenchClients   int
	pgbenchRuns      int // per client count, per run (batched: throughputRuns, the burn-down's)
	burstJobs        int // schedules due at the same second (burst.go)
}

var fullSizes = sizes{
	throughputRuns: 200_000, throughputCap: 60 * time.Second, throughputPasses: 3,
	commandRuns: 5_000, commandCap: 20 * time.Second,
	lagJobs: 10_000, lagWindow: 2 * time.Minute, robfigWindow: time.Minute,
	idleJobs: 10_000, idleWindow: 2 * time.Minute, idleSettle: 10 * time.Second, memorySettle: 15 * time.Second, memoryWindow: time.Minute,
	recoveryTrials: 3,
	scaleSmall:     10_000, scaleLarge: 1_000_000, scaleDue: 20_000, scaleClaims: 1_000, scaleCap: 30 * time.Second,
	memory:         []int{10_000, 100_000},
	pgbenchClients: 4, pgbenchRuns: 100_000,
	burstJobs: 100_000,
}

var quickSizes = sizes{
	throughputRuns: 10_000, throughputCap: 20 * time.Second, throughputPasses: 1,
	commandRuns: 300, commandCap: 10 * time.Second,
	lagJobs: 2_000, lagWindow: 20 * time.Second, robfigWindow: 20 * time.Second,
	idleJobs: 2_000, idleWindow: 10 * time.Second, idleSettle: 3 * time.Second, memorySettle: 3 * time.Second, memoryWindow: 5 * time.Second,
	recoveryTrials: 1,
	scaleSmall:     2_000, scaleLarge: 50_000, scaleDue: 3_000, scaleClaims: 300, scaleCap: 10 * time.Second,
	memory:         []int{1_000, 10_000},
	pgbenchClients: 4, pgbenchRuns: 20_000,
	burstJobs: 3_000,
}

// options are the parsed flags.
type options struct {
	quick       bool
	only        []string
	out         string
	stores      []string
	concurrency int
	// throughputConcurrency is the burn-downs' concurrency.
	throughputConcurrency int
	// lagConcurrency is the lag section's concurrency; 0: one slot per
	// schedule.
	lagConcurrency int
	// lagVariants are the lag section's variants: spread, all-at-once.
	lagVariants []string
	profile     bool
	cpuProfile  string
	command     string
	// burstLead is how long after the burst's nodes are started their
	// schedules are due; 0: from the number of schedules (burstLead).
	burstLead time.Duration
	// burstProfile is a directory for CPU profiles of the burst's nodes.
	burstProfile string
	// burstNodes are the cluster sizes of the burst (1, 3); SQLite
	// has one node only.
	burstNodes []int
	sizes      sizes
	// baseline is the commit whose code figure 8 measures beside today's.
	baseline string
}

// section is one figure of the issue.
type section struct {
	name string
	run  func(ctx context.Context, e *env) error
}

var sections = []section{
	{"throughput", runThroughput},
	{"cost", runCost},
	{"lag", runLag},
	{"idle", runIdle},
	{"recovery", runRecovery},
	{"scale", runScale},
	{"pgbench", runPgbench},
	{"dashboard", runDashboard},
	{"burst", runBurst},
}

func main() {
	if cfg := os.Getenv(burstNodeEnv); cfg != "" {
		os.Exit(runBurstNode(cfg)) // a node of the burst (burst.go)
	}
	os.Exit(run(os.Args[1:]))
}

// run parses the flags, runs the sections and writes the report; it
// returns the exit code.
func run(args []string) int {
	o, err := parseOptions(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := NewReport(os.Stdout)
	e, err := newEnv(o, rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer e.close()
	rep.SetRedactions(e.dir, "$TMP/bench", e.root, ".", os.TempDir()+"/", "$TMP/")
	fmt.Printf("schedulerd benchmark: %s\n", o.command)
	machine := describeMachine()
	for _, m := range machine {
		fmt.Println("  " + m)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	for _, s := range sections {
		if len(o.only) > 0 && !slices.Contains(o.only, s.name) {
			continue
		}
		t0 := time.Now()
		err := s.run(ctx, e)
		fmt.Printf("  (%s took %s)\n", s.name, time.Since(t0).Round(time.Second))
		if err != nil {
			rep.Failf(s.name, "could not run: %v", err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	took := time.Since(start)
	machine = append(machine, e.versions(context.WithoutCancel(ctx))...)
	settings := e.settings(context.WithoutCancel(ctx))
	if o.out != "" {
		if err := rep.writeFile(o.out, o.command, machine, settings, took); err != nil {
			fmt.Fprintln(os.Stderr, "bench: write report:", err)
			return 1
		}
		fmt.Printf("\nwrote %s\n", o.out)
	}
	fmt.Printf("total %s\n", took.Round(time.Second))
	if f := rep.Failures(); len(f) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d check(s) failed:\n", len(f))
		for _, m := range f {
			fmt.Fprintln(os.Stderr, "  "+m)
		}
		return 1
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

func parseOptions(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	only := fs.String("only", "", "run only these sections, comma-separated: throughput, cost, lag, idle, recovery, scale, pgbench, dashboard, burst")
	stores := fs.String("stores", "sqlite,postgres", "the stores to measure, comma-separated")
	fs.BoolVar(&o.quick, "quick", false, "small sizes (a few minutes): checks that the program works")
	fs.StringVar(&o.out, "out", "", "write the report to this file (default: BENCHMARKS.md for a full run, none with -quick or -only)")
	fs.IntVar(&o.concurrency, "concurrency", 64, "concurrency of each in-process node (scale; and one more 1-node burn-down)")
	fs.IntVar(&o.throughputConcurrency, "throughput-concurrency", 2000, "concurrency of each node of the burn-downs (River's riverbench runs 2,000 workers)")
	fs.IntVar(&o.lagConcurrency, "lag-concurrency", 0, "concurrency of the lag section's node (default: the number of schedules, so that no tick waits for a slot)")
	fs.BoolVar(&o.profile, "profile", true, "take CPU profiles of the 1-node throughput runs and report their top")
	fs.StringVar(&o.baseline, "baseline", defaultBaseline, "the commit whose code the cost section measures beside today's")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole program to this file")
	variants := fs.String("lag-variants", strings.Join(lagVariants, ","), "the lag section's variants, comma-separated")
	passes := fs.Int("passes", 0, "passes of each burn-down with a target, taken in turns; its figure is the median (default 3, 1 with -quick)")
	lag := fs.Duration("lag-window", 0, "firing-lag window per engine variant (default 2m, 20s with -quick)")
	robfig := fs.Duration("robfig-window", 0, "firing-lag window per robfig/cron variant (default 1m, 20s with -quick)")
	fs.DurationVar(&o.burstLead, "burst-lead", 0, "how long after the burst's nodes are started their schedules are due (default 15s plus 0.2 ms per schedule)")
	fs.StringVar(&o.burstProfile, "burst-profile", "", "write CPU profiles of the burst's nodes into this directory, and report their top")
	burstNodes := fs.String("burst-nodes", "1,3", "the burst's cluster sizes, comma-separated (PostgreSQL; SQLite has one node)")
	fs.StringVar(&o.command, "command", "", "the command to name in the report (default: go run ./bench and the flags)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.sizes = fullSizes
	if o.quick {
		o.sizes = quickSizes
	}
	if *passes < 0 {
		return o, errors.New("-passes must be at least 1 (or 0: the default)")
	}
	if *passes > 0 {
		o.sizes.throughputPasses = *passes
	}
	if *lag > 0 {
		o.sizes.lagWindow = *lag
	}
	if *robfig > 0 {
		o.sizes.robfigWindow = *robfig
	}
	if *only != "" {
		for _, n := range strings.Split(*only, ",") {
			n = strings.TrimSpace(n)
			if !slices.ContainsFunc(sections, func(s section) bool { return s.name == n }) {
				return o, fmt.Errorf("-only: unknown section %q", n)
			}
			o.only = append(o.only, n)
		}
	}
	for _, s := range strings.Split(*stores, ",") {
		s = strings.TrimSpace(s)
		if s != kindSQLite && s != kindPostgres {
			return o, fmt.Errorf("-stores: unknown store %q (sqlite, postgres)", s)
		}
		o.stores = append(o.stores, s)
	}
	for _, v := range strings.Split(*variants, ",") {
		v = strings.TrimSpace(v)
		if !slices.Contains(lagVariants, v) {
			return o, fmt.Errorf("-lag-variants: unknown variant %q (%s)", v, strings.Join(lagVariants, ", "))
		}
		if !slices.Contains(o.lagVariants, v) {
			o.lagVariants = append(o.lagVariants, v)
		}
	}
	for _, v := range strings.Split(*burstNodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-burst-nodes: %q is not a number of nodes", v)
		}
		o.burstNodes = append(o.burstNodes, n)
	}
	if o.concurrency < 1 || o.throughputConcurrency < 1 {
		return o, errors.New("-concurrency and -throughput-concurrency must be at least 1")
	}
	if o.lagConcurrency < 0 {
		return o, errors.New("-lag-concurrency must be at least 1 (or 0: one slot per schedule)")
	}
	if o.lagConcurrency == 0 {
		o.lagConcurrency = o.sizes.lagJobs
	}
	outSet := false
	partial := len(o.lagVariants) < len(lagVariants)
	fs.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if !outSet && !o.quick && len(o.only) == 0 && !partial {
		o.out = "BENCHMARKS.md"
	}
	if o.command == "" {
		o.command = strings.TrimSpace("go run ./bench " + strings.Join(args, " "))
	}
	return o, nil
}

// describeMachine describes the machine (no names or paths): cores,
// memory, CPU model, kernel and Go.
func describeMachine() []string {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				var kb int64
				fmt.Sscan(f[1], &kb)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return []string{
		fmt.Sprintf("Machine: %d CPUs (`nproc`), %s memory, %s, %s", runtime.NumCPU(), mem, cpu, kernel),
		fmt.Sprintf("Go: %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH),
	}
}

// versions returns the database versions of the run.
func (e *env) versions(ctx context.Context) []string {
	var out []string
	if e.pg != nil {
		if conn, err := pgx.Connect(ctx, e.pg.DSN()); err == nil {
			var v string
			if conn.QueryRow(ctx, `SHOW server_version`).Scan(&v) == nil {
				out = append(out, "PostgreSQL: "+v)
			}
			conn.Close(ctx)
		}
	}
	if v := sqliteVersion(ctx); v != "" {
		out = append(out, "SQLite: "+v+" (modernc.org/sqlite, pure Go)")
	}
	return out
}

// settings describes the database settings that matter for the figures.
func (e *env) settings(ctx context.Context) []string {
	out := []string{
		fmt.Sprintf("In-process nodes, the engine's defaults but for concurrency: figure 1 concurrency %d (and one "+
			"1-node run at %d), figure 2 concurrency %d, figure 5 concurrency %d; the 1-node throughput runs at "+
			"concurrency %d have the CPU profiler on (100 Hz sampling)",
			e.opts.throughputConcurrency, e.opts.concurrency, e.opts.lagConcurrency, e.opts.concurrency,
			e.opts.throughputConcurrency),
		"SQLite: the store's own pragmas (WAL, synchronous=NORMAL), a file in a temporary directory",
	}
	if e.pg != nil {
		if conn, err := pgx.Connect(ctx, e.pg.DSN()); err == nil {
			var parts []string
			for _, k := range []string{"fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "autovacuum", "max_connections"} {
				var v string
				if conn.QueryRow(ctx, `SHOW `+k).Scan(&v) == nil {
					parts = append(parts, k+"="+v)
				}
			}
			conn.Close(ctx)
			out = append(out, "PostgreSQL: a throwaway server started as the tests start it (internal/pgtest), "+
				"on the same machine over TCP to 127.0.0.1: "+strings.Join(parts, ", "))
		}
	}
	return out
}

// profileTop returns the top entries (by cumulative time) of a CPU profile
// of this program, through `go tool pprof`; nil when that is not possible.
func profileTop(path string, n int) []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	cmd := exec.Command("go", "tool", "pprof", "-top", "-cum", fmt.Sprintf("-nodecount=%d", 4*n), exe, path)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil
	}
	var lines []string
	header := true
	for _, l := range strings.Split(out.String(), "\n") {
		if header {
			if strings.Contains(l, "flat%") {
				header = false
				lines = append(lines, strings.TrimSpace(l))
			}
			continue
		}
		// Keep the engine's and the stores' own frames: where the time goes.
		if strings.Contains(l, "schedulerd/store") || strings.Contains(l, "schedulerd/scheduler") ||
			strings.Contains(l, "modernc.org/sqlite") || strings.Contains(l, "pgx") || strings.Contains(l, "runtime.gcBgMarkWorker") ||
			strings.Contains(l, "syscall.Syscall") {
			lines = append(lines, strings.TrimSpace(l))
		}
		if len(lines) > n {
			break
		}
	}
	return lines
}
