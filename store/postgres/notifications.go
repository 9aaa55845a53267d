package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

func scanNotifications(rows pgx.Rows, err error) ([]*store.Notification, error) {
	return rowscan.All(rows, err, rowscan.Notification[tstz])
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
			RETURNING `+qualified("n", rowscan.NotificationColumns),
			ts(p.Now), p.Node, p.Incarnation, p.Limit, p.Lease))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, store.CompareNotifications)
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
				p.ID, p.Incarnation, string(next), ts(p.NextAttemptAt), cleanText(store.ClipError(p.Error))).Scan(&state, &ok)
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
	out, err := scanNotifications(s.read().query(ctx, `SELECT `+rowscan.NotificationColumns+` FROM notifications
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
	jobNames := store.NotifyingJobs(trs, results)
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
	ns, changed, err := store.TransitionNotifications(trs, results, states, at.UTC())
	if err != nil {
		return err
	}
	var b pgx.Batch
	queueNotifications(c, &b, ns)
	for _, job := range changed {
		if err := queueJobNotifyState(&b, states[job]); err != nil {
			return err
		}
	}
	return c.send(ctx, &b)
}

// queueNotifications queues the inserts of new notifications in b, and
// wakes the nodes' deliveries when the transaction commits.
func queueNotifications(c *conn, b *pgx.Batch, ns []*store.Notification) {
	for _, n := range ns {
		b.Queue(`INSERT INTO notifications (id, notifier, job, event, run_id, payload, state, next_attempt_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)`,
			n.ID, n.Notifier, n.Job, string(n.Event), n.RunID, n.Payload, ts(n.NextAttemptAt), ts(n.CreatedAt))
		c.wake()
	}
}

// queueJobNotifyState queues the write of a job's state in b, to its row
// that jobNotifyStates locked (and made).
func queueJobNotifyState(b *pgx.Batch, st *store.JobNotifyState) error {
	told, err := json.Marshal(st.Told)
	if err != nil {
		return err
	}
	b.Queue(`UPDATE job_notify SET failing_since = $2, overdue_since = $3, told = $4::jsonb WHERE job = $1`,
		st.Job, ts(st.FailingSince), ts(st.OverdueSince), string(told))
	return nil
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
		var b pgx.Batch
		queueNotifications(c, &b, ns)
		if err := queueJobNotifyState(&b, st); err != nil {
			return err
		}
		made = true
		return c.send(ctx, &b)
	})
	if err != nil {
		return nil, false, err
	}
	return st, made, nil
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
		queueNotifications(c, &b, ns)
	}
	return c.send(ctx, &b)
}
