package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// pgbenchShapes are claim-and-complete pgbench scripts, batched
// shapeBatch runs per claim and per completion, on schedulerd's own schema (made by its
// migrations): what the server can do with the rows schedulerd writes per
// run (the first, which the fraction compares with), with the events
// written as rows at completion, with the runs rows alone, with a hot path of one
// small queue table whose rows move at completion to a history table with
// the runs columns and three indexes, and with the two ways of keeping the
// live runs apart that the product could take: a small queue table beside
// runs (the runs row written at insert and at completion only), and the
// live runs whole in a queue table with the indexes their reads need,
// moved at completion to a history table with those of the history. They
// say how far the schema, not the engine, is from the minimal queue of
// pgbenchScripts, and what a change of schema would give.
// shapeBatch and shapeClients are how the shapes run: as many runs per
// claim and per completion as the engine's batches hold in the burn-down
// (claims of about 1,250 runs, completions of up to 1,000), and two
// clients, as the engine's one claimer and its completers keep about two
// statements running on the server. More clients make the shapes dearer
// per run than the engine's statements are: each claim skips the runs
// the others hold, and each completion finds its runs among all running
// ones. (At 64 runs per batch and 8 clients, the first shape did 20,037
// runs/s on a host where it does 53,000-55,000 so.)
const (
	shapeBatch   = 1000
	shapeClients = 2
)

var pgbenchShapes = []struct {
	name  string
	setup []string // statements after the migrations; %[1]d is the number of runs to seed
	done  string   // the table whose rows completed at attempt 1 are counted
	left  string   // the rows left claimed, which must be none
	text  string
}{
	{"schedulerd's rows: runs (its indexes); at completion the attempt, which stands for both events", []string{seedRuns}, "runs", leftRuns, claimByStatus("runs") + `BEGIN;
WITH c AS (UPDATE runs SET status = 'completed', finished_at = now(), updated_at = now(), reason = 'succeeded', exit_code = 0,
    claimed_from = NULL
  WHERE node = 'n' || :client_id AND status = 'running' RETURNING id, attempt, started_at),
a AS (INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, reason,
    claimed_from, end_node)
  SELECT id, attempt, 'n' || :client_id, 'i', started_at, now(), 'completed', 0, 'succeeded', 'pending', 'n' || :client_id FROM c)
SELECT count(*) FROM c;
COMMIT;
`},
	{"events as rows (PostgreSQL): both events written as rows at completion", []string{seedRuns}, "runs", leftRuns, claimByStatus("runs") + `BEGIN;
WITH c AS (UPDATE runs SET status = 'completed', finished_at = now(), updated_at = now(), reason = 'succeeded', exit_code = 0,
    claimed_from = NULL
  WHERE node = 'n' || :client_id AND status = 'running' RETURNING id, attempt, started_at),
a AS (INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, reason)
  SELECT id, attempt, 'n' || :client_id, 'i', started_at, now(), 'completed', 0, 'succeeded' FROM c),
e AS (INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason)
  SELECT id, t, 'n' || :client_id, attempt, f, s, r FROM c
  CROSS JOIN LATERAL (VALUES (1, started_at, 'pending', 'running', 'claimed'), (2, now(), 'running', 'completed', 'succeeded'))
    v(k, t, f, s, r) ORDER BY id, k)
SELECT count(*) FROM c;
COMMIT;
`},
	{"runs rows only (its indexes), no attempts, no events", []string{seedRuns}, "runs", leftRuns, `BEGIN;
UPDATE runs SET status = 'running', attempt = attempt + 1, node = 'n' || :client_id, incarnation = 'i',
    started_at = now(), updated_at = now(), reason = 'claimed'
  WHERE id IN (SELECT id FROM runs WHERE (status || '') IN ('pending', 'retrying') AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT :batch FOR UPDATE SKIP LOCKED);
COMMIT;
BEGIN;
UPDATE runs SET status = 'completed', finished_at = now(), updated_at = now(), reason = 'succeeded', exit_code = 0
  WHERE node = 'n' || :client_id AND status = 'running';
COMMIT;
`},
	{"a queue table claimed, its rows moved at completion to a history table of 3 indexes", narrowQueue, "run_history",
		leftNarrow, claimNarrow + `BEGIN;
WITH d AS (DELETE FROM run_queue WHERE node = 'n' || :client_id RETURNING *)
INSERT INTO run_history (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before, created_at,
    started_at, finished_at, updated_at, node, incarnation, retry, reason, exit_code)
  SELECT id, job, 'completed', attempt, 3, 'manual', created_at, not_before, created_at,
    started_at, now(), now(), node, 'i', '{}', 'succeeded', 0 FROM d;
COMMIT;
`},
	{"a small queue table claimed beside runs; the runs row written at completion only, and the attempt",
		append([]string{seedRuns}, splitQueue...), "runs", leftNarrow, claimNarrow + `BEGIN;
WITH d AS (DELETE FROM run_queue WHERE node = 'n' || :client_id RETURNING id, attempt, started_at, node),
u AS (UPDATE runs r SET status = 'completed', attempt = d.attempt, started_at = d.started_at, finished_at = now(),
    updated_at = now(), node = d.node, incarnation = 'i', reason = 'succeeded', exit_code = 0 FROM d WHERE r.id = d.id),
a AS (INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, reason,
    claimed_from, end_node)
  SELECT id, attempt, node, 'i', started_at, now(), 'completed', 0, 'succeeded', 'pending', node FROM d)
SELECT count(*) FROM d;
COMMIT;
`},
	{"live runs whole in a queue table (its 8 indexes), moved at completion to history (5 indexes), and the attempt",
		liveQueue, "run_history", `SELECT COUNT(*) FROM run_queue WHERE status <> 'pending'`, claimByStatus("run_queue") + `BEGIN;
WITH d AS (DELETE FROM run_queue WHERE node = 'n' || :client_id AND status = 'running' RETURNING *),
h AS (INSERT INTO run_history (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before, not_after,
    created_at, started_at, finished_at, updated_at, node, incarnation, exit_code, error, reason, dedup_id, rerun_of,
    payload, retry, cancel_requested, progress, progress_message)
  SELECT id, job, 'completed', attempt, max_attempts, trigger_kind, scheduled_at, not_before, not_after,
    created_at, started_at, now(), now(), node, incarnation, 0, '', 'succeeded', dedup_id, rerun_of,
    payload, retry, false, progress, progress_message FROM d),
a AS (INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, reason,
    claimed_from, end_node)
  SELECT id, attempt, node, incarnation, started_at, now(), 'completed', 0, 'succeeded', claimed_from, node FROM d)
SELECT count(*) FROM d;
COMMIT;
`},
}

// claimByStatus is schedulerd's claim of :batch due runs by their status, on
// table (runs, or a queue table of its columns), as its own transaction:
// the shapes that claim so claim alike, and differ in what they write.
func claimByStatus(table string) string {
	return fmt.Sprintf(`BEGIN;
UPDATE %[1]s SET status = 'running', attempt = attempt + 1, node = 'n' || :client_id, incarnation = 'i',
    started_at = now(), updated_at = now(), reason = 'claimed', claimed_from = status
  WHERE id IN (SELECT id FROM %[1]s WHERE (status || '') IN ('pending', 'retrying') AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT :batch FOR UPDATE SKIP LOCKED);
COMMIT;
`, table)
}

// claimNarrow is the claim of :batch due rows of the small queue table
// (narrowTable), as its own transaction.
const claimNarrow = `BEGIN;
UPDATE run_queue SET node = 'n' || :client_id, attempt = attempt + 1, started_at = now()
  WHERE id IN (SELECT id FROM run_queue WHERE node = '' AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT :batch FOR UPDATE SKIP LOCKED);
COMMIT;
`

// The seeding and the extra tables of pgbenchShapes.
const (
	// seedRuns writes the pending runs, due a minute ago, oldest first
	// (a format: %[1]d is their number).
	seedRuns = `INSERT INTO runs (id, job, status, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, retry)
		SELECT lpad(g::text, 12, '0'), 'job-' || (g %% 100), 'pending', 3, 'manual', now(),
			now() - interval '1 minute' + g * interval '1 microsecond', now() - interval '1 minute' + g * interval '1 microsecond',
			now(), '{}' FROM generate_series(1, %[1]d) g`
	leftRuns   = `SELECT COUNT(*) FROM runs WHERE status = 'running'`
	leftNarrow = `SELECT COUNT(*) FROM run_queue WHERE node <> ''`
	// narrowTable is a queue of the few columns a claim needs.
	narrowTable = `CREATE TABLE run_queue (id text PRIMARY KEY, job text NOT NULL, not_before timestamptz NOT NULL,
			created_at timestamptz NOT NULL, node text NOT NULL DEFAULT '', attempt integer NOT NULL DEFAULT 0,
			started_at timestamptz) WITH (fillfactor = 70)`
	narrowDue  = `CREATE INDEX run_queue_due ON run_queue (not_before, created_at, id) WHERE node = ''`
	narrowNode = `CREATE INDEX run_queue_node ON run_queue (node) WHERE node <> ''`
)

var (
	// narrowQueue: the queue alone, its finished rows written to a
	// history table of the runs columns with three indexes.
	narrowQueue = []string{
		narrowTable, narrowDue, narrowNode,
		`CREATE TABLE run_history (LIKE runs INCLUDING DEFAULTS, PRIMARY KEY (id))`,
		`CREATE INDEX run_history_job_created ON run_history (job, created_at, id)`,
		`CREATE INDEX run_history_created ON run_history (created_at, id)`,
		`INSERT INTO run_queue (id, job, not_before, created_at)
			SELECT lpad(g::text, 12, '0'), 'job-' || (g %% 100), now() - interval '1 minute' + g * interval '1 microsecond',
				now() - interval '1 minute' + g * interval '1 microsecond' FROM generate_series(1, %[1]d) g`,
	}
	// splitQueue: the queue beside runs, one row per pending run (after
	// seedRuns).
	splitQueue = []string{
		narrowTable, narrowDue, narrowNode,
		`INSERT INTO run_queue (id, job, not_before, created_at) SELECT id, job, not_before, created_at FROM runs`,
	}
	// liveQueue: the live runs with every column of runs and the indexes
	// of runs that serve live runs (claim, due, running, active, dedup,
	// expiry, cancel requests), and a history table with those of runs
	// that serve finished ones (id; job, created; created; status,
	// created; finished).
	liveQueue = []string{
		`CREATE TABLE run_queue (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS, PRIMARY KEY (id)) WITH (fillfactor = 70)`,
		`CREATE INDEX run_queue_due ON run_queue (not_before, created_at, id, job) WHERE (status || '') IN ('pending', 'retrying')`,
		`CREATE INDEX run_queue_claim ON run_queue (job, not_before, created_at, id) WHERE status IN ('pending', 'retrying')`,
		`CREATE INDEX run_queue_running ON run_queue (job) WHERE status = 'running'`,
		`CREATE INDEX run_queue_job ON run_queue (job)`,
		`CREATE UNIQUE INDEX run_queue_dedup ON run_queue (job, dedup_id) WHERE dedup_id IS NOT NULL`,
		`CREATE INDEX run_queue_expire ON run_queue (not_after) WHERE status IN ('pending', 'retrying') AND not_after IS NOT NULL`,
		`CREATE INDEX run_queue_cancel ON run_queue (incarnation) WHERE cancel_requested`,
		`CREATE TABLE run_history (LIKE runs INCLUDING DEFAULTS, PRIMARY KEY (id))`,
		`CREATE INDEX run_history_job_created ON run_history (job, created_at, id)`,
		`CREATE INDEX run_history_created ON run_history (created_at, id)`,
		`CREATE INDEX run_history_status_created ON run_history (status, created_at, id) WHERE status NOT IN ('running', 'completed')`,
		`CREATE INDEX run_history_finished ON run_history (finished_at) WHERE finished_at IS NOT NULL`,
		strings.Replace(seedRuns, "INSERT INTO runs", "INSERT INTO run_queue", 1),
	}
)

// pgbenchShapeRun runs one of pgbenchShapes with c clients on a fresh
// database with schedulerd's schema and returns the runs per second.
func pgbenchShapeRun(ctx context.Context, e *env, bin string, name string, setup []string, doneTable, leftQuery, script string, clients int) (float64, error) {
	rep, o := e.rep, e.opts
	b, err := e.newBackend(ctx, kindPostgres, "pgshape") // the migrations make the schema
	if err != nil {
		return 0, err
	}
	defer b.close(context.WithoutCancel(ctx))
	const batch = shapeBatch
	script = fmt.Sprintf("\\set batch %d\n", batch) + script
	perClient := max(o.sizes.throughputRuns/(clients*batch), 1) // the burn-down's backlog, as the batched ceiling
	runs := perClient * clients * batch
	seed := runs + runs/10 + batch*clients
	for _, q := range append(slices.Clone(setup), `VACUUM ANALYZE`) {
		if strings.Contains(q, "%[1]d") {
			q = fmt.Sprintf(q, seed)
		}
		if err := b.db.exec(ctx, q); err != nil {
			return 0, err
		}
	}
	pass, err := pgbenchExec(ctx, bin, filepath.Join(e.dir, fmt.Sprintf("pgshape-%d.sql", time.Now().UnixNano())),
		script, b.dsn, clients, perClient, postmasterPID(ctx, b))
	if err != nil {
		return 0, err
	}
	r := pass.tps * batch
	rep.Rawf(secPgbench, "shape %s, %d clients: %s runs in %s (wall, with connections): %.0f tps x %d = %s runs/s; %s",
		name, clients, thousands(int64(runs)), pass.wall.Round(time.Millisecond), pass.tps, batch, num(r), pass.perRun(runs))

	done, err := b.db.int(ctx, `SELECT COUNT(*) FROM `+doneTable+` WHERE status = 'completed' AND attempt = 1`)
	if err != nil {
		return 0, err
	}
	left, err := b.db.int(ctx, leftQuery)
	if err != nil {
		return 0, err
	}
	if done != int64(runs) || left != 0 {
		rep.Failf(secPgbench, "shape %s, %d clients: %d runs completed at attempt 1 (want %d), %d left claimed", name, clients, done, runs, left)
	}
	return r, nil
}
