package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// runColumns is the one column list of a run; scanRun reads it.
const runColumns = `id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
	not_after, created_at, started_at, finished_at, node, incarnation, exit_code, error, reason,
	dedup_id, rerun_of, payload, retry_json, cancel_requested, progress, progress_message, claimed_from,
	actor, cancelled_by`

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRun(row scanner) (*jobs.Run, error) {
	var (
		r                                        jobs.Run
		scheduledAt, notBefore                   int64
		notAfter, createdAt, startedAt, finished sql.NullInt64
		exitCode                                 sql.NullInt64
		dedupID, rerunOf, claimedFrom            sql.NullString
		retry                                    string
	)
	err := row.Scan(&r.ID, &r.Job, &r.Status, &r.Attempt, &r.MaxAttempts, &r.Trigger, &scheduledAt, &notBefore,
		&notAfter, &createdAt, &startedAt, &finished, &r.Node, &r.Incarnation, &exitCode, &r.Error, &r.Reason,
		&dedupID, &rerunOf, &r.Payload, &retry, &r.CancelRequested, &r.Progress, &r.ProgressMessage, &claimedFrom,
		&r.Actor, &r.CancelledBy)
	if err != nil {
		return nil, err
	}
	r.ScheduledAt = time.UnixMicro(scheduledAt).UTC()
	r.NotBefore = time.UnixMicro(notBefore).UTC()
	r.NotAfter, r.CreatedAt, r.StartedAt, r.FinishedAt = goTime(notAfter), goTime(createdAt), goTime(startedAt), goTime(finished)
	if exitCode.Valid {
		c := int(exitCode.Int64)
		r.ExitCode = &c
	}
	r.DedupID, r.RerunOf, r.ClaimedFrom = dedupID.String, rerunOf.String, jobs.Status(claimedFrom.String)
	if r.Retry, r.NoRetryExitCodes, err = store.DecodeRetry(retry); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &r, nil
}

// scanRuns reads every row of rows and closes them.
func scanRuns(rows *sql.Rows, err error) ([]*jobs.Run, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var runs []*jobs.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// eventColumns is the one column list of an event; scanEvent reads it.
const eventColumns = `run_id, time, node, attempt, from_status, to_status, reason, message, actor`

func scanEvent(row scanner) (*jobs.Event, error) {
	var (
		e    jobs.Event
		t    int64
		from sql.NullString
	)
	if err := row.Scan(&e.RunID, &t, &e.Node, &e.Attempt, &from, &e.To, &e.Reason, &e.Message, &e.Actor); err != nil {
		return nil, err
	}
	e.Time = time.UnixMicro(t).UTC()
	e.From = jobs.Status(from.String)
	return &e, nil
}

// attemptColumns is the one column list of an attempt; scanAttempt reads it.
const attemptColumns = `run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
	error, reason, output, output_bytes, truncated`

// scanAttempt reads the columns of attemptColumns, and after them into
// extra.
func scanAttempt(row scanner, extra ...any) (*jobs.Attempt, error) {
	var (
		a        jobs.Attempt
		started  int64
		finished sql.NullInt64
		exitCode sql.NullInt64
		output   []byte
	)
	err := row.Scan(append([]any{&a.RunID, &a.Number, &a.Node, &a.Incarnation, &started, &finished, &a.Status, &exitCode,
		&a.Error, &a.Reason, &output, &a.OutputBytes, &a.Truncated}, extra...)...)
	if err != nil {
		return nil, err
	}
	a.StartedAt, a.FinishedAt = time.UnixMicro(started).UTC(), goTime(finished)
	if exitCode.Valid {
		c := int(exitCode.Int64)
		a.ExitCode = &c
	}
	a.Output = string(output)
	return &a, nil
}

// cursorColumns is the one column list of a cursor; scanCursor reads it.
const cursorColumns = `job, last, paused, skipped, last_skipped_at, updated_at`

func scanCursor(row scanner) (*store.Cursor, error) {
	var (
		c             store.Cursor
		last, updated int64
		lastSkipped   sql.NullInt64
	)
	if err := row.Scan(&c.Job, &last, &c.Paused, &c.Skipped, &lastSkipped, &updated); err != nil {
		return nil, err
	}
	c.Last, c.UpdatedAt = time.UnixMicro(last).UTC(), time.UnixMicro(updated).UTC()
	c.LastSkippedAt = goTime(lastSkipped)
	return &c, nil
}

// nodeColumns are the columns of a node (n) that scanNodes reads, then
// a part of its job list (node_jobs, j), or NULL.
const nodeColumns = `n.id, n.incarnation, n.host, n.pid, n.version, n.started_at, n.heartbeat_at`

// sqlNodesWithJobs reads nodes with their job lists, a row per part of a
// list (none: one row with NULL); a WHERE clause goes before its ORDER BY.
const (
	sqlNodesWithJobs = `SELECT ` + nodeColumns + `, j.jobs_json FROM nodes n LEFT JOIN node_jobs j ON j.node_id = n.id`
	sqlNodesOrder    = ` ORDER BY n.id, j.part`
)

// scanNodes reads rows of nodeColumns and a part into nodes, by id, each
// with its Age by now and the parts of its job list in order.
func scanNodes(rows *sql.Rows, now time.Time) ([]*store.Node, error) {
	defer rows.Close()
	var nodes []*store.Node
	for rows.Next() {
		var (
			n                  store.Node
			started, heartbeat int64
			part               sql.NullString
		)
		if err := rows.Scan(&n.ID, &n.Incarnation, &n.Host, &n.PID, &n.Version, &started, &heartbeat, &part); err != nil {
			return nil, err
		}
		if len(nodes) == 0 || nodes[len(nodes)-1].ID != n.ID {
			n.StartedAt, n.HeartbeatAt = time.UnixMicro(started).UTC(), time.UnixMicro(heartbeat).UTC()
			n.Age, n.Jobs = now.Sub(n.HeartbeatAt), []string{}
			nodes = append(nodes, &n)
		}
		if !part.Valid {
			continue
		}
		var names []string
		if err := json.Unmarshal([]byte(part.String), &names); err != nil {
			return nil, fmt.Errorf("node %s: jobs: %w", n.ID, err)
		}
		last := nodes[len(nodes)-1]
		last.Jobs = append(last.Jobs, names...)
	}
	return nodes, rows.Err()
}
