package jobs

import (
	"fmt"
	"time"
)

// Run is one logical execution of a job. Attempts of the same run are retries.
type Run struct {
	ID               string
	Job              string
	Status           Status
	Attempt          int // number of the current or last attempt; 0 before the first
	MaxAttempts      int
	Trigger          Trigger
	ScheduledAt      time.Time // the tick, the at time, or when a trigger was made
	NotBefore        time.Time
	NotAfter         time.Time // zero: no deadline
	CreatedAt        time.Time
	StartedAt        time.Time // start of the current or last attempt
	FinishedAt       time.Time
	Node             string // node of the current or last attempt
	Incarnation      string // process incarnation of the current or last attempt
	ExitCode         *int
	Error            string
	Reason           Reason
	DedupID          string
	RerunOf          string
	Payload          string
	Retry            RetryPolicy // the policy the run was made with
	NoRetryExitCodes []int
	CancelRequested  bool // a user asked to cancel a running attempt
	Progress         int  // 0-100, reported by the job
	ProgressMessage  string
	// ClaimedFrom is, while the run is running, the status its claim took
	// it from (pending or retrying): a claim writes only the run, and the
	// attempt's end writes the attempt's row, which also stands for the
	// claim's event. Empty otherwise.
	ClaimedFrom Status
	// Actor is who made the run through the control API (see Event.Actor);
	// empty for a run the engine made (a tick, a one-off time).
	Actor string
	// CancelledBy is the actor who asked to cancel the run, kept even when
	// a running attempt finished before it could be stopped.
	CancelledBy string
	// ParentRunID is, for a run of a chain (TriggerChain), the run whose
	// end made it; empty otherwise.
	ParentRunID string
}

// Active reports whether the run is not finished.
func (r *Run) Active() bool { return !r.Status.Terminal() }

// Event is one entry of a run's history.
type Event struct {
	RunID   string
	Time    time.Time
	Node    string
	Attempt int
	From    Status // empty for the creation event
	To      Status
	Reason  Reason
	Message string
	// Actor is who asked for the change through the control API, as
	// "VIA:NAME": "api:TOKEN" or "socket:USER" ("socket:uid N" for a user
	// without a name). Empty for a change the engine made on its own.
	Actor string
}

// Attempt is one execution of a run on a node.
type Attempt struct {
	RunID       string
	Number      int
	Node        string
	Incarnation string
	StartedAt   time.Time
	FinishedAt  time.Time
	Status      Status // status the run moved to when this attempt ended; running while it runs
	ExitCode    *int
	Error       string
	Reason      Reason
	Output      string // bounded: head, truncation marker, tail
	OutputBytes int64  // total bytes the attempt wrote
	Truncated   bool
}

// Ok reports whether the attempt succeeded.
func (r Result) Ok() bool {
	return r.Reason == "" && r.Err == nil && !r.StartFailed && (r.ExitCode == nil || *r.ExitCode == 0)
}

// Fence identifies the attempt a write is about. A store rejects a write
// whose fence does not match the run's current attempt and incarnation.
type Fence struct {
	RunID       string
	Attempt     int
	Incarnation string
}

func (f Fence) String() string {
	return fmt.Sprintf("run %s attempt %d incarnation %s", f.RunID, f.Attempt, f.Incarnation)
}

// Result is what an attempt produced.
type Result struct {
	ExitCode    *int // nil for a Go handler or a process that never started or died by a signal
	Err         error
	StartFailed bool
	Reason      Reason // set when the attempt was stopped: timeout, cancelled, replaced, shutdown
	Output      string
	OutputBytes int64
	Truncated   bool
}
