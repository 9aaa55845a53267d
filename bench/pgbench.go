package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

const secPgbench = "6 database ceiling"

// pgbenchScripts are the minimal claim-and-complete of a run, as pgbench
// scripts over a minimal queue table: per run (one claim and one completion
// statement, each its own transaction), and batched: 64 at a time, and as
// many as the shapes (shapeBatch, the size of the engine's batches).
var pgbenchScripts = []pgbenchScript{
	{"per run: claim 1, complete 1", 1, `UPDATE bench_q SET status = 'running', attempt = attempt + 1, started_at = now(), node = 'pgbench'
  WHERE id = (SELECT id FROM bench_q WHERE status = 'pending' AND not_before <= now()
    ORDER BY not_before, id LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING id AS claimed \gset
UPDATE bench_q SET status = 'completed', finished_at = now() WHERE id = :claimed AND status = 'running';
`},
	batchedScript(64),
	batchedScript(shapeBatch),
}

// pgbenchScript is a pgbench script that does batch runs per transaction
// of its first statement.
type pgbenchScript struct {
	name  string
	batch int
	text  string
}

// batchedScript claims n rows in one statement and completes them in
// another.
func batchedScript(n int) pgbenchScript {
	return pgbenchScript{fmt.Sprintf("batched: claim %d, complete %d", n, n), n, fmt.Sprintf(`WITH c AS (SELECT id FROM bench_q WHERE status = 'pending' AND not_before <= now()
    ORDER BY not_before, id LIMIT %d FOR UPDATE SKIP LOCKED),
  u AS (UPDATE bench_q q SET status = 'running', attempt = q.attempt + 1, started_at = now(), node = 'pgbench'
    FROM c WHERE q.id = c.id RETURNING q.id)
  SELECT string_agg(id::text, ',') AS claimed FROM u \gset
UPDATE bench_q SET status = 'completed', finished_at = now() WHERE id IN (:claimed) AND status = 'running';
`, n)}
}

// shapeTries is how many times each of pgbenchShapes runs; the best rate
// counts.
const shapeTries = 2

// runPgbench is figure 6: the database's own ceiling for the minimal
// claim-and-complete, measured with pgbench on the same server.
func runPgbench(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	rep.Section(secPgbench)
	if !slices.Contains(o.stores, kindPostgres) {
		rep.Note(secPgbench, "Not measured: it needs PostgreSQL.")
		return nil
	}
	if _, err := e.postgres(); err != nil {
		return err
	}
	bin, err := pgbenchPath()
	if err != nil {
		return err
	}
	clients := []int{o.sizes.pgbenchClients, 2 * o.sizes.pgbenchClients}
	rep.Note(secPgbench, "Method: pgbench (`-n -M simple -j %d`, %v clients, a fixed number of transactions per "+
		"client) on the same PostgreSQL server, over a minimal queue table `bench_q (id bigint primary key, "+
		"status, attempt, not_before, started_at, finished_at, node)` with a partial index on the pending rows "+
		"(not_before, id), seeded with the runs to do plus 10%%. Per run: one statement claims the oldest due "+
		"row (FOR UPDATE SKIP LOCKED) and one completes it, each its own transaction, as schedulerd's separate "+
		"claim and completion are. Batched: 64 rows per claim and per completion, and %s, the size of the "+
		"engine's batches in figure 1 (its claims take about 1,250 runs, its completions up to 1,000): a "+
		"statement's own cost is then shared by that many runs. No history, no events, no attempts table: the "+
		"least a durable claim-and-complete can write. A per-run pass does %s runs; a batched pass (and each "+
		"shape below) %s, figure 1's backlog, as passes slow down the longer they run. The rate is pgbench's "+
		"tps (without connection time) times the batch. The fractions compare schedulerd's 1-node and 2-node "+
		"PostgreSQL throughput of figure 1 (same run, quiet host) with the best of these.",
		min(runtime.NumCPU(), o.sizes.pgbenchClients), clients, thousands(shapeBatch),
		thousands(int64(o.sizes.pgbenchRuns)), thousands(int64(o.sizes.throughputRuns)))
	rep.Note(secPgbench, "Checks: exactly the expected number of rows completed, each at attempt 1, none left running.")

	best := map[int]float64{} // by batch
	var errs []error
	for _, sc := range pgbenchScripts {
		for _, c := range clients {
			r, err := pgbenchRun(ctx, e, secPgbench, bin, sc.name, sc.text, sc.batch, c)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s, %d clients: %w", sc.name, c, err))
				continue
			}
			best[sc.batch] = max(best[sc.batch], r)
		}
		if b := best[sc.batch]; b > 0 {
			rep.Add(Figure{Section: secPgbench, Name: "pgbench ceiling, " + sc.name, Store: "PostgreSQL", Value: b, Unit: "runs/s"})
		}
	}
	rep.Note(secPgbench, "Shapes: the same pgbench method, %s runs per claim and per completion as the engine's "+
		"batches, %d clients (the engine keeps about two statements running: its one claimer and its "+
		"completers; with more clients each claim skips the runs the others hold and each completion finds its "+
		"runs among all running ones, which the engine's statements do not), on schedulerd's own schema (made by "+
		"its migrations, seeded with pending runs): the claim and completion statements shaped as schedulerd's "+
		"writes per run (the runs update at claim and at completion, with its indexes; at completion an attempts "+
		"row, which also stands for the claim's and the completion's events), the same with both events written "+
		"as rows of events at completion, the runs updates alone, a hot path of one "+
		"small queue table (claimed rows updated, "+
		"deleted at completion and written as finished history to a table of the runs columns with three "+
		"indexes: id; job, created; created; no attempts or events rows), and the two ways the product could keep "+
		"its live runs apart, each with the attempt row at completion: a small queue table of the claim's columns "+
		"beside runs, whose runs row is then written at insert and at completion only (not at the claim); and "+
		"the live runs whole (every runs column) in a queue table with the 8 indexes of runs that serve live runs, "+
		"moved at completion to a history table with the 5 that serve finished ones (id; job, created; created; "+
		"status, created; finished). What the "+
		"schema lets the server do, without the engine; the fraction compares schedulerd's 1-node throughput.",
		thousands(shapeBatch), shapeClients)
	rep.Note(secPgbench, "Each shape runs %d times, each on a fresh database, and the best rate counts, as for "+
		"the ceilings: single passes vary widely (at 64 runs per batch and 8 clients, two runs of the same code had 12,756 and 21,029 runs/s for "+
		"the first shape, 25,994 and 17,494 for the runs-only one).", shapeTries)
	var shaped float64
	for i, sh := range pgbenchShapes {
		var r float64
		for range shapeTries {
			got, err := pgbenchShapeRun(ctx, e, bin, sh.name, sh.setup, sh.done, sh.left, sh.text, shapeClients)
			if err != nil {
				errs = append(errs, fmt.Errorf("shape %s: %w", sh.name, err))
				continue
			}
			r = max(r, got)
		}
		if r == 0 {
			continue
		}
		if i == 0 {
			shaped = r
		}
		rep.Add(Figure{Section: secPgbench, Name: "pgbench, schedulerd's schema: " + sh.name, Store: "PostgreSQL", Value: r, Unit: "runs/s"})
	}
	if got, ok := e.result(fmt.Sprintf("throughput/%s/1", kindPostgres)); ok && shaped > 0 {
		rep.Add(Figure{Section: secPgbench, Name: "schedulerd 1-node throughput / its rows' ceiling", Store: "PostgreSQL",
			Value: 100 * got / shaped, Unit: "%", Text: fmt.Sprintf("%.1f%% (%s of %s runs/s)", 100*got/shaped, num(got), num(shaped))})
	}

	ceiling := 0.0
	for _, r := range best {
		ceiling = max(ceiling, r)
	}
	for _, nodes := range []int{1, 2} {
		got, ok := e.result(fmt.Sprintf("throughput/%s/%d", kindPostgres, nodes))
		if !ok || ceiling == 0 {
			continue
		}
		per := ""
		if best[1] > 0 {
			per = fmt.Sprintf("; %.1f%% of the per-run ceiling", 100*got/best[1])
		}
		rep.Add(Figure{Section: secPgbench, Name: fmt.Sprintf("schedulerd %d-node throughput / best ceiling", nodes),
			Store: "PostgreSQL", Value: 100 * got / ceiling, Unit: "%",
			Text: fmt.Sprintf("%.1f%% (%s of %s runs/s%s)", 100*got/ceiling, num(got), num(ceiling), per)})
	}
	if _, ok := e.result(fmt.Sprintf("throughput/%s/1", kindPostgres)); !ok {
		rep.Note(secPgbench, "The throughput section did not run with this one: no fraction.")
	}
	return errors.Join(errs...)
}

// pgbenchPath finds pgbench next to the server binaries.
func pgbenchPath() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	return "", errors.New("pgbench not found (pg_config --bindir)")
}

var tpsRE = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbenchRun runs one script with c clients on a fresh database and returns
// the runs per second; its raw line and check go to section.
func pgbenchRun(ctx context.Context, e *env, section, bin, name, script string, batch, clients int) (float64, error) {
	rep, o := e.rep, e.opts
	dsn, err := e.newDatabase(ctx, "pgbench")
	if err != nil {
		return 0, err
	}
	defer e.dropDatabase(context.WithoutCancel(ctx), dsn)
	b := &backend{kind: kindPostgres, dsn: dsn}
	if b.db, err = openInspector(ctx, b); err != nil {
		return 0, err
	}
	defer b.db.close()
	// Batched, the pass is the burn-down's backlog: passes slow down as
	// they go on (dead rows), so the fraction compares equal work.
	total := o.sizes.pgbenchRuns
	if batch > 1 {
		total = o.sizes.throughputRuns
	}
	perClient := max(total/(clients*batch), 1)
	runs := perClient * clients * batch
	for _, q := range []string{
		`CREATE TABLE bench_q (id bigint PRIMARY KEY, status text NOT NULL, attempt integer NOT NULL DEFAULT 0,
			not_before timestamptz NOT NULL, started_at timestamptz, finished_at timestamptz, node text)`,
		`CREATE INDEX bench_q_due ON bench_q (not_before, id) WHERE status = 'pending'`,
		fmt.Sprintf(`INSERT INTO bench_q (id, status, not_before) SELECT g, 'pending', now() - interval '1 minute' + g * interval '1 microsecond'
			FROM generate_series(1, %d) g`, runs+runs/10+batch*clients),
		`ANALYZE bench_q`,
	} {
		if err := b.db.exec(ctx, q); err != nil {
			return 0, err
		}
	}
	pass, err := pgbenchExec(ctx, bin, filepath.Join(e.dir, fmt.Sprintf("pgbench-%d.sql", batch)), script, dsn, clients, perClient,
		postmasterPID(ctx, b))
	if err != nil {
		return 0, err
	}
	r := pass.tps * float64(batch)
	rep.Rawf(section, "%s, %d clients: %s runs in %s (wall, with connections): %.0f tps x %d = %s runs/s; %s",
		name, clients, thousands(int64(runs)), pass.wall.Round(time.Millisecond), pass.tps, batch, num(r), pass.perRun(runs))

	done, err := b.db.int(ctx, `SELECT COUNT(*) FROM bench_q WHERE status = 'completed'`)
	if err != nil {
		return 0, err
	}
	bad, err := b.db.int(ctx, `SELECT COUNT(*) FROM bench_q WHERE status = 'running' OR (status = 'completed' AND attempt <> 1)`)
	if err != nil {
		return 0, err
	}
	if done != int64(runs) || bad != 0 {
		rep.Failf(section, "%s, %d clients: %d rows completed (want %d), %d running or at attempt > 1", name, clients, done, runs, bad)
	}
	return r, nil
}

// pgbenchPass is what one pgbench command did.
type pgbenchPass struct {
	tps    float64       // pgbench's tps without connection time
	wall   time.Duration // the whole command, with connections
	client time.Duration // pgbench's own CPU time
	server time.Duration // the server's CPU time over the command (0: unknown)
}

// perRun describes the CPU each run cost the server and pgbench.
func (p pgbenchPass) perRun(runs int) string {
	if runs <= 0 {
		return ""
	}
	s := fmt.Sprintf("pgbench CPU %.1f µs/run", float64(p.client.Microseconds())/float64(runs))
	if p.server > 0 {
		s = fmt.Sprintf("server CPU %.1f µs/run (%.2f cores), ", float64(p.server.Microseconds())/float64(runs),
			p.server.Seconds()/p.wall.Seconds()) + s
	}
	return s
}

// pgbenchExec writes script to path and runs it with pgbench on dsn:
// clients clients, perClient transactions each. postmaster is the server's
// process, whose tree's CPU time is measured over the command (0: none).
func pgbenchExec(ctx context.Context, bin, path, script, dsn string, clients, perClient, postmaster int) (pgbenchPass, error) {
	var p pgbenchPass
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return p, err
	}
	threads := min(clients, runtime.NumCPU())
	cmd := exec.CommandContext(ctx, bin, "-n", "-M", "simple", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(threads),
		"-t", strconv.Itoa(perClient), "-f", path, dsn)
	var pg0 int64
	if postmaster > 0 {
		pg0, _ = processTreeTicks(postmaster)
	}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	p.wall = time.Since(t0)
	if postmaster > 0 && pg0 > 0 {
		if t, err := processTreeTicks(postmaster); err == nil && t > pg0 {
			p.server = time.Duration(t-pg0) * time.Second / clockTicks
		}
	}
	if cmd.ProcessState != nil {
		p.client = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return p, fmt.Errorf("pgbench: %w: %s", err, tail(out))
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		return p, fmt.Errorf("pgbench: no tps in its output: %s", tail(out))
	}
	p.tps, _ = strconv.ParseFloat(string(m[1]), 64)
	return p, nil
}

// tail returns the end of a command's output, for errors.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 1500 {
		s = "..." + s[len(s)-1500:]
	}
	return s
}
