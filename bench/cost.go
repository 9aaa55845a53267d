package main

import (
	"bufio"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/internal/pgtest"
)

const secCost = "8 cost per run"

// defaultBaseline is the older code that figure 8 measures beside today's:
// the last commit that BENCHMARKS.md measured before the per-run writes of
// job results, notifications and per-job counters came (2026-11-25).
const defaultBaseline = "22cd59f0cd24971f8f4a535423d012e41ea354df"

// probeSource is the burn-down program that figure 8 builds from this
// tree and, copied there, from the baseline's.
//
//go:embed costprobe/main.go
var probeSource []byte

// probeResult is what costprobe prints (costprobe's result).
type probeResult struct {
	Completed    int64   `json:"completed"`
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	AllocObjects uint64  `json:"alloc_objects"`
	AllocBytes   uint64  `json:"alloc_bytes"`
	Statements   int64   `json:"statements"`
	WriteBytes   int64   `json:"write_bytes"`
	Capped       bool    `json:"capped"`
}

// costSample is one burn-down's cost per run; NaN-free: a measure that
// does not apply is negative.
type costSample struct {
	daemonCPU    float64 // µs of the node's process
	serverCPU    float64 // µs of the server's processes (/proc)
	serverExec   float64 // µs of statement execution (pg_stat_statements)
	statements   float64
	roundTrips   float64
	walBytes     float64 // PostgreSQL: WAL; SQLite: bytes written by the process
	allocObjects float64
	allocBytes   float64
	rate         float64 // runs/s, through the counting proxy on PostgreSQL
}

// costMeasures name the rows of figure 8's table, in order, with how each
// sample gives its value.
var costMeasures = []struct {
	name string
	unit string
	get  func(costSample) float64
	pg   bool // PostgreSQL only
}{
	{"CPU of the node's process", "µs", func(c costSample) float64 { return c.daemonCPU }, false},
	{"CPU of PostgreSQL's processes (/proc)", "µs", func(c costSample) float64 { return c.serverCPU }, true},
	{"statement execution in PostgreSQL (pg_stat_statements total_exec_time)", "µs", func(c costSample) float64 { return c.serverExec }, true},
	{"SQL statements (PostgreSQL: pg_stat_statements calls; SQLite: the store's counter)", "", func(c costSample) float64 { return c.statements }, false},
	{"round trips to the server", "", func(c costSample) float64 { return c.roundTrips }, true},
	{"bytes written (PostgreSQL: WAL; SQLite: the process's write calls, WAL and checkpoints)", "B", func(c costSample) float64 { return c.walBytes }, false},
	{"heap allocations (objects)", "", func(c costSample) float64 { return c.allocObjects }, false},
	{"heap allocations (bytes)", "B", func(c costSample) float64 { return c.allocBytes }, false},
}

// runCost is figure 8: what one run of a burn-down costs, today and in the
// baseline's code, measured the same way.
func runCost(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	rep.Section(secCost)
	base, err := e.baselineLabel()
	if err != nil {
		return fmt.Errorf("baseline %s: %w", o.baseline, err)
	}
	runs := o.sizes.throughputRuns
	passes := o.sizes.throughputPasses
	rep.Note(secCost, "Method: figure 1's 1-node burn-down (%s runs of a no-op Go handler inserted first, one node at "+
		"concurrency %d, the engine's other defaults), run by `bench/costprobe`, a program built twice: from this "+
		"tree (today) and from the tree of %s (baseline: the last code BENCHMARKS.md measured before the per-run "+
		"writes of job results, notifications and per-job counters), each on a fresh database of the same store. "+
		"The probe counts from its node's Start to its Stop: its own CPU (getrusage), its heap allocations "+
		"(runtime/metrics), its store's statement counter and the bytes it passed to write calls (/proc/self/io). "+
		"PostgreSQL runs on a throwaway server of its own with pg_stat_statements loaded (the same settings as "+
		"the others, autovacuum on); around the burn-down the benchmark reads the CPU of the server's processes "+
		"(/proc), the WAL written (pg_current_wal_lsn), and pg_stat_statements (reset before; calls and "+
		"total_exec_time of the probe's database after); the probe reaches the server through a proxy in the "+
		"benchmark that counts round trips (each time the client sends after the server has). Each figure is "+
		"divided by the runs completed; the table shows the median of %d passes, baseline and today taking turns.",
		thousands(int64(runs)), o.throughputConcurrency, base, passes)
	rep.Note(secCost, "Checks: every run completed, none capped, and the store shows every run completed.")

	today, err := e.costProbe("")
	if err != nil {
		return fmt.Errorf("build the probe: %w", err)
	}
	old, err := e.costProbe(o.baseline)
	if err != nil {
		return fmt.Errorf("build the probe of %s: %w", base, err)
	}
	var srv *pgtest.Server
	if containsKind(o.stores, kindPostgres) {
		if srv, err = startCostServer(); err != nil {
			return err
		}
		defer srv.Stop()
	}
	type cell struct{ kind, code string }
	samples := map[cell][]costSample{}
	var errs []error
	for _, kind := range o.stores {
		for pass := 1; pass <= passes; pass++ {
			for _, c := range []struct{ code, bin string }{{"baseline", old}, {"today", today}} {
				what := fmt.Sprintf("%s, %s%s", storeName(kind), c.code, passLabel(pass, passes))
				s, err := costPass(ctx, e, srv, kind, c.bin, what, runs)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", what, err))
					continue
				}
				samples[cell{kind, c.code}] = append(samples[cell{kind, c.code}], s)
			}
		}
	}
	var t strings.Builder
	t.WriteString("Cost per run (median of the passes):\n\n| per run |")
	for _, kind := range o.stores {
		fmt.Fprintf(&t, " %s baseline | %s today |", storeName(kind), storeName(kind))
	}
	t.WriteString("\n|---|")
	for range o.stores {
		t.WriteString("---|---|")
	}
	t.WriteString("\n")
	for _, m := range costMeasures {
		unit := ""
		if m.unit != "" {
			unit = " (" + m.unit + ")"
		}
		fmt.Fprintf(&t, "| %s%s |", m.name, unit)
		for _, kind := range o.stores {
			for _, code := range []string{"baseline", "today"} {
				v := medianOf(samples[cell{kind, code}], m.get)
				if (m.pg && kind != kindPostgres) || v < 0 {
					t.WriteString(" - |")
					continue
				}
				fmt.Fprintf(&t, " %s |", num(v))
			}
		}
		t.WriteString("\n")
	}
	rep.Note(secCost, "%s", strings.TrimSuffix(t.String(), "\n"))
	for _, kind := range o.stores {
		for _, m := range costMeasures[:3] {
			if m.pg && kind != kindPostgres {
				continue
			}
			b, d := medianOf(samples[cell{kind, "baseline"}], m.get), medianOf(samples[cell{kind, "today"}], m.get)
			if d < 0 {
				continue
			}
			text := fmt.Sprintf("%s µs (baseline %s µs)", num(d), num(b))
			rep.Add(Figure{Section: secCost, Name: "per run: " + m.name, Store: storeName(kind), Value: d, Unit: "µs", Text: text})
		}
	}
	return errors.Join(errs...)
}

func containsKind(kinds []string, kind string) bool {
	for _, k := range kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// medianOf is the median of one measure over samples; -1 when none has
// it.
func medianOf(ss []costSample, get func(costSample) float64) float64 {
	var vs []float64
	for _, s := range ss {
		if v := get(s); v >= 0 {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return -1
	}
	return median(vs)
}

// baselineLabel names the baseline commit: its short hash and date.
func (e *env) baselineLabel() (string, error) {
	out, err := exec.Command("git", "-C", e.root, "log", "-1", "--format=%h of %ad", "--date=short",
		e.opts.baseline+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("git log: %w (the baseline needs the repository's history)", err)
	}
	return "commit " + strings.TrimSpace(string(out)), nil
}

// costProbe builds the probe from this tree (rev "") or from the tree of
// rev, and returns the binary.
func (e *env) costProbe(rev string) (string, error) {
	name := "costprobe-today"
	src := e.root
	if rev != "" {
		name = "costprobe-baseline"
		src = filepath.Join(e.dir, "baseline-src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", err
		}
		archive := exec.Command("git", "-C", e.root, "archive", "--format=tar", rev)
		untar := exec.Command("tar", "-x", "-C", src)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return "", err
		}
		untar.Stdin = pipe
		var stderr strings.Builder
		archive.Stderr, untar.Stderr = &stderr, &stderr
		if err := untar.Start(); err != nil {
			return "", err
		}
		if err := archive.Run(); err != nil {
			_ = untar.Wait()
			return "", fmt.Errorf("git archive %s: %w: %s", rev, err, stderr.String())
		}
		if err := untar.Wait(); err != nil {
			return "", fmt.Errorf("untar: %w: %s", err, stderr.String())
		}
		dir := filepath.Join(src, "bench", "costprobe")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), probeSource, 0o644); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(e.dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./bench/costprobe")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, tail(out))
	}
	return bin, nil
}

// startCostServer starts figure 8's PostgreSQL server: a throwaway one as
// the others, with pg_stat_statements loaded and autovacuum on.
func startCostServer() (*pgtest.Server, error) {
	srv, err := pgtest.StartWith("shared_preload_libraries = 'pg_stat_statements'")
	if err != nil {
		return nil, fmt.Errorf("start postgresql with pg_stat_statements: %w", err)
	}
	if err := srv.EnableAutovacuum(); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("start postgresql: enable autovacuum: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err == nil {
		_, err = conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
		conn.Close(ctx)
	}
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	return srv, nil
}

// serverState is what the benchmark reads of the server around a
// burn-down.
type serverState struct {
	ticks int64  // CPU of the server's processes
	lsn   string // pg_current_wal_lsn
}

// costPass runs the probe once on a fresh database and returns its cost
// per run.
func costPass(ctx context.Context, e *env, srv *pgtest.Server, kind, bin, what string, runs int) (costSample, error) {
	rep := e.rep
	args := []string{"-store", kind, "-runs", fmt.Sprint(runs), "-concurrency", fmt.Sprint(e.opts.throughputConcurrency),
		"-limit", e.opts.sizes.throughputCap.String()}
	var (
		admin   *pgx.Conn
		dbName  string
		proxy   *rtProxy
		sqlPath string
		pm      int
	)
	if kind == kindPostgres {
		dbName = e.name("bench_cost")
		var err error
		if admin, err = pgx.Connect(ctx, srv.DSN()); err != nil {
			return costSample{}, err
		}
		defer admin.Close(context.WithoutCancel(ctx))
		if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{dbName}.Sanitize()); err != nil {
			return costSample{}, err
		}
		defer func() {
			_, _ = admin.Exec(context.WithoutCancel(ctx), `DROP DATABASE IF EXISTS `+pgx.Identifier{dbName}.Sanitize()+` WITH (FORCE)`)
		}()
		u, err := url.Parse(pgtest.DatabaseDSN(srv.DSN(), dbName))
		if err != nil {
			return costSample{}, err
		}
		if proxy, err = startProxy(u.Host); err != nil {
			return costSample{}, err
		}
		defer proxy.Close()
		u.Host = proxy.Addr()
		args = append(args, "-dsn", u.String())
		var pid int
		if err := admin.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return costSample{}, err
		}
		pm = ppidOf(pid)
	} else {
		dir, err := e.subdir("cost")
		if err != nil {
			return costSample{}, err
		}
		defer os.RemoveAll(dir)
		sqlPath = filepath.Join(dir, "schedulerd.db")
		args = append(args, "-path", sqlPath)
	}

	cmd := exec.CommandContext(ctx, bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return costSample{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return costSample{}, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return costSample{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	next := func() (string, error) {
		if !lines.Scan() {
			_ = cmd.Wait()
			return "", fmt.Errorf("the probe ended: %s", tail([]byte(stderr.String())))
		}
		return lines.Text(), nil
	}
	if l, err := next(); err != nil {
		return costSample{}, err
	} else if l != `{"ready":true}` {
		return costSample{}, fmt.Errorf("the probe said %q", l)
	}

	var before serverState
	if kind == kindPostgres {
		if before, err = readServer(ctx, admin, pm); err != nil {
			return costSample{}, err
		}
		if _, err := admin.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
			return costSample{}, err
		}
		proxy.counting.Store(true)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return costSample{}, err
	}
	l, err := next()
	if err != nil {
		return costSample{}, err
	}
	var r probeResult
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		return costSample{}, fmt.Errorf("the probe said %q: %w", l, err)
	}
	_ = cmd.Wait()
	n := float64(r.Completed)
	s := costSample{serverCPU: -1, serverExec: -1, roundTrips: -1, statements: -1,
		daemonCPU: 1e6 * r.CPUSeconds / n, allocObjects: float64(r.AllocObjects) / n, allocBytes: float64(r.AllocBytes) / n,
		walBytes: float64(r.WriteBytes) / n}
	if r.Seconds > 0 {
		s.rate = n / r.Seconds
	}
	if r.Statements >= 0 {
		s.statements = float64(r.Statements) / n
	}
	var completed int64
	if kind == kindPostgres {
		proxy.counting.Store(false)
		after, err := readServer(ctx, admin, pm)
		if err != nil {
			return costSample{}, err
		}
		var wal float64
		if err := admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8`, after.lsn, before.lsn).Scan(&wal); err != nil {
			return costSample{}, err
		}
		var calls int64
		var execMS float64
		if err := admin.QueryRow(ctx, `SELECT COALESCE(sum(calls), 0)::int8, COALESCE(sum(total_exec_time), 0)::float8
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`, dbName).Scan(&calls, &execMS); err != nil {
			return costSample{}, err
		}
		s.walBytes, s.statements, s.serverExec = wal/n, float64(calls)/n, 1e3*execMS/n
		s.roundTrips = float64(proxy.turns.Load()) / n
		if pm > 0 {
			s.serverCPU = 1e6 * float64(after.ticks-before.ticks) / clockTicks / n
		}
		rows, err := admin.Query(ctx, `SELECT calls, total_exec_time, regexp_replace(query, '\s+', ' ', 'g')
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
			ORDER BY total_exec_time DESC LIMIT 5`, dbName)
		if err != nil {
			return costSample{}, err
		}
		var top []string
		for rows.Next() {
			var c int64
			var t float64
			var q string
			if err := rows.Scan(&c, &t, &q); err != nil {
				rows.Close()
				return costSample{}, err
			}
			if len(q) > 90 {
				q = q[:90] + "..."
			}
			top = append(top, fmt.Sprintf("    %5.1f µs/run %8d calls  %s", 1e3*t/n, c, q))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return costSample{}, err
		}
		rep.Rawf(secCost, "%s: %s runs in %.2fs through the proxy (%s runs/s); per run: node CPU %.1f µs, server CPU %.1f µs, "+
			"execution %.1f µs, %.3f statements, %.3f round trips, %s B of WAL, %s allocations (%s B)", what,
			thousands(r.Completed), r.Seconds, num(s.rate), s.daemonCPU, s.serverCPU, s.serverExec, s.statements,
			s.roundTrips, num(s.walBytes), num(s.allocObjects), num(s.allocBytes))
		rep.Rawf(secCost, "  statements by execution time:")
		for _, l := range top {
			rep.Rawf(secCost, "%s", l)
		}
		dsn := pgtest.DatabaseDSN(srv.DSN(), dbName)
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return costSample{}, err
		}
		err = c.QueryRow(ctx, `SELECT count(*) FROM runs WHERE status = 'completed'`).Scan(&completed)
		c.Close(ctx)
		if err != nil {
			return costSample{}, err
		}
	} else {
		rep.Rawf(secCost, "%s: %s runs in %.2fs (%s runs/s); per run: node CPU %.1f µs, %.3f statements, %s B written, "+
			"%s allocations (%s B)", what, thousands(r.Completed), r.Seconds, num(s.rate), s.daemonCPU, s.statements,
			num(s.walBytes), num(s.allocObjects), num(s.allocBytes))
		db, err := sql.Open("sqlite", "file:"+sqlPath+"?_pragma=busy_timeout(30000)")
		if err != nil {
			return costSample{}, err
		}
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE status = 'completed'`).Scan(&completed)
		db.Close()
		if err != nil {
			return costSample{}, err
		}
	}
	if r.Capped || r.Completed != int64(runs) || completed != int64(runs) {
		rep.Failf(secCost, "%s: the probe completed %d of %d runs (capped: %v), the store shows %d completed",
			what, r.Completed, runs, r.Capped, completed)
	}
	return s, nil
}

// readServer reads the server's CPU and WAL position.
func readServer(ctx context.Context, admin *pgx.Conn, pm int) (serverState, error) {
	var st serverState
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&st.lsn); err != nil {
		return st, err
	}
	if pm > 0 {
		t, err := processTreeTicks(pm)
		if err != nil {
			return st, err
		}
		st.ticks = t
	}
	return st, nil
}

// rtProxy forwards TCP connections to a server and, while counting is
// set, counts round trips: each time a client sends after the server has
// sent on that connection (or first).
type rtProxy struct {
	ln       net.Listener
	target   string
	counting atomic.Bool
	turns    atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startProxy(target string) (*rtProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &rtProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *rtProxy) Addr() string { return p.ln.Addr().String() }

func (p *rtProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var last atomic.Int32 // 1: the client sent last; 2: the server
		p.wg.Add(2)
		go p.pump(c, s, &last, 1)
		go p.pump(s, c, &last, 2)
	}
}

func (p *rtProxy) pump(src, dst net.Conn, last *atomic.Int32, dir int32) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if prev := last.Swap(dir); dir == 1 && prev != 1 && p.counting.Load() {
				p.turns.Add(1)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close stops the proxy and its connections.
func (p *rtProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
