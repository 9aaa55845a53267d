package jobs

import (
	"errors"
	"fmt"
)

// Status is the state of a run.
type Status string

const (
	// StatusPending: waiting for its not_before time and a free node.
	StatusPending Status = "pending"
	// StatusRunning: an attempt is executing on a node.
	StatusRunning Status = "running"
	// StatusCompleted: an attempt succeeded. Terminal.
	StatusCompleted Status = "completed"
	// StatusRetrying: the last attempt failed; the next one is scheduled after a backoff.
	StatusRetrying Status = "retrying"
	// StatusCancelled: cancelled by a user, by shutdown policy, by overlap
	// replacement, or expired because it did not start by not_after. Terminal.
	StatusCancelled Status = "cancelled"
	// StatusDeadLetter: failed after its last attempt. Terminal.
	StatusDeadLetter Status = "dead_letter"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusPending, StatusRunning, StatusRetrying, StatusCompleted, StatusCancelled, StatusDeadLetter}

// ActiveStatuses are the statuses of a run that is not finished.
var ActiveStatuses = []Status{StatusPending, StatusRunning, StatusRetrying}

// Terminal reports whether no transition leaves s.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusCancelled || s == StatusDeadLetter
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// ParseStatus returns the status named s.
func ParseStatus(s string) (Status, error) {
	if st := Status(s); st.Valid() {
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q (want pending, running, retrying, completed, cancelled or dead_letter)", s)
}

// ErrInvalidTransition is returned for a change of status that the state
// machine does not allow. It is always a bug in the caller.
var ErrInvalidTransition = errors.New("invalid run transition")

// transitions is the whole state machine.
var transitions = map[Status][]Status{
	StatusPending:  {StatusRunning, StatusCancelled},
	StatusRetrying: {StatusRunning, StatusCancelled},
	StatusRunning:  {StatusCompleted, StatusRetrying, StatusDeadLetter, StatusCancelled},
}

// ValidateTransition is the one place that decides whether a run may move
// from one status to another. Stores call it inside the transaction that
// writes the change.
func ValidateTransition(from, to Status) error {
	for _, s := range transitions[from] {
		if s == to {
			return nil
		}
	}
	return fmt.Errorf("%w: %s -> %s", ErrInvalidTransition, from, to)
}

// Trigger says what made a run.
type Trigger string

const (
	// TriggerSchedule: a cron tick.
	TriggerSchedule Trigger = "schedule"
	// TriggerOnce: the time of a one-off (at) job.
	TriggerOnce Trigger = "once"
	// TriggerManual: schedulerd trigger, or the library's Trigger call.
	TriggerManual Trigger = "manual"
	// TriggerRerun: schedulerd rerun of an earlier run.
	TriggerRerun Trigger = "rerun"
	// TriggerChain: the end of a run of a job that names this one in
	// on_success or on_failure (Run.ParentRunID is that run).
	TriggerChain Trigger = "chain"
	// TriggerBackfill: schedulerd backfill of a past tick; keyed by its
	// job and tick as a schedule's run is.
	TriggerBackfill Trigger = "backfill"
)

// Reason explains a transition. It is stored with the run event and, for the
// last one, on the run.
type Reason string

const (
	ReasonCreated     Reason = "created"   // the run was made
	ReasonClaimed     Reason = "claimed"   // a node started an attempt
	ReasonSucceeded   Reason = "succeeded" // the attempt exited 0 / the handler returned nil
	ReasonFailed      Reason = "failed"    // non-zero exit or handler error
	ReasonNoRetryCode Reason = "no_retry_exit_code"
	ReasonStartFailed Reason = "start_failed" // the process could not be started
	ReasonTimeout     Reason = "timeout"      // the attempt ran past its timeout
	ReasonCancelled   Reason = "cancelled"    // a user cancelled it
	ReasonReplaced    Reason = "replaced"     // overlap = "replace" and a newer tick fired
	ReasonExpired     Reason = "expired"      // not started by not_after
	ReasonShutdown    Reason = "shutdown"     // stopped at the end of shutdown_grace
	ReasonInterrupted Reason = "interrupted"  // its node's previous process died while it ran
	ReasonNodeLost    Reason = "node_lost"    // its node went silent past inactive_threshold
	ReasonFenced      Reason = "fenced"       // its node fenced itself after losing the store
)
