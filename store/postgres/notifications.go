package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

const notificationColumns = `id, notifier, job, event, run_id, payload, state, attempts, next_attempt_at,
	lease_node, lease_incarnation, lease_until, last_error, created_at, delivered_at`

func scanNotification(row pgx.Row) (*store.Notification, error) {
	var (
		n                     store.Notification
		leaseUntil, delivered *time.Time
		event, state          string
	)
	err := row.Scan(&n.ID, &n.Notifier, &n.Job, &event, &n.RunID, &n.Payload, &state, &n.Attempts, &n.NextAttemptAt,
		&n.LeaseNode, &n.LeaseIncarnation, &leaseUntil, &n.LastError, &n.CreatedAt, &delivered)
	if err != nil {
		return nil, err
	}
	n.Event, n.State = jobs.NotifyEvent(event), store.NotificationState(state)
	n.NextAttemptAt, n.CreatedAt = n.NextAttemptAt.UTC(), n.CreatedAt.UTC()
	if leaseUntil != nil {
		n.LeaseUntil = leaseUntil.UTC()
	}
	if delivered != nil {
		n.DeliveredAt = delivered.UTC()
	}
	return &n, nil
}

func scanNotifications(rows pgx.Rows, err error) ([]*store.Notification, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Notification
	for rows.Next() {
		n, err := scanNotification(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// NotificationsClaim leases due notifications; see store.Notifications.
// Nodes claiming at once skip each other's rows (SKIP LOCKED).
func (s *Store) NotificationsClaim(ctx context.Context, p store.NotificationsClaimParams) ([]*store.Notification, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []*store.Notification
	err := s.writeOne(ctx, "claim notifications", func(c *conn) (err error) {
		out, err = scanNotifications(c.query(ctx, `WITH due AS (
				SELECT id FROM notifications
				WHERE state = 'pending' AND next_attempt_at <= COALESCE($1::timestamptz, now())
					AND (lease_until IS NULL OR lease_until <= COALESCE($1::timestamptz, now()))
				ORDER BY next_attempt_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
			UPDATE notifications n SET lease_node = $2, lease_incarnation = $3,
				lease_until = COALESCE($1::timestamptz, now()) + $5::interval
			FROM due WHERE n.id = due.id
			RETURNING `+qualified("n", notificationColumns),
			ts(p.Now), p.Node, p.Incarnation, p.Limit, p.Lease))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *store.Notification) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// NotificationFinish records a delivery attempt; see store.Notifications.
func (s *Store) NotificationFinish(ctx context.Context, p store.NotificationFinishParams) error {
	return s.writeOne(ctx, "finish notification", func(c *conn) error {
		var (
			state string
			ok    bool
		)
		var err error
		if p.Delivered {
			err = c.queryRow(ctx, `WITH cur AS (SELECT id, state FROM notifications WHERE id = $1),
				upd AS (UPDATE notifications SET state = 'delivered', attempts = attempts + 1,
					delivered_at = COALESCE($2::timestamptz, now()), lease_node = '', lease_incarnation = '',
					lease_until = NULL, last_error = ''
					WHERE id = $1 AND state = 'pending' RETURNING id)
				SELECT cur.state, EXISTS (SELECT 1 FROM upd) FROM cur`, p.ID, ts(p.Now)).Scan(&state, &ok)
		} else {
			next := store.NotificationPending
			if p.Failed {
				next = store.NotificationFailed
			}
			err = c.queryRow(ctx, `WITH cur AS (SELECT id, state FROM notifications WHERE id = $1),
				upd AS (UPDATE notifications SET state = $3, attempts = attempts + 1,
					next_attempt_at = COALESCE($4::timestamptz, now()), lease_node = '', lease_incarnation = '',
					lease_until = NULL, last_error = $5
					WHERE id = $1 AND state = 'pending' AND lease_incarnation = $2 RETURNING id)
				SELECT cur.state, EXISTS (SELECT 1 FROM upd) FROM cur`,
				p.ID, p.Incarnation, string(next), ts(p.NextAttemptAt), cleanText(clipError(p.Error))).Scan(&state, &ok)
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("notification %s: %w", p.ID, store.ErrNotFound)
		case err != nil:
			return err
		case ok || p.Delivered:
			return nil // a delivery found delivered before: once is enough
		}
		return fmt.Errorf("%w: notification %s is %s and no longer leased to %s", store.ErrFenced, p.ID, state, p.Incarnation)
	})
}

// clipError bounds a stored delivery error.
func clipError(s string) string {
	const max = 2048
	if len(s) > max {
		return s[:max]
	}
	return s
}

// NotificationsRelease ends the leases of node's other incarnations.
func (s *Store) NotificationsRelease(ctx context.Context, p store.NotificationsReleaseParams) (int, error) {
	var n int64
	err := s.writeOne(ctx, "release notifications", func(c *conn) error {
		tag, err := c.exec(ctx, `UPDATE notifications SET lease_node = '', lease_incarnation = '', lease_until = NULL
			WHERE state = 'pending' AND lease_node = $1 AND lease_incarnation <> $2 AND lease_until IS NOT NULL`, p.Node, p.Incarnation)
		n = tag.RowsAffected()
		if n > 0 {
			c.wake()
		}
		return err
	})
	return int(n), err
}

// NotificationsList returns notifications, newest first.
func (s *Store) NotificationsList(ctx context.Context, f store.NotificationFilter) ([]*store.Notification, error) {
	out, err := scanNotifications(s.read().query(ctx, `SELECT `+notificationColumns+` FROM notifications
		WHERE ($1 = '' OR state = $1) AND ($2 = '' OR job = $2)
		ORDER BY created_at DESC, id DESC LIMIT $3`, string(f.State), f.Job, f.ListLimit()))
	if err != nil {
		return nil, fail("list notifications", err)
	}
	return out, nil
}

// NotificationsNextDue returns when the first pending notification is due.
func (s *Store) NotificationsNextDue(ctx context.Context) (time.Time, error) {
	var next *time.Time
	err := s.read().queryRow(ctx, `SELECT min(GREATEST(next_attempt_at, lease_until)) FROM notifications
		WHERE state = 'pending'`).Scan(&next)
	if err != nil {
		return time.Time{}, fail("notifications next due", err)
	}
	if next == nil {
		return time.Time{}, nil
	}
	return next.UTC(), nil
}

// NotificationsPrune deletes finished notifications made before before.
func (s *Store) NotificationsPrune(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	var n int64
	err := s.writeOne(ctx, "prune notifications", func(c *conn) error {
		tag, err := c.exec(ctx, `DELETE FROM notifications WHERE created_at < $1 AND state IN ('delivered', 'failed')`, ts(before))
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// JobNotifyStates returns the notification states of the named jobs.
func (s *Store) JobNotifyStates(ctx context.Context, jobNames []string) (map[string]*store.JobNotifyState, error) {
	out, err := jobNotifyStates(ctx, s.read(), jobNames, false)
	if err != nil {
		return nil, fail("job notify states", err)
	}
	return out, nil
}

// jobNotifyStates reads the states of the named jobs; with lock, under
// their row locks, made first when missing, in the order of their names
// so that concurrent transactions never deadlock.
func jobNotifyStates(ctx context.Context, c *conn, jobNames []string, lock bool) (map[string]*store.JobNotifyState, error) {
	out := map[string]*store.JobNotifyState{}
	if len(jobNames) == 0 {
		return out, nil
	}
	names := slices.Compact(slices.Sorted(slices.Values(jobNames)))
	q := `SELECT job, failing_since, overdue_since, told FROM job_notify WHERE job = ANY($1::text[]) ORDER BY job`
	if lock {
		if _, err := c.exec(ctx, `INSERT INTO job_notify (job) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING`, textsOf(names)); err != nil {
			return nil, err
		}
		q += ` FOR UPDATE`
	}
	rows, err := c.query(ctx, q, textsOf(names))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			st               store.JobNotifyState
			failing, overdue *time.Time
			told             map[string]time.Time
		)
		if err := rows.Scan(&st.Job, &failing, &overdue, &told); err != nil {
			return nil, err
		}
		if failing != nil {
			st.FailingSince = failing.UTC()
		}
		if overdue != nil {
			st.OverdueSince = overdue.UTC()
		}
		st.Told = make(map[string]time.Time, len(told))
		for k, v := range told {
			st.Told[k] = v.UTC()
		}
		out[st.Job] = &st
	}
	return out, rows.Err()
}

// writeNotifications decides, in the transaction of the transitions trs
// whose results are results, which notifications they make (the targets
// each carries), and writes them with the jobs' new states, waking the
// nodes' deliveries. Transitions without targets cost nothing.
func writeNotifications(ctx context.Context, c *conn, trs []jobs.Transition, results []store.TransitionResult) error {
	var jobNames []string
	for i, t := range trs {
		if t.Notify != nil && results[i].Err == nil && results[i].Run != nil {
			jobNames = append(jobNames, results[i].Run.Job)
		}
	}
	if len(jobNames) == 0 {
		return nil
	}
	states, err := jobNotifyStates(ctx, c, jobNames, true)
	if err != nil {
		return err
	}
	var at time.Time
	if err := c.queryRow(ctx, `SELECT now()`).Scan(&at); err != nil {
		return err
	}
	at = at.UTC()
	changed := map[string]bool{}
	var b pgx.Batch
	for i, t := range trs {
		run := results[i].Run
		if t.Notify == nil || results[i].Err != nil || run == nil {
			continue
		}
		st := states[run.Job]
		if st == nil {
			st = &store.JobNotifyState{Job: run.Job}
			states[run.Job] = st
		}
		when := at
		if !t.Time.IsZero() {
			when = t.Time.UTC().Truncate(time.Microsecond)
		}
		for _, e := range store.TransitionEvents(run, t) {
			before := *st
			before.Told = maps.Clone(st.Told)
			ns, err := store.DecideNotifications(st, e, t.Notify, store.RunPayload(run, t.Node), when)
			if err != nil {
				return err
			}
			for _, n := range ns {
				b.Queue(`INSERT INTO notifications (id, notifier, job, event, run_id, payload, state, next_attempt_at, created_at)
					VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)`,
					n.ID, n.Notifier, n.Job, string(n.Event), n.RunID, n.Payload, ts(n.NextAttemptAt), ts(n.CreatedAt))
				c.wake()
			}
			if !sameNotifyState(&before, st) {
				changed[run.Job] = true
			}
		}
	}
	for _, job := range slices.Sorted(maps.Keys(changed)) {
		st := states[job]
		told, err := json.Marshal(st.Told)
		if err != nil {
			return err
		}
		b.Queue(`UPDATE job_notify SET failing_since = $2, overdue_since = $3, told = $4::jsonb WHERE job = $1`,
			job, ts(st.FailingSince), ts(st.OverdueSince), string(told))
	}
	return c.send(ctx, &b)
}

// JobOverdue makes a job overdue once; see store.Notifications. The
// job's state row, locked, makes concurrent calls of the nodes take turns:
// the first makes it overdue, the others find it so.
func (s *Store) JobOverdue(ctx context.Context, p store.JobOverdueParams) (*store.JobNotifyState, bool, error) {
	var (
		st   *store.JobNotifyState
		made bool
	)
	err := s.write(ctx, "job overdue", func(c *conn) error {
		made = false
		states, err := jobNotifyStates(ctx, c, []string{p.Job}, true)
		if err != nil {
			return err
		}
		st = states[p.Job]
		if !st.OverdueSince.IsZero() {
			return nil
		}
		if p.Retired {
			if ok, err := expected(ctx, c, p.Job); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("expectation of job %q: %w", p.Job, store.ErrNotFound)
			}
		}
		var (
			last *time.Time
			at   time.Time
		)
		err = c.queryRow(ctx, `SELECT (SELECT last_success_at FROM job_results WHERE job = $1), COALESCE($2::timestamptz, now())`,
			p.Job, ts(p.Now)).Scan(&last, &at)
		if err != nil {
			return err
		}
		var lastSuccess time.Time
		if last != nil {
			lastSuccess = last.UTC()
		}
		at = at.UTC()
		if !p.Due(lastSuccess, at) {
			return nil
		}
		ns, err := store.DecideNotifications(st, jobs.EventOverdue, p.Notify, store.OverduePayload(p, lastSuccess), at)
		if err != nil {
			return err
		}
		told, err := json.Marshal(st.Told)
		if err != nil {
			return err
		}
		var b pgx.Batch
		for _, n := range ns {
			b.Queue(`INSERT INTO notifications (id, notifier, job, event, run_id, payload, state, next_attempt_at, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)`,
				n.ID, n.Notifier, n.Job, string(n.Event), n.RunID, n.Payload, ts(n.NextAttemptAt), ts(n.CreatedAt))
			c.wake()
		}
		b.Queue(`UPDATE job_notify SET failing_since = $2, overdue_since = $3, told = $4::jsonb WHERE job = $1`,
			p.Job, ts(st.FailingSince), ts(st.OverdueSince), string(told))
		made = true
		return c.send(ctx, &b)
	})
	if err != nil {
		return nil, false, err
	}
	return st, made, nil
}

func sameNotifyState(a, b *store.JobNotifyState) bool {
	return a.FailingSince.Equal(b.FailingSince) && a.OverdueSince.Equal(b.OverdueSince) &&
		maps.EqualFunc(a.Told, b.Told, time.Time.Equal)
}

// writeSkipped writes the skipped notifications of the fires ps, whose
// results are results, in their transaction.
func writeSkipped(ctx context.Context, c *conn, ps []store.FireParams, results []*store.FireResult) error {
	var (
		b  pgx.Batch
		at time.Time
	)
	for i, p := range ps {
		if p.Notify == nil || results[i] == nil {
			continue
		}
		when := p.Now
		if when.IsZero() {
			if at.IsZero() {
				if err := c.queryRow(ctx, `SELECT now()`).Scan(&at); err != nil {
					return err
				}
			}
			when = at
		}
		ns, err := store.SkippedNotifications(p, results[i], when.UTC().Truncate(time.Microsecond))
		if err != nil {
			return err
		}
		for _, n := range ns {
			b.Queue(`INSERT INTO notifications (id, notifier, job, event, run_id, payload, state, next_attempt_at, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)`,
				n.ID, n.Notifier, n.Job, string(n.Event), n.RunID, n.Payload, ts(n.NextAttemptAt), ts(n.CreatedAt))
			c.wake()
		}
	}
	return c.send(ctx, &b)
}
