package rowscan

import (
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Time is a backend's destination for a time column: a pointer to T,
// which Scan fills, and UTC, which reads it: the time in UTC, zero for
// NULL. The decoders below take T as their type argument, and read the
// other columns into what pgx and database/sql both fill: a pointer (nil
// for NULL) for a nullable column, a string for a typed string.
type Time[T any] interface {
	*T
	UTC() time.Time
}

// EventColumns is the one column list of an event; Event reads it.
const EventColumns = `run_id, time, node, attempt, from_status, to_status, reason, message, actor`

// Event reads a row of EventColumns.
func Event[T any, PT Time[T]](row Scanner) (*jobs.Event, error) {
	var (
		e          jobs.Event
		t          T
		from       *string
		to, reason string
	)
	if err := row.Scan(&e.RunID, PT(&t), &e.Node, &e.Attempt, &from, &to, &reason, &e.Message, &e.Actor); err != nil {
		return nil, err
	}
	e.Time, e.To, e.Reason = PT(&t).UTC(), jobs.Status(to), jobs.Reason(reason)
	if from != nil {
		e.From = jobs.Status(*from)
	}
	return &e, nil
}

// AttemptColumns is the one column list of an attempt; Attempt reads it.
const AttemptColumns = `run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
	error, reason, output, output_bytes, truncated`

// Attempt reads a row of AttemptColumns.
func Attempt[T any, PT Time[T]](row Scanner) (*jobs.Attempt, error) {
	return attempt[T, PT](row)
}

// ClippedAttempt reads a row of AttemptColumns whose output is the part
// read first, followed by the part read last (a bytea or a blob) and the
// length of the output stored: store.Store's RunAttemptsClipped.
func ClippedAttempt[T any, PT Time[T]](row Scanner) (*store.ClippedAttempt, error) {
	var (
		tail []byte
		ca   store.ClippedAttempt
	)
	a, err := attempt[T, PT](row, &tail, &ca.StoredBytes)
	if err != nil {
		return nil, err
	}
	ca.Attempt, ca.Tail = *a, string(tail)
	return &ca, nil
}

// attempt reads the columns of AttemptColumns, and after them into extra.
func attempt[T any, PT Time[T]](row Scanner, extra ...any) (*jobs.Attempt, error) {
	var (
		a                 jobs.Attempt
		started, finished T
		status, reason    string
		exitCode          *int64
		output            []byte
	)
	err := row.Scan(append([]any{&a.RunID, &a.Number, &a.Node, &a.Incarnation, PT(&started), PT(&finished), &status, &exitCode,
		&a.Error, &reason, &output, &a.OutputBytes, &a.Truncated}, extra...)...)
	if err != nil {
		return nil, err
	}
	a.StartedAt, a.FinishedAt = PT(&started).UTC(), PT(&finished).UTC()
	a.Status, a.Reason = jobs.Status(status), jobs.Reason(reason)
	if exitCode != nil {
		c := int(*exitCode)
		a.ExitCode = &c
	}
	a.Output = string(output)
	return &a, nil
}

// CursorColumns is the one column list of a cursor; Cursor reads it.
const CursorColumns = `job, last, paused, skipped, last_skipped_at, updated_at`

// Cursor reads a row of CursorColumns.
func Cursor[T any, PT Time[T]](row Scanner) (*store.Cursor, error) {
	var (
		c                          store.Cursor
		last, lastSkipped, updated T
	)
	if err := row.Scan(&c.Job, PT(&last), &c.Paused, &c.Skipped, PT(&lastSkipped), PT(&updated)); err != nil {
		return nil, err
	}
	c.Last, c.LastSkippedAt, c.UpdatedAt = PT(&last).UTC(), PT(&lastSkipped).UTC(), PT(&updated).UTC()
	return &c, nil
}

// NotificationColumns is the one column list of a notification;
// Notification reads it.
const NotificationColumns = `id, notifier, job, event, run_id, payload, state, attempts, next_attempt_at,
	lease_node, lease_incarnation, lease_until, last_error, created_at, delivered_at`

// Notification reads a row of NotificationColumns.
func Notification[T any, PT Time[T]](row Scanner) (*store.Notification, error) {
	var (
		n                                  store.Notification
		event, state                       string
		next, leaseUntil, created, deliver T
	)
	err := row.Scan(&n.ID, &n.Notifier, &n.Job, &event, &n.RunID, &n.Payload, &state, &n.Attempts, PT(&next),
		&n.LeaseNode, &n.LeaseIncarnation, PT(&leaseUntil), &n.LastError, PT(&created), PT(&deliver))
	if err != nil {
		return nil, err
	}
	n.Event, n.State = jobs.NotifyEvent(event), store.NotificationState(state)
	n.NextAttemptAt, n.LeaseUntil = PT(&next).UTC(), PT(&leaseUntil).UTC()
	n.CreatedAt, n.DeliveredAt = PT(&created).UTC(), PT(&deliver).UTC()
	return &n, nil
}

// JobResultColumns is the one column list of a job's results; JobResult
// reads it.
const JobResultColumns = `job, last_success_at, last_failure_at`

// JobResult reads a row of JobResultColumns.
func JobResult[T any, PT Time[T]](row Scanner) (store.JobResult, error) {
	var (
		r                store.JobResult
		success, failure T
	)
	if err := row.Scan(&r.Job, PT(&success), PT(&failure)); err != nil {
		return store.JobResult{}, err
	}
	r.LastSuccess, r.LastFailure = PT(&success).UTC(), PT(&failure).UTC()
	return r, nil
}
