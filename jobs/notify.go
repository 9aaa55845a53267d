package jobs

import "time"

// NotifyEvent is what a notification tells about a job.
type NotifyEvent string

const (
	// EventFailed: an attempt failed and the run will retry.
	EventFailed NotifyEvent = "failed"
	// EventDeadLetter: a run failed after its last attempt.
	EventDeadLetter NotifyEvent = "dead_letter"
	// EventExpired: a run did not start by its not_after.
	EventExpired NotifyEvent = "expired"
	// EventRecovered: an attempt was taken from a lost node.
	EventRecovered NotifyEvent = "recovered"
	// EventSkipped: ticks were skipped by the overlap or catchup policy.
	EventSkipped NotifyEvent = "skipped"
	// EventOverdue: no run of the job completed within its
	// expect_success_within.
	EventOverdue NotifyEvent = "overdue"
	// EventResolved: the first success after a failure or an overdue.
	EventResolved NotifyEvent = "resolved"
)

// NotifyEvents are the events a notifier may choose, in the order the docs
// list them.
var NotifyEvents = []NotifyEvent{EventFailed, EventDeadLetter, EventExpired, EventRecovered, EventSkipped, EventOverdue, EventResolved}

// DefaultNotifyEvents are the events of a notifier that does not choose: the
// changes of a job's state, so that a job failing every minute does not
// notify every minute.
var DefaultNotifyEvents = []NotifyEvent{EventDeadLetter, EventExpired, EventOverdue, EventResolved}

// ValidNotifyEvent reports whether e is one of NotifyEvents.
func ValidNotifyEvent(e NotifyEvent) bool {
	for _, x := range NotifyEvents {
		if x == e {
			return true
		}
	}
	return false
}

// NotifyTarget is a notifier of a job, as a transition carries it for the
// store: which events it takes and how often it reminds. The store writes
// the notifications in the transaction of the change, config-free.
type NotifyTarget struct {
	Notifier string
	Events   []NotifyEvent
	// Renotify is the interval of reminders while the job stays failing
	// or overdue; 0 for none.
	Renotify time.Duration
}

// Wants reports whether t takes events of kind e.
func (t NotifyTarget) Wants(e NotifyEvent) bool {
	for _, x := range t.Events {
		if x == e {
			return true
		}
	}
	return false
}
