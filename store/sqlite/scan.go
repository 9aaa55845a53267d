package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// runColumns is the one column list of a run; scanRun reads it.
const runColumns = `id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
	not_after, created_at, started_at, finished_at, node, incarnation, exit_code, error, reason,
	dedup_id, rerun_of, payload, retry_json, cancel_requested, progress, progress_message, claimed_from,
	actor, cancelled_by, parent_run_id`

func scanRun(row rowscan.Scanner) (*jobs.Run, error) {
	var (
		r                                        jobs.Run
		scheduledAt, notBefore                   int64
		notAfter, createdAt, startedAt, finished sql.NullInt64
		exitCode                                 sql.NullInt64
		dedupID, rerunOf, claimedFrom, parent    sql.NullString
		retry                                    string
	)
	err := row.Scan(&r.ID, &r.Job, &r.Status, &r.Attempt, &r.MaxAttempts, &r.Trigger, &scheduledAt, &notBefore,
		&notAfter, &createdAt, &startedAt, &finished, &r.Node, &r.Incarnation, &exitCode, &r.Error, &r.Reason,
		&dedupID, &rerunOf, &r.Payload, &retry, &r.CancelRequested, &r.Progress, &r.ProgressMessage, &claimedFrom,
		&r.Actor, &r.CancelledBy, &parent)
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
	r.ParentRunID = parent.String
	if r.Retry, r.NoRetryExitCodes, err = store.DecodeRetry(retry); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &r, nil
}

// scanRuns reads every row of rows and closes them.
func scanRuns(rows *sql.Rows, err error) ([]*jobs.Run, error) {
	r, err := rowscan.SQL(rows, err)
	return rowscan.All(r, err, scanRun)
}

// queryStrings runs q and reads every row of its one text column.
func queryStrings(ctx context.Context, c conn, q string, args ...any) ([]string, error) {
	rows, err := rowscan.SQL(c.query(ctx, q, args...))
	return rowscan.All(rows, err, rowscan.String)
}

// collectCursors reads rows of rowscan.CursorColumns into by job, and closes
// them.
func collectCursors(rows *sql.Rows, err error, into map[string]*store.Cursor) error {
	r, err := rowscan.SQL(rows, err)
	cursors, err := rowscan.All(r, err, rowscan.Cursor[micros])
	for _, cur := range cursors {
		into[cur.Job] = cur
	}
	return err
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
