package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// pgbenchShapes are claim-and-complete pgbench scripts, batched 64 runs
// per claim and per completion, on schedulerd's own schema (made by its
// migrations): what the server can do with the rows schedulerd writes per
// run (the first, which the fraction compares with), with those it wrote
// before migration 007, with the runs rows alone, and with a hot path of
// one small queue table whose rows move at completion to a history table
// with the runs columns and three indexes (id; job, created; created).
// They say how far the schema, not the
// engine, is from the minimal queue of pgbenchScripts.
var pgbenchShapes = []struct {
	name  string
	queue bool // seeded into run_queue, the history row written at completion
	text  string
}{
	{"schedulerd's rows: runs (its indexes); at completion the attempt, which stands for both events", false, `BEGIN;
UPDATE runs SET status = 'running', attempt = attempt + 1, node = 'n' || :client_id, incarnation = 'i',
    started_at = now(), updated_at = now(), reason = 'claimed', claimed_from = status
  WHERE id IN (SELECT id FROM runs WHERE (status || '') IN ('pending', 'retrying') AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT 64 FOR UPDATE SKIP LOCKED);
COMMIT;
BEGIN;
WITH c AS (UPDATE runs SET status = 'completed', finished_at = now(), updated_at = now(), reason = 'succeeded', exit_code = 0,
    claimed_from = NULL
  WHERE node = 'n' || :client_id AND status = 'running' RETURNING id, attempt, started_at),
a AS (INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, reason,
    claimed_from, end_node)
  SELECT id, attempt, 'n' || :client_id, 'i', started_at, now(), 'completed', 0, 'succeeded', 'pending', 'n' || :client_id FROM c)
SELECT count(*) FROM c;
COMMIT;
`},
	{"before migration 007 (PostgreSQL): both events written as rows at completion", false, `BEGIN;
UPDATE runs SET status = 'running', attempt = attempt + 1, node = 'n' || :client_id, incarnation = 'i',
    started_at = now(), updated_at = now(), reason = 'claimed', claimed_from = status
  WHERE id IN (SELECT id FROM runs WHERE (status || '') IN ('pending', 'retrying') AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT 64 FOR UPDATE SKIP LOCKED);
COMMIT;
BEGIN;
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
	{"runs rows only (its indexes), no attempts, no events", false, `BEGIN;
UPDATE runs SET status = 'running', attempt = attempt + 1, node = 'n' || :client_id, incarnation = 'i',
    started_at = now(), updated_at = now(), reason = 'claimed'
  WHERE id IN (SELECT id FROM runs WHERE (status || '') IN ('pending', 'retrying') AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT 64 FOR UPDATE SKIP LOCKED);
COMMIT;
BEGIN;
UPDATE runs SET status = 'completed', finished_at = now(), updated_at = now(), reason = 'succeeded', exit_code = 0
  WHERE node = 'n' || :client_id AND status = 'running';
COMMIT;
`},
	{"a queue table claimed, its rows moved at completion to a history table of 3 indexes", true, `BEGIN;
UPDATE run_queue SET node = 'n' || :client_id, attempt = attempt + 1, started_at = now()
  WHERE id IN (SELECT id FROM run_queue WHERE node = '' AND not_before <= now()
    ORDER BY not_before, created_at, id LIMIT 64 FOR UPDATE SKIP LOCKED);
COMMIT;
BEGIN;
WITH d AS (DELETE FROM run_queue WHERE node = 'n' || :client_id RETURNING *)
INSERT INTO run_history (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before, created_at,
    started_at, finished_at, updated_at, node, incarnation, retry, reason, exit_code)
  SELECT id, job, 'completed', attempt, 3, 'manual', created_at, not_before, created_at,
    started_at, now(), now(), node, 'i', '{}', 'succeeded', 0 FROM d;
COMMIT;
`},
}

// pgbenchShapeRun runs one of pgbenchShapes with c clients on a fresh
// database with schedulerd's schema and returns the runs per second.
func pgbenchShapeRun(ctx context.Context, e *env, bin string, name string, queue bool, script string, clients int) (float64, error) {
	rep, o := e.rep, e.opts
	b, err := e.newBackend(ctx, kindPostgres, "pgshape") // the migrations make the schema
	if err != nil {
		return 0, err
	}
	defer b.close(context.WithoutCancel(ctx))
	const batch = 64
	perClient := max(4*o.sizes.pgbenchRuns/(clients*batch), 1)
	runs := perClient * clients * batch
	seed := runs + runs/10 + batch*clients
	setup := []string{fmt.Sprintf(`INSERT INTO runs (id, job, status, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, retry)
		SELECT lpad(g::text, 12, '0'), 'job-' || (g %% 100), 'pending', 3, 'manual', now(),
			now() - interval '1 minute' + g * interval '1 microsecond', now() - interval '1 minute' + g * interval '1 microsecond',
			now(), '{}' FROM generate_series(1, %d) g`, seed)}
	if queue {
		setup = []string{
			`CREATE TABLE run_queue (id text PRIMARY KEY, job text NOT NULL, not_before timestamptz NOT NULL,
				created_at timestamptz NOT NULL, node text NOT NULL DEFAULT '', attempt integer NOT NULL DEFAULT 0,
				started_at timestamptz) WITH (fillfactor = 70)`,
			`CREATE INDEX run_queue_due ON run_queue (not_before, created_at, id) WHERE node = ''`,
			`CREATE INDEX run_queue_node ON run_queue (node) WHERE node <> ''`,
			`CREATE TABLE run_history (LIKE runs INCLUDING DEFAULTS, PRIMARY KEY (id))`,
			`CREATE INDEX run_history_job_created ON run_history (job, created_at, id)`,
			`CREATE INDEX run_history_created ON run_history (created_at, id)`,
			fmt.Sprintf(`INSERT INTO run_queue (id, job, not_before, created_at)
				SELECT lpad(g::text, 12, '0'), 'job-' || (g %% 100), now() - interval '1 minute' + g * interval '1 microsecond',
					now() - interval '1 minute' + g * interval '1 microsecond' FROM generate_series(1, %d) g`, seed),
		}
	}
	for _, q := range append(setup, `VACUUM ANALYZE`) {
		if err := b.db.exec(ctx, q); err != nil {
			return 0, err
		}
	}
	tps, wall, err := pgbenchExec(ctx, bin, filepath.Join(e.dir, fmt.Sprintf("pgshape-%d.sql", time.Now().UnixNano())),
		script, b.dsn, clients, perClient)
	if err != nil {
		return 0, err
	}
	r := tps * batch
	rep.Rawf(secPgbench, "shape %s, %d clients: %s runs in %s (wall, with connections): %.0f tps x %d = %s runs/s",
		name, clients, thousands(int64(runs)), wall.Round(time.Millisecond), tps, batch, num(r))

	table := "runs"
	if queue {
		table = "run_history"
	}
	done, err := b.db.int(ctx, `SELECT COUNT(*) FROM `+table+` WHERE status = 'completed' AND attempt = 1`)
	if err != nil {
		return 0, err
	}
	left, err := b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status = 'running'`)
	if err != nil {
		return 0, err
	}
	if queue {
		if left, err = b.db.int(ctx, `SELECT COUNT(*) FROM run_queue WHERE node <> ''`); err != nil {
			return 0, err
		}
	}
	if done != int64(runs) || left != 0 {
		rep.Failf(secPgbench, "shape %s, %d clients: %d runs completed at attempt 1 (want %d), %d left claimed", name, clients, done, runs, left)
	}
	return r, nil
}
