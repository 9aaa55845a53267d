package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
)

// Notifications is the outbox of notifications: written in the transaction
// of the change that causes them (a run's transition, a job becoming
// overdue), delivered at least once by any live node under a lease, and
// kept as failed, visible, after their last attempt. Backends implement
// it next to Store.
type Notifications interface {
	// NotificationsClaim leases up to p.Limit pending notifications whose
	// next attempt is due and whose lease (if any) has run out, oldest
	// first, to p.Node's p.Incarnation until now + p.Lease. A node killed
	// mid-delivery leaves its lease to run out: another node then delivers
	// (at least once; the receiver de-duplicates on the id).
	NotificationsClaim(ctx context.Context, p NotificationsClaimParams) ([]*Notification, error)
	// NotificationFinish records the outcome of one delivery attempt. A
	// delivery marks the notification delivered whoever holds the lease
	// now (it was delivered); a failure counts only while p.Incarnation
	// still holds the lease (ErrFenced otherwise): the notification goes
	// back to pending until p.NextAttemptAt, or to failed when p.Failed.
	NotificationFinish(ctx context.Context, p NotificationFinishParams) error
	// NotificationsRelease ends the leases that node's incarnations other
	// than p.Incarnation hold: a node that took over from its previous
	// process (which is gone) gives what it was delivering to the next
	// claim at once, instead of at the end of the lease. It returns how
	// many it released.
	NotificationsRelease(ctx context.Context, p NotificationsReleaseParams) (int, error)
	// NotificationsList returns notifications, newest first.
	NotificationsList(ctx context.Context, f NotificationFilter) ([]*Notification, error)
	// NotificationsNextDue returns when the first pending notification is
	// next due (its next attempt, or the end of its lease); zero when none
	// is pending.
	NotificationsNextDue(ctx context.Context) (time.Time, error)
	// NotificationsPrune deletes the delivered and failed notifications
	// created before the given time, and returns how many.
	NotificationsPrune(ctx context.Context, before time.Time) (int, error)
	// JobOverdue makes job p.Job overdue, once in the cluster: in one
	// transaction, unless the job is overdue already or a run of it
	// completed after p.Now - p.Within (by the results the store keeps),
	// or, when none ever did, p.Since is after that, it records the job as
	// overdue and writes the overdue notifications of p.Notify. It returns
	// the job's state, and whether this call made it overdue. A success
	// of the job ends the state (see DecideNotifications). With p.Retired
	// it writes only while the job has an expectation (Expectations), and
	// returns ErrNotFound otherwise: a job forgotten meanwhile.
	JobOverdue(ctx context.Context, p JobOverdueParams) (st *JobNotifyState, made bool, err error)
	// JobNotifyStates returns the notification state of the named jobs
	// that have one.
	JobNotifyStates(ctx context.Context, jobNames []string) (map[string]*JobNotifyState, error)
}

// JobOverdueParams asks to make a job overdue.
type JobOverdueParams struct {
	Job    string
	Within time.Duration
	// Since is when the caller began expecting a success of a job that
	// never had one.
	Since  time.Time
	Notify []jobs.NotifyTarget
	Node   string
	Now    time.Time
	// Retired says that the caller does not declare the job: it knows the
	// job's expectation from the store alone.
	Retired bool
}

// Due reports whether a job whose last success was lastSuccess (zero:
// none) is overdue at now.
func (p JobOverdueParams) Due(lastSuccess, now time.Time) bool {
	ref := lastSuccess
	if ref.IsZero() {
		ref = p.Since
	}
	return !now.Before(ref.Add(p.Within))
}

// OverduePayload is the payload of the overdue event of the job of p,
// whose last success was lastSuccess (zero: none): its error names the
// window and the last success, or when the cluster began expecting one.
func OverduePayload(p JobOverdueParams, lastSuccess time.Time) EventPayload {
	msg := fmt.Sprintf("no run completed within expect_success_within (%s): ", windowText(p.Within))
	if lastSuccess.IsZero() {
		msg += "none ever did; the cluster has expected one since " + p.Since.UTC().Format(time.RFC3339)
	} else {
		msg += "the last success was at " + lastSuccess.UTC().Format(time.RFC3339)
	}
	return EventPayload{Job: p.Job, Node: p.Node, Error: msg}
}

// windowText writes a window as the config would: "26h", "1h30m", "90s",
// without the zero units time.Duration.String ends with ("26h0m0s").
func windowText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// NotificationState is where a notification is in its delivery.
type NotificationState string

const (
	// NotificationPending: not delivered yet; due at NextAttemptAt.
	NotificationPending NotificationState = "pending"
	// NotificationDelivered: a receiver took it.
	NotificationDelivered NotificationState = "delivered"
	// NotificationFailed: its last attempt failed; it stays, visible.
	NotificationFailed NotificationState = "failed"
)

// Notification is one event for one notifier.
type Notification struct {
	// ID is a UUID, also in the payload: receivers de-duplicate on it.
	ID       string
	Notifier string
	Job      string
	Event    jobs.NotifyEvent
	RunID    string
	// Payload is the event as JSON (EventPayload).
	Payload       []byte
	State         NotificationState
	Attempts      int
	NextAttemptAt time.Time
	// The lease of the delivery in progress; zero when none.
	LeaseNode, LeaseIncarnation string
	LeaseUntil                  time.Time
	LastError                   string
	CreatedAt                   time.Time
	DeliveredAt                 time.Time
}

// EventPayload is the JSON of an event, as notifiers receive it.
type EventPayload struct {
	ID       string           `json:"id"`
	Event    jobs.NotifyEvent `json:"event"`
	Job      string           `json:"job"`
	RunID    string           `json:"run_id"`
	Attempt  int              `json:"attempt"`
	Status   jobs.Status      `json:"status"`
	Reason   jobs.Reason      `json:"reason"`
	ExitCode *int             `json:"exit_code"`
	Error    string           `json:"error"`
	Node     string           `json:"node"`
	At       time.Time        `json:"at"`
	// Since is when the job began failing or became overdue, for a
	// reminder and for resolved; null otherwise.
	Since *time.Time `json:"since"`
	// Reminder is set on a renotify reminder.
	Reminder bool `json:"reminder"`
}

// NotificationsClaimParams asks for due notifications.
type NotificationsClaimParams struct {
	Node        string
	Incarnation string
	Limit       int
	// Lease is how long the claim holds them: past it, another node may
	// deliver them again.
	Lease time.Duration
	Now   time.Time
}

// NotificationsReleaseParams names a node and its live incarnation.
type NotificationsReleaseParams struct {
	Node        string
	Incarnation string
}

// NotificationFinishParams is the outcome of one delivery attempt.
type NotificationFinishParams struct {
	ID          string
	Incarnation string
	Delivered   bool
	// Error says why the attempt failed; with Failed the notification
	// stays failed, else it is due again at NextAttemptAt.
	Error         string
	Failed        bool
	NextAttemptAt time.Time
	Now           time.Time
}

// NotificationFilter selects notifications for NotificationsList.
type NotificationFilter struct {
	State NotificationState // empty: any
	Job   string
	Limit int // 0: 100; at most 10,000
}

// ListLimit is how many notifications a listing with f returns at most:
// Limit, 100 when it is not set, and never more than MaxListLimit.
func (f NotificationFilter) ListLimit() int {
	return min(RunFilter{Limit: f.Limit}.ListLimit(), MaxListLimit)
}

// JobNotifyState is what the store keeps of a job for its notifications,
// so that suppression, reminders and resolved are decided cluster-wide in
// the transaction of the change.
type JobNotifyState struct {
	Job string
	// FailingSince is when the job entered its failing state (a failed,
	// dead_letter or expired run); zero while it is not failing.
	FailingSince time.Time
	// OverdueSince is when the job became overdue; zero while it is not.
	OverdueSince time.Time
	// Told maps each notifier told of the current failing or overdue
	// state to when it was last told (for renotify). A notifier told of
	// failed alone (a retry) is under retryToldKey(notifier) instead: it
	// is still told of the first dead_letter, expired or overdue.
	Told map[string]time.Time
}

// retryToldKey is the key of Told for a notifier told of failed alone. A
// notifier name has no space, so the key is no notifier's.
func retryToldKey(notifier string) string { return notifier + " failed" }

// Troubled reports whether the job is failing or overdue.
func (s *JobNotifyState) Troubled() bool { return !s.FailingSince.IsZero() || !s.OverdueSince.IsZero() }

// TransitionEvents returns the events a transition that left run as it is
// makes: failed, dead_letter or expired (failures), recovered (an attempt
// of a lost node), or resolved for a completion (which only notifies when
// the job was failing or overdue).
func TransitionEvents(run *jobs.Run, t jobs.Transition) []jobs.NotifyEvent {
	var evs []jobs.NotifyEvent
	if t.Reason == jobs.ReasonNodeLost {
		evs = append(evs, jobs.EventRecovered)
	}
	switch {
	case run.Status == jobs.StatusRetrying:
		evs = append(evs, jobs.EventFailed)
	case run.Status == jobs.StatusDeadLetter:
		evs = append(evs, jobs.EventDeadLetter)
	case run.Status == jobs.StatusCancelled && run.Reason == jobs.ReasonExpired:
		evs = append(evs, jobs.EventExpired)
	case run.Status == jobs.StatusCompleted:
		evs = append(evs, jobs.EventResolved)
	}
	return evs
}

// failure reports whether e puts a job in its failing state.
func failure(e jobs.NotifyEvent) bool {
	return e == jobs.EventFailed || e == jobs.EventDeadLetter || e == jobs.EventExpired
}

// DecideNotifications applies event e of a job at now to its state st
// (changed in place; Told made when nil) and returns the notifications to
// write, for the targets that take it:
//
//   - a failure (failed, dead_letter, expired) or overdue tells each
//     target once per failing or overdue state: the first time, then
//     again (a reminder) only every Renotify; but a target told only of
//     failed (an attempt that will be retried) is told of the first
//     dead_letter, expired or overdue too, since the run gave up;
//   - recovered and skipped tell every time, and change no state;
//   - resolved (a success) tells only when the job was failing or
//     overdue, and clears the state.
//
// The payload of each is base with its own id, the event and since.
func DecideNotifications(st *JobNotifyState, e jobs.NotifyEvent, targets []jobs.NotifyTarget, base EventPayload, now time.Time) ([]*Notification, error) {
	if st.Told == nil {
		st.Told = map[string]time.Time{}
	}
	type pick struct {
		target   string
		reminder bool
	}
	var picks []pick
	var since time.Time
	switch {
	case failure(e) || e == jobs.EventOverdue:
		if e == jobs.EventOverdue {
			if st.OverdueSince.IsZero() {
				st.OverdueSince = now
			}
			since = st.OverdueSince
		} else {
			if st.FailingSince.IsZero() {
				st.FailingSince = now
			}
			since = st.FailingSince
		}
		for _, t := range targets {
			if !t.Wants(e) {
				continue
			}
			key := t.Notifier
			last, told := st.Told[key]
			if e == jobs.EventFailed {
				// A retry: told already if told of anything in this
				// state; kept apart so that a run that gives up is told.
				key = retryToldKey(t.Notifier)
				if retry, ok := st.Told[key]; ok && (!told || retry.After(last)) {
					last, told = retry, true
				}
			}
			switch {
			case !told:
				picks = append(picks, pick{t.Notifier, false})
			case t.Renotify > 0 && !now.Before(last.Add(t.Renotify)):
				picks = append(picks, pick{t.Notifier, true})
			default:
				continue
			}
			st.Told[key] = now
		}
	case e == jobs.EventResolved:
		if !st.Troubled() {
			return nil, nil
		}
		since = st.FailingSince
		if since.IsZero() || (!st.OverdueSince.IsZero() && st.OverdueSince.Before(since)) {
			since = st.OverdueSince
		}
		st.FailingSince, st.OverdueSince = time.Time{}, time.Time{}
		clear(st.Told)
		for _, t := range targets {
			if t.Wants(e) {
				picks = append(picks, pick{t.Notifier, false})
			}
		}
	default:
		for _, t := range targets {
			if t.Wants(e) {
				picks = append(picks, pick{t.Notifier, false})
			}
		}
	}
	out := make([]*Notification, 0, len(picks))
	for _, p := range picks {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("notification id: %w", err)
		}
		pl := base
		pl.ID, pl.Event, pl.Reminder, pl.At = id.String(), e, p.reminder, now.UTC()
		if !since.IsZero() {
			s := since.UTC()
			pl.Since = &s
		}
		body, err := json.Marshal(pl)
		if err != nil {
			return nil, fmt.Errorf("notification payload: %w", err)
		}
		out = append(out, &Notification{
			ID: pl.ID, Notifier: p.target, Job: pl.Job, Event: e, RunID: pl.RunID, Payload: body,
			State: NotificationPending, NextAttemptAt: now, CreatedAt: now,
		})
	}
	return out, nil
}

// RunPayload is the payload of an event about run, by node.
func RunPayload(run *jobs.Run, node string) EventPayload {
	return EventPayload{
		Job: run.Job, RunID: run.ID, Attempt: run.Attempt, Status: run.Status, Reason: run.Reason,
		ExitCode: run.ExitCode, Error: run.Error, Node: node,
	}
}

// SkippedNotifications returns the skipped notifications of a fire that
// res says it applied, for its targets that take skipped: one each when
// the fire skipped ticks (none otherwise).
func SkippedNotifications(p FireParams, res *FireResult, at time.Time) ([]*Notification, error) {
	n := p.Skipped + res.SkippedOverlap
	if !res.Advanced || n == 0 || !slices.ContainsFunc(p.Notify, func(t jobs.NotifyTarget) bool { return t.Wants(jobs.EventSkipped) }) {
		return nil, nil
	}
	pl := EventPayload{Job: p.Job, Node: p.Node, Reason: "skipped",
		Error: fmt.Sprintf("%d tick(s) skipped by overlap or catchup; the newest skipped was due at %s", n, lastSkipped(p, res).Format(time.RFC3339))}
	var st JobNotifyState // skipped keeps no state
	return DecideNotifications(&st, jobs.EventSkipped, p.Notify, pl, at)
}

func lastSkipped(p FireParams, res *FireResult) time.Time {
	if res.Cursor != nil && !res.Cursor.LastSkippedAt.IsZero() {
		return res.Cursor.LastSkippedAt.UTC()
	}
	return p.LastSkipped.UTC()
}

// CompareNotifications orders notifications as claims return them: by
// due time, then id.
func CompareNotifications(a, b *Notification) int {
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

// ClipError bounds a delivery error as the stores keep it: its first
// 2,048 bytes.
func ClipError(s string) string {
	const max = 2048
	if len(s) > max {
		return s[:max]
	}
	return s
}

// Equal reports whether s and o are the same state: since when failing
// and overdue, and who was told when.
func (s *JobNotifyState) Equal(o *JobNotifyState) bool {
	return s.FailingSince.Equal(o.FailingSince) && s.OverdueSince.Equal(o.OverdueSince) &&
		maps.EqualFunc(s.Told, o.Told, time.Time.Equal)
}

// NotifyingJobs returns the jobs of the runs that the transitions ts,
// whose results are results, changed with targets to tell: the jobs whose
// states TransitionNotifications needs. None: the transitions tell no one.
func NotifyingJobs(ts []jobs.Transition, results []TransitionResult) []string {
	var names []string
	for i, t := range ts {
		if t.Notify != nil && results[i].Err == nil && results[i].Run != nil {
			names = append(names, results[i].Run.Job)
		}
	}
	return names
}

// TransitionNotifications decides, on the states of their jobs (changed in
// place, and made for a job that has none), the notifications of the
// transitions ts whose results are results: in order, for each one with
// targets that changed its run, those of its events (TransitionEvents) at
// its time, or at at when it has none. It returns them in order, and the
// jobs whose state changed, sorted: what the store writes in the
// transitions' transaction.
func TransitionNotifications(ts []jobs.Transition, results []TransitionResult, states map[string]*JobNotifyState,
	at time.Time) ([]*Notification, []string, error) {
	var out []*Notification
	changed := map[string]bool{}
	for i, t := range ts {
		run := results[i].Run
		if t.Notify == nil || results[i].Err != nil || run == nil {
			continue
		}
		st := states[run.Job]
		if st == nil {
			st = &JobNotifyState{Job: run.Job}
			states[run.Job] = st
		}
		when := at
		if !t.Time.IsZero() {
			when = t.Time.UTC().Truncate(time.Microsecond)
		}
		for _, e := range TransitionEvents(run, t) {
			before := *st
			before.Told = maps.Clone(st.Told)
			ns, err := DecideNotifications(st, e, t.Notify, RunPayload(run, t.Node), when)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, ns...)
			if !before.Equal(st) {
				changed[run.Job] = true
			}
		}
	}
	return out, slices.Sorted(maps.Keys(changed)), nil
}
