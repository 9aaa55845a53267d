package jobs

import (
	"errors"
	"slices"
	"time"
)

// Transition is one change of a run's status, produced by the named
// operations below and applied by a store, which checks ValidateTransition,
// the fence, and writes the change and its event in one transaction.
type Transition struct {
	RunID string
	// Fence, when set, makes the write conditional on the run's current
	// attempt and incarnation: every write about an attempt carries one.
	Fence *Fence
	To    Status
	// From, when not empty, restricts the statuses the run may be in;
	// anything else is ErrInvalidTransition (e.g. Cancel only from active).
	From      []Status
	Reason    Reason
	Error     string
	ExitCode  *int
	NotBefore time.Time // for StatusRetrying: earliest start of the next attempt
	Node      string    // who made the change, for the event
	Actor     string    // who asked for it through the control API (Event.Actor)
	Time      time.Time // when; zero means the store's clock
	// Attempt output, stored with the attempt when the transition ends one.
	Output      string
	OutputBytes int64
	Truncated   bool
	// Notify are the notifiers of the run's job: the store decides, in the
	// transaction that writes the change, which of them hear of it (see
	// store.DecideNotifications). Nil: the change touches no notification
	// state; empty but not nil: it does (a success ends the job's overdue
	// or failing state) and tells no one.
	Notify []NotifyTarget
	// Chain are the runs the change makes when it ends the run completed
	// (Chain.OnSuccess) or as a failure (Chain.OnFailure; see ChainEnd):
	// the store writes them in the transaction that writes the change,
	// each keyed by the run and its job, so that a run's end makes them
	// once. Nil: none.
	Chain *Chain
}

// Chain are the jobs a job names in on_success and on_failure, as a
// transition carries them for the store: the store picks the list that the
// run's end calls for.
type Chain struct {
	OnSuccess []ChainRun
	OnFailure []ChainRun
}

// ChainRun is what the store needs to make a run of a job of a chain, as
// a trigger of that job would get it.
type ChainRun struct {
	Job              string
	Retry            RetryPolicy
	NoRetryExitCodes []int
	// NotBefore and NotAfter are the job's bounds (zero: open): the run is
	// due at the end of its parent, not before NotBefore, and expires at
	// NotAfter. A job whose NotAfter has passed gets no run.
	NotBefore, NotAfter time.Time
}

// ChainEnd says which list of a chain the end of a run in status with
// reason calls for: on_success for completed, on_failure for dead_letter
// and for expired (cancelled with reason expired); nil for any other
// status, a user's cancel included.
func (c *Chain) ChainEnd(status Status, reason Reason) []ChainRun {
	if c == nil {
		return nil
	}
	switch {
	case status == StatusCompleted:
		return c.OnSuccess
	case status == StatusDeadLetter, status == StatusCancelled && reason == ReasonExpired:
		return c.OnFailure
	}
	return nil
}

// Empty reports whether the chain names no job.
func (c *Chain) Empty() bool { return c == nil || len(c.OnSuccess)+len(c.OnFailure) == 0 }

// Complete ends an attempt that succeeded.
func Complete(f Fence, node string, res Result, now time.Time) Transition {
	return Transition{
		RunID: f.RunID, Fence: &f, To: StatusCompleted, Reason: ReasonSucceeded,
		ExitCode: res.ExitCode, Node: node, Time: now,
		Output: res.Output, OutputBytes: res.OutputBytes, Truncated: res.Truncated,
	}
}

// FailAttempt ends an attempt that failed for reason. The run goes to
// retrying after the policy's backoff, or to dead_letter when it has used its
// last attempt or exited with a no-retry code, or to cancelled (expired) when
// the next attempt could not start before not_after.
func FailAttempt(run *Run, f Fence, node string, res Result, reason Reason, now time.Time, rnd func() float64) Transition {
	t := Transition{
		RunID: f.RunID, Fence: &f, Reason: reason, ExitCode: res.ExitCode, Node: node, Time: now,
		Output: res.Output, OutputBytes: res.OutputBytes, Truncated: res.Truncated,
	}
	if res.Err != nil {
		t.Error = res.Err.Error()
	}
	noRetry := res.ExitCode != nil && slices.Contains(run.NoRetryExitCodes, *res.ExitCode)
	switch {
	case noRetry:
		t.To, t.Reason = StatusDeadLetter, ReasonNoRetryCode
	case f.Attempt >= max(run.MaxAttempts, 1):
		t.To = StatusDeadLetter
	default:
		// An attempt claimed ahead of its run's not_before (a tick's run,
		// claimed up to 50 ms before the tick) can end before it, when it is
		// interrupted, stopped or fenced before it started: its retry waits
		// for the window too.
		next := later(now.Add(run.Retry.Delay(f.Attempt, rnd)), run.NotBefore)
		if !run.NotAfter.IsZero() && !next.Before(run.NotAfter) {
			t.To, t.Reason = StatusCancelled, ReasonExpired
			if t.Error == "" {
				t.Error = ExpiredRetryError
			}
		} else {
			t.To, t.NotBefore = StatusRetrying, next
		}
	}
	return t
}

// ExpiredRetryError is the error of a run whose failed attempt would have
// been retried, but whose next attempt could not start before not_after,
// when the attempt gave none.
const ExpiredRetryError = "the next attempt could not start before not_after"

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Finish turns the result of an attempt into its transition: success
// completes; a stop by a user or by overlap replacement cancels; anything
// else fails the attempt through the retry flow.
func Finish(run *Run, f Fence, node string, res Result, now time.Time, rnd func() float64) Transition {
	switch {
	case res.Reason == ReasonCancelled || res.Reason == ReasonReplaced:
		t := Cancel(f.RunID, node, res.Reason, now)
		fence := f // f itself stays on the stack on the other paths
		t.Fence, t.ExitCode = &fence, res.ExitCode
		t.Output, t.OutputBytes, t.Truncated = res.Output, res.OutputBytes, res.Truncated
		return t
	case res.Ok():
		return Complete(f, node, res, now)
	}
	reason := res.Reason
	if reason == "" {
		reason = ReasonFailed
		if res.StartFailed {
			reason = ReasonStartFailed
		}
	}
	return FailAttempt(run, f, node, res, reason, now, rnd)
}

// Expire cancels a run that did not start by its not_after.
func Expire(runID, node string, now time.Time) Transition {
	return Transition{RunID: runID, To: StatusCancelled, From: []Status{StatusPending, StatusRetrying},
		Reason: ReasonExpired, Node: node, Time: now, Error: "not started by not_after"}
}

// Cancel cancels a run that has not started (or, with a fence, ends a
// running attempt as cancelled).
func Cancel(runID, node string, reason Reason, now time.Time) Transition {
	return Transition{RunID: runID, To: StatusCancelled, From: ActiveStatuses, Reason: reason, Node: node, Time: now}
}

// ErrWindow is returned for a window whose not_after is not after its not_before.
var ErrWindow = errors.New("not_after must be after not_before")

// ValidateWindow checks a start window; zero times are open ends.
func ValidateWindow(notBefore, notAfter time.Time) error {
	if !notBefore.IsZero() && !notAfter.IsZero() && !notAfter.After(notBefore) {
		return ErrWindow
	}
	return nil
}
