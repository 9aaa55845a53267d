package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

const notificationColumns = `id, notifier, job, event, run_id, payload, state, attempts, next_attempt_at,
	lease_node, lease_incarnation, lease_until, last_error, created_at, delivered_at`

// sqlNotificationDue is the condition of a pending notification due at ?.
const sqlNotificationDue = `state = 'pending' AND next_attempt_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1)`

func scanNotification(row scanner) (*store.Notification, error) {
	var (
		n                                 store.Notification
		next, leaseUntil, created, delivd sql.NullInt64
	)
	err := row.Scan(&n.ID, &n.Notifier, &n.Job, &n.Event, &n.RunID, &n.Payload, &n.State, &n.Attempts, &next,
		&n.LeaseNode, &n.LeaseIncarnation, &leaseUntil, &n.LastError, &created, &delivd)
	if err != nil {
		return nil, err
	}
	n.NextAttemptAt, n.LeaseUntil, n.CreatedAt, n.DeliveredAt = goTime(next), goTime(leaseUntil), goTime(created), goTime(delivd)
	return &n, nil
}

func scanNotifications(rows *sql.Rows, err error) ([]*store.Notification, error) {
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
func (s *Store) NotificationsClaim(ctx context.Context, p store.NotificationsClaimParams) ([]*store.Notification, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	at := now(p.Now)
	// Most polls find nothing: answer them without the write lock.
	var one int
	err := s.read().queryRow(ctx, `SELECT 1 FROM notifications INDEXED BY notifications_due WHERE `+sqlNotificationDue+` LIMIT 1`,
		at.UnixMicro()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("claim notifications", err)
	}
	var out []*store.Notification
	err = s.write(ctx, "claim notifications", func(c conn) error {
		out, err = scanNotifications(c.query(ctx, `UPDATE notifications SET lease_node = ?2, lease_incarnation = ?3, lease_until = ?4
			WHERE id IN (SELECT id FROM notifications INDEXED BY notifications_due WHERE `+sqlNotificationDue+`
				ORDER BY next_attempt_at, id LIMIT ?5)
			RETURNING `+notificationColumns,
			at.UnixMicro(), p.Node, p.Incarnation, at.Add(p.Lease).UnixMicro(), p.Limit))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *store.Notification) int {
		return cmpNotification(a, b)
	})
	return out, nil
}

// cmpNotification orders notifications by due time, then id.
func cmpNotification(a, b *store.Notification) int {
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
}

// NotificationFinish records a delivery attempt; see store.Notifications.
func (s *Store) NotificationFinish(ctx context.Context, p store.NotificationFinishParams) error {
	at := now(p.Now)
	return s.write(ctx, "finish notification", func(c conn) error {
		var res sql.Result
		var err error
		if p.Delivered {
			res, err = c.exec(ctx, `UPDATE notifications SET state = 'delivered', attempts = attempts + 1, delivered_at = ?,
				lease_node = '', lease_incarnation = '', lease_until = NULL, last_error = ''
				WHERE id = ? AND state = 'pending'`, at.UnixMicro(), p.ID)
		} else {
			state := store.NotificationPending
			if p.Failed {
				state = store.NotificationFailed
			}
			res, err = c.exec(ctx, `UPDATE notifications SET state = ?, attempts = attempts + 1, next_attempt_at = ?,
				lease_node = '', lease_incarnation = '', lease_until = NULL, last_error = ?
				WHERE id = ? AND state = 'pending' AND lease_incarnation = ?`,
				state, now(p.NextAttemptAt).UnixMicro(), clipError(p.Error), p.ID, p.Incarnation)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var state store.NotificationState
		if err := c.queryRow(ctx, `SELECT state FROM notifications WHERE id = ?`, p.ID).Scan(&state); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("notification %s: %w", p.ID, store.ErrNotFound)
		} else if err != nil {
			return err
		}
		if p.Delivered {
			return nil // delivered before, by this node or another: once is enough
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
	err := s.write(ctx, "release notifications", func(c conn) error {
		res, err := c.exec(ctx, `UPDATE notifications SET lease_node = '', lease_incarnation = '', lease_until = NULL
			WHERE state = 'pending' AND lease_node = ? AND lease_incarnation <> ? AND lease_until IS NOT NULL`, p.Node, p.Incarnation)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// NotificationsList returns notifications, newest first.
func (s *Store) NotificationsList(ctx context.Context, f store.NotificationFilter) ([]*store.Notification, error) {
	q := `SELECT ` + notificationColumns + ` FROM notifications WHERE 1 = 1`
	var args []any
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.Job != "" {
		q += ` AND job = ?`
		args = append(args, f.Job)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, f.ListLimit())
	out, err := scanNotifications(s.read().query(ctx, q, args...))
	if err != nil {
		return nil, fail("list notifications", err)
	}
	return out, nil
}

// NotificationsNextDue returns when the first pending notification is due.
func (s *Store) NotificationsNextDue(ctx context.Context) (time.Time, error) {
	var next sql.NullInt64
	err := s.read().queryRow(ctx, `SELECT min(max(next_attempt_at, coalesce(lease_until, 0)))
		FROM notifications INDEXED BY notifications_due WHERE state = 'pending'`).Scan(&next)
	if err != nil {
		return time.Time{}, fail("notifications next due", err)
	}
	return goTime(next), nil
}

// NotificationsPrune deletes finished notifications made before before.
func (s *Store) NotificationsPrune(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	var n int64
	err := s.write(ctx, "prune notifications", func(c conn) error {
		res, err := c.exec(ctx, `DELETE FROM notifications WHERE created_at < ? AND state IN ('delivered', 'failed')`, before.UnixMicro())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// JobNotifyStates returns the notification states of the named jobs.
func (s *Store) JobNotifyStates(ctx context.Context, jobNames []string) (map[string]*store.JobNotifyState, error) {
	out, err := jobNotifyStates(ctx, s.read(), jobNames)
	if err != nil {
		return nil, fail("job notify states", err)
	}
	return out, nil
}

func jobNotifyStates(ctx context.Context, c conn, jobNames []string) (map[string]*store.JobNotifyState, error) {
	out := map[string]*store.JobNotifyState{}
	if len(jobNames) == 0 {
		return out, nil
	}
	rows, err := c.query(ctx, `SELECT job, failing_since, overdue_since, told FROM job_notify
		WHERE job IN (SELECT value FROM json_each(?))`, jsonStrings(jobNames))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			st               store.JobNotifyState
			failing, overdue sql.NullInt64
			told             string
		)
		if err := rows.Scan(&st.Job, &failing, &overdue, &told); err != nil {
			return nil, err
		}
		st.FailingSince, st.OverdueSince = goTime(failing), goTime(overdue)
		var micros map[string]int64
		if err := json.Unmarshal([]byte(told), &micros); err != nil {
			return nil, fmt.Errorf("job %s: told: %w", st.Job, err)
		}
		st.Told = make(map[string]time.Time, len(micros))
		for k, v := range micros {
			st.Told[k] = time.UnixMicro(v).UTC()
		}
		out[st.Job] = &st
	}
	return out, rows.Err()
}

// writeNotifications decides, in the transaction of the transitions ts
// whose results are results, which notifications they make (the targets
// each carries), and writes them with the jobs' new states. Transitions
// without targets cost nothing.
func writeNotifications(ctx context.Context, c conn, ts []jobs.Transition, results []store.TransitionResult, at time.Time) error {
	var jobNames []string
	for i, t := range ts {
		if t.Notify != nil && results[i].Err == nil && results[i].Run != nil {
			jobNames = append(jobNames, results[i].Run.Job)
		}
	}
	if len(jobNames) == 0 {
		return nil
	}
	states, err := jobNotifyStates(ctx, c, jobNames)
	if err != nil {
		return err
	}
	changed := map[string]bool{}
	for i, t := range ts {
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
			when = now(t.Time)
		}
		for _, e := range store.TransitionEvents(run, t) {
			before := *st
			before.Told = maps.Clone(st.Told)
			ns, err := store.DecideNotifications(st, e, t.Notify, store.RunPayload(run, t.Node), when)
			if err != nil {
				return err
			}
			if err := insertNotifications(ctx, c, ns); err != nil {
				return err
			}
			if !sameNotifyState(&before, st) {
				changed[run.Job] = true
			}
		}
	}
	for _, job := range slices.Sorted(maps.Keys(changed)) {
		if err := putJobNotifyState(ctx, c, states[job]); err != nil {
			return err
		}
	}
	return nil
}

// JobOverdue makes a job overdue once; see store.Notifications.
func (s *Store) JobOverdue(ctx context.Context, p store.JobOverdueParams) (*store.JobNotifyState, bool, error) {
	at := now(p.Now)
	var (
		st   *store.JobNotifyState
		made bool
	)
	err := s.write(ctx, "job overdue", func(c conn) error {
		made = false
		states, err := jobNotifyStates(ctx, c, []string{p.Job})
		if err != nil {
			return err
		}
		st = states[p.Job]
		if st == nil {
			st = &store.JobNotifyState{Job: p.Job}
		}
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
		var last sql.NullInt64
		err = c.queryRow(ctx, `SELECT last_success_at FROM job_results WHERE job = ?`, p.Job).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if !p.Due(goTime(last), at) {
			return nil
		}
		ns, err := store.DecideNotifications(st, jobs.EventOverdue, p.Notify, store.OverduePayload(p, goTime(last)), at)
		if err != nil {
			return err
		}
		if err := insertNotifications(ctx, c, ns); err != nil {
			return err
		}
		made = true
		return putJobNotifyState(ctx, c, st)
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

func insertNotifications(ctx context.Context, c conn, ns []*store.Notification) error {
	for _, n := range ns {
		if _, err := c.exec(ctx, `INSERT INTO notifications (id, notifier, job, event, run_id, payload, state,
			next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
			n.ID, n.Notifier, n.Job, n.Event, n.RunID, n.Payload, n.NextAttemptAt.UnixMicro(), n.CreatedAt.UnixMicro()); err != nil {
			return err
		}
	}
	return nil
}

func putJobNotifyState(ctx context.Context, c conn, st *store.JobNotifyState) error {
	micros := make(map[string]int64, len(st.Told))
	for k, v := range st.Told {
		micros[k] = v.UnixMicro()
	}
	told, err := json.Marshal(micros)
	if err != nil {
		return err
	}
	_, err = c.exec(ctx, `INSERT INTO job_notify (job, failing_since, overdue_since, told) VALUES (?, ?, ?, ?)
		ON CONFLICT (job) DO UPDATE SET failing_since = excluded.failing_since, overdue_since = excluded.overdue_since,
		told = excluded.told`, st.Job, dbTime(st.FailingSince), dbTime(st.OverdueSince), string(told))
	return err
}
