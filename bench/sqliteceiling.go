package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// The SQLite ceiling of figure 1: a bare claim-and-complete loop, plain
// SQL on one connection, on a file of the store's own schema (made by the
// store, the backlog inserted by it): what SQLite itself allows for the
// rows the engine must write per run, the claim's update of the run, and
// at the completion the run's update and its attempt's row.

// bareBatch is the runs per claim and per completion of the bare loop:
// figure 6's batch.
const bareBatch = shapeBatch

// bareParams are the connection's settings: the store writer's
// (WAL, synchronous=NORMAL, foreign keys, immediate transactions), but
// SQLite's own checkpoints instead of the store's checkpointer.
const bareParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"

const (
	sqlBareClaim = `UPDATE runs SET status = 'running', attempt = attempt + 1, node = 'bare', incarnation = 'bare',
		started_at = ?1, updated_at = ?1, reason = 'claimed', claimed_from = status
		WHERE id IN (SELECT id FROM runs WHERE job = ?2 AND status IN ('pending', 'retrying') AND not_before <= ?1
			ORDER BY not_before, created_at, id LIMIT ?3)
		RETURNING id`
	sqlBareComplete = `UPDATE runs SET status = 'completed', reason = 'succeeded', finished_at = ?1, updated_at = ?1
		WHERE id IN (SELECT value FROM json_each(?2))`
	sqlBareAttempts = `INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status,
			reason, claimed_from, end_node)
		SELECT id, attempt, node, incarnation, started_at, finished_at, status, reason, claimed_from, node
		FROM runs WHERE id IN (SELECT value FROM json_each(?1))`
)

// sqliteBare inserts runs runs with the store into a fresh file, then
// claims and completes them with the bare loop, and returns its rate.
func sqliteBare(ctx context.Context, e *env, label string, runs int) (float64, error) {
	b, err := e.newBackend(ctx, kindSQLite, "bare")
	if err != nil {
		return math.NaN(), err
	}
	defer b.close(context.WithoutCancel(ctx))
	st, err := b.open(ctx)
	if err != nil {
		return math.NaN(), err
	}
	d := &jobs.Definition{Name: "noop", Handler: func(context.Context) error { return nil }}
	d.WithDefaults()
	err = insertRuns(ctx, st, d, runs, time.Now())
	st.Close()
	if err != nil {
		return math.NaN(), err
	}
	db, err := sql.Open("sqlite", "file:"+b.path+"?"+bareParams)
	if err != nil {
		return math.NaN(), err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	start := time.Now()
	done := 0
	for done < runs {
		ids, err := bareClaim(ctx, db, d.Name)
		if err != nil {
			return math.NaN(), fmt.Errorf("claim: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		if err := bareComplete(ctx, db, ids); err != nil {
			return math.NaN(), fmt.Errorf("complete: %w", err)
		}
		done += len(ids)
	}
	took := time.Since(start)
	r := rate(int64(done), took)
	e.rep.Rawf(secThroughput, "SQLite, bare claim-and-complete loop%s: %s runs in %s = %s runs/s (claim %s, complete %s, one connection)",
		label, thousands(int64(done)), took.Round(time.Millisecond), num(r), thousands(bareBatch), thousands(bareBatch))
	var completed, attempts int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM runs WHERE status = 'completed'),
		(SELECT count(*) FROM attempts)`).Scan(&completed, &attempts); err != nil {
		return math.NaN(), err
	}
	if completed != int64(runs) || attempts != int64(runs) {
		e.rep.Failf(secThroughput, "SQLite, bare loop%s: %d runs completed and %d attempt rows, want %d", label,
			completed, attempts, runs)
	}
	return r, nil
}

// bareClaim claims a batch in one transaction and returns its ids.
func bareClaim(ctx context.Context, db *sql.DB, job string) ([]string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sqlBareClaim, time.Now().UnixMicro(), job, bareBatch)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ids, tx.Commit()
}

// bareComplete completes the runs of ids and writes their attempts' rows
// in one transaction.
func bareComplete(ctx context.Context, db *sql.DB, ids []string) error {
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, sqlBareComplete, time.Now().UnixMicro(), string(list)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlBareAttempts, string(list)); err != nil {
		return err
	}
	return tx.Commit()
}
