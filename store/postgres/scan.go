package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// runColumns is the one column list of a run; scanRun reads it.
const runColumns = `id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
	not_after, created_at, started_at, finished_at, node, incarnation, exit_code, error, reason,
	dedup_id, rerun_of, payload, retry, cancel_requested, progress, progress_message, claimed_from`

// utc converts a nullable time to a time in UTC, zero for NULL.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func scanRun(row pgx.Row) (*jobs.Run, error) {
	var (
		r                                 jobs.Run
		status, trigger, reason, retry    string
		scheduledAt, notBefore, createdAt time.Time
		notAfter, startedAt, finishedAt   *time.Time
		exitCode                          *int32
		dedupID, rerunOf, claimedFrom     *string
		payload                           []byte
	)
	err := row.Scan(&r.ID, &r.Job, &status, &r.Attempt, &r.MaxAttempts, &trigger, &scheduledAt, &notBefore,
		&notAfter, &createdAt, &startedAt, &finishedAt, &r.Node, &r.Incarnation, &exitCode, &r.Error, &reason,
		&dedupID, &rerunOf, &payload, &retry, &r.CancelRequested, &r.Progress, &r.ProgressMessage, &claimedFrom)
	if err != nil {
		return nil, err
	}
	r.Status, r.Trigger, r.Reason = jobs.Status(status), jobs.Trigger(trigger), jobs.Reason(reason)
	r.ScheduledAt, r.NotBefore, r.CreatedAt = scheduledAt.UTC(), notBefore.UTC(), createdAt.UTC()
	r.NotAfter, r.StartedAt, r.FinishedAt = utc(notAfter), utc(startedAt), utc(finishedAt)
	if exitCode != nil {
		c := int(*exitCode)
		r.ExitCode = &c
	}
	if dedupID != nil {
		r.DedupID = *dedupID
	}
	if rerunOf != nil {
		r.RerunOf = *rerunOf
	}
	if claimedFrom != nil {
		r.ClaimedFrom = jobs.Status(*claimedFrom)
	}
	r.Payload = string(payload)
	if r.Retry, r.NoRetryExitCodes, err = store.DecodeRetry(retry); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &r, nil
}

// scanRuns reads every row of rows and closes them.
func scanRuns(rows pgx.Rows, err error) ([]*jobs.Run, error) {
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
const eventColumns = `run_id, time, node, attempt, from_status, to_status, reason, message`

func scanEvent(row pgx.Row) (*jobs.Event, error) {
	var (
		e          jobs.Event
		t          time.Time
		from       *string
		to, reason string
	)
	if err := row.Scan(&e.RunID, &t, &e.Node, &e.Attempt, &from, &to, &reason, &e.Message); err != nil {
		return nil, err
	}
	e.Time, e.To, e.Reason = t.UTC(), jobs.Status(to), jobs.Reason(reason)
	if from != nil {
		e.From = jobs.Status(*from)
	}
	return &e, nil
}

// attemptColumns is the one column list of an attempt; scanAttempt reads it.
const attemptColumns = `run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
	error, reason, output, output_bytes, truncated`

func scanAttempt(row pgx.Row) (*jobs.Attempt, error) {
	var (
		a              jobs.Attempt
		started        time.Time
		finished       *time.Time
		status, reason string
		exitCode       *int32
		output         []byte
	)
	err := row.Scan(&a.RunID, &a.Number, &a.Node, &a.Incarnation, &started, &finished, &status, &exitCode,
		&a.Error, &reason, &output, &a.OutputBytes, &a.Truncated)
	if err != nil {
		return nil, err
	}
	a.StartedAt, a.FinishedAt = started.UTC(), utc(finished)
	a.Status, a.Reason = jobs.Status(status), jobs.Reason(reason)
	if exitCode != nil {
		c := int(*exitCode)
		a.ExitCode = &c
	}
	a.Output = string(output)
	return &a, nil
}

// cursorColumns is the one column list of a cursor; scanCursor reads it.
const cursorColumns = `job, last, paused, skipped, last_skipped_at, updated_at`

func scanCursor(row pgx.Row) (*store.Cursor, error) {
	var (
		c             store.Cursor
		last, updated time.Time
		lastSkipped   *time.Time
	)
	if err := row.Scan(&c.Job, &last, &c.Paused, &c.Skipped, &lastSkipped, &updated); err != nil {
		return nil, err
	}
	c.Last, c.UpdatedAt, c.LastSkippedAt = last.UTC(), updated.UTC(), utc(lastSkipped)
	return &c, nil
}

// nodeColumns is the one column list of a node; scanNode reads it and,
// after it, the time to measure the node's age from.
const nodeColumns = `id, incarnation, host, pid, version, started_at, heartbeat_at, jobs`

func scanNode(row pgx.Row) (*store.Node, error) {
	var (
		n                       store.Node
		started, heartbeat, now time.Time
	)
	if err := row.Scan(&n.ID, &n.Incarnation, &n.Host, &n.PID, &n.Version, &started, &heartbeat, &n.Jobs, &now); err != nil {
		return nil, err
	}
	n.StartedAt, n.HeartbeatAt = started.UTC(), heartbeat.UTC()
	if len(n.Jobs) == 0 {
		n.Jobs = nil
	}
	n.Age = now.Sub(heartbeat)
	return &n, nil
}
