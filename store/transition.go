package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// CheckTransition decides, without writing, whether t may change cur (nil:
// no such run). It is the one gate every backend passes each change of a
// run's status through, inside the transaction that then writes it:
//
//   - a write with a fence must match the run's current attempt and
//     incarnation while it runs, else ErrFenced (a stale attempt);
//   - a running run changes only with its attempt's fence;
//   - a run starts (-> running) only through a claim;
//   - t.From, when set, restricts the statuses the run may be in;
//   - and jobs.ValidateTransition, the state machine.
func CheckTransition(cur *jobs.Run, t jobs.Transition) error {
	if cur == nil {
		return fmt.Errorf("run %s: %w", t.RunID, ErrNotFound)
	}
	if f := t.Fence; f != nil {
		if f.RunID != "" && f.RunID != t.RunID {
			return fmt.Errorf("fence %s is not about run %s", f, t.RunID)
		}
		if cur.Status != jobs.StatusRunning || cur.Attempt != f.Attempt || cur.Incarnation != f.Incarnation {
			return fmt.Errorf("%w: %s: the run is %s at attempt %d of incarnation %s",
				ErrFenced, f, cur.Status, cur.Attempt, cur.Incarnation)
		}
	} else if cur.Status == jobs.StatusRunning {
		return fmt.Errorf("%w: run %s is running, and a running run changes only with its attempt's fence",
			jobs.ErrInvalidTransition, t.RunID)
	}
	if t.To == jobs.StatusRunning {
		return fmt.Errorf("%w: run %s: a run starts only through a claim", jobs.ErrInvalidTransition, t.RunID)
	}
	if len(t.From) > 0 && !slices.Contains(t.From, cur.Status) {
		return fmt.Errorf("%w: run %s is %s, want one of %v", jobs.ErrInvalidTransition, t.RunID, cur.Status, t.From)
	}
	if err := jobs.ValidateTransition(cur.Status, t.To); err != nil {
		return fmt.Errorf("run %s: %w", t.RunID, err)
	}
	return nil
}

// LateRetry returns t as a store applies it at at. A retry that the store
// writes at or after its run's not_after ends the run cancelled (expired)
// instead, as jobs.FailAttempt decides when the node sees it first: the
// next attempt can no longer start in the window, since it is due no
// sooner than the end of this one (NextRun). The node decides on its clock
// as the attempt ends; the store writes the end at its own, later when the
// write was retried (a lost answer, a failover). Without this a backend
// refused the retry (the window's constraint), and the run stayed running.
func LateRetry(cur *jobs.Run, t jobs.Transition, at time.Time) jobs.Transition {
	if t.To != jobs.StatusRetrying || cur == nil || cur.NotAfter.IsZero() {
		return t
	}
	if retryDue(t, at).Before(cur.NotAfter) {
		return t
	}
	t.To, t.Reason, t.NotBefore = jobs.StatusCancelled, jobs.ReasonExpired, time.Time{}
	if t.Error == "" {
		t.Error = jobs.ExpiredRetryError
	}
	return t
}

// retryDue is when the retry t written at at is due: at its not_before
// (to the microsecond, as stored), and never before at.
func retryDue(t jobs.Transition, at time.Time) time.Time {
	if nb := time.UnixMicro(t.NotBefore.UnixMicro()).UTC(); nb.After(at) {
		return nb
	}
	return at
}

// NextRun returns the run cur as t changes it at at, as a backend then
// stores it: the error and exit code of the attempt when it leaves running
// (else a given error replaces the run's), not_before moved for a retry (to
// the microsecond, as stored, and never before at), finished_at set only in
// a terminal status, a cancel request kept only while running. The result
// shares nothing with cur. It is the one rule of both backends; each
// applies its own storage limits to the result.
func NextRun(cur *jobs.Run, t jobs.Transition, at time.Time) *jobs.Run {
	next := *cur
	leaving := cur.Status == jobs.StatusRunning
	next.Status, next.Reason = t.To, t.Reason
	if leaving {
		next.Error, next.ExitCode = t.Error, t.ExitCode
	} else if t.Error != "" {
		next.Error = t.Error
	}
	if next.ExitCode != nil {
		code := *next.ExitCode
		next.ExitCode = &code
	}
	if t.To == jobs.StatusRetrying {
		// A retry is due no sooner than the end of the attempt before it.
		// The two can be read from different clocks: the backoff from the
		// node's, the end (a zero Time) from the database's at the write;
		// a claim at a time between them would start the next attempt
		// before this one ended, as the history tells it.
		next.NotBefore = retryDue(t, at)
	}
	next.FinishedAt = time.Time{}
	if t.To.Terminal() {
		next.FinishedAt = at
	}
	next.CancelRequested = cur.CancelRequested && !leaving
	next.ClaimedFrom = "" // no transition leads to running
	next.NoRetryExitCodes = slices.Clone(cur.NoRetryExitCodes)
	return &next
}
