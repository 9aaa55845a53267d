package jobs

import (
	"context"
	"fmt"
	"time"
)

// Schedule computes fire times. jobs/schedule implements it.
type Schedule interface {
	// Next returns the first fire time strictly after t; zero if none.
	Next(t time.Time) time.Time
	String() string
}

// Overlap is what a tick does when the job's previous run is still active.
type Overlap string

const (
	OverlapAllow   Overlap = "allow"   // fire anyway; runs may overlap
	OverlapSkip    Overlap = "skip"    // skip the tick (logged and counted)
	OverlapQueue   Overlap = "queue"   // make the run; it starts when the previous one ends
	OverlapReplace Overlap = "replace" // cancel the active run and make the new one
)

// Catchup is what happens to ticks missed by more than misfire_grace.
type Catchup string

const (
	CatchupNone   Catchup = "none"   // skip every missed tick
	CatchupLatest Catchup = "latest" // one run for the newest missed tick
	CatchupAll    Catchup = "all"    // a run for each, within catchup_window and catchup_max
)

// Handler is a Go function job. Info(ctx) gives the run it executes.
// Returning nil completes the attempt; an error fails it (and retries).
// The handler must return when ctx is done.
type Handler func(ctx context.Context) error

// Definition is a declared job, validated.
type Definition struct {
	Name     string
	Schedule Schedule  // nil for one-off and trigger-only jobs
	At       time.Time // one-off time; zero if none
	// NotBefore and NotAfter bound every run of the job (zero: open).
	NotBefore time.Time
	NotAfter  time.Time

	// What to execute: exactly one of Command, Shell, Handler.
	Command []string
	Shell   string
	Handler Handler
	Workdir string
	User    string
	Env     map[string]string

	Timeout       time.Duration // 0: none
	KillGrace     time.Duration
	MisfireGrace  time.Duration
	Overlap       Overlap
	Catchup       Catchup
	CatchupWindow time.Duration
	CatchupMax    int
	StartDeadline time.Duration // not_after of a cron run, after its scheduled time; 0: none
	// Jitter delays the start of each cron tick's run by up to this
	// (TickStart); 0: none. Shorter than StartDeadline when both are set.
	Jitter time.Duration
	// MaxConcurrency bounds the running runs of the job in the whole cluster; 0: no bound.
	MaxConcurrency   int
	Retry            RetryPolicy
	NoRetryExitCodes []int
	// OutputLimit bounds the stored output: head and tail bytes each.
	OutputLimit int

	// Notify are the notifiers told of the job's events, in config order;
	// nil for none. The store decides which of them hear of each change.
	Notify []NotifyTarget
	// ExpectSuccessWithin makes the job overdue when no run of it
	// completed within this long; 0: never overdue.
	ExpectSuccessWithin time.Duration

	// OnSuccess and OnFailure name the jobs that get a run, once, when a
	// run of this job ends completed, or dead_letter or expired (a chain;
	// see Chain). Nil for none.
	OnSuccess []string
	OnFailure []string
}

// Kind describes how the job fires.
func (d *Definition) Kind() string {
	switch {
	case d.Schedule != nil:
		return "cron"
	case !d.At.IsZero():
		return "once"
	default:
		return "trigger"
	}
}

// ConcurrencyLimit is the number of runs of this job that may run at once in
// the cluster: max_concurrency, and 1 for any overlap policy but allow.
func (d *Definition) ConcurrencyLimit() int {
	limit := d.MaxConcurrency
	if d.Overlap != OverlapAllow && d.Overlap != "" && (limit == 0 || limit > 1) {
		limit = 1
	}
	return limit
}

// Window returns the start window of a run of this job scheduled at t, for
// the given trigger: not_before is t, or for a cron run its TickStart (never
// before the job's NotBefore); not_after is the job's NotAfter, tightened by
// start_deadline for cron runs, counted from t.
func (d *Definition) Window(trigger Trigger, t time.Time) (notBefore, notAfter time.Time) {
	notBefore, notAfter = t, d.NotAfter
	if trigger == TriggerSchedule {
		notBefore = d.TickStart(t)
	}
	if notBefore.Before(d.NotBefore) {
		notBefore = d.NotBefore
	}
	if trigger == TriggerSchedule && d.StartDeadline > 0 {
		if dl := t.Add(d.StartDeadline); notAfter.IsZero() || dl.Before(notAfter) {
			notAfter = dl
		}
	}
	return notBefore, notAfter
}

// InLife reports whether the cron tick at t is part of the job's life: not
// before its NotBefore, and with a start (TickStart) before its NotAfter. A
// tick outside it is neither fired nor counted as skipped.
func (d *Definition) InLife(t time.Time) bool {
	if t.Before(d.NotBefore) {
		return false
	}
	// The start is before t + Jitter: only a tick that close to NotAfter
	// needs its delay.
	return d.NotAfter.IsZero() || t.Add(d.Jitter).Before(d.NotAfter) || d.TickStart(t).Before(d.NotAfter)
}

// Validate checks what the config layer cannot see by itself; messages start
// with the key name.
func (d *Definition) Validate() error {
	n := 0
	if len(d.Command) > 0 {
		n++
	}
	if d.Shell != "" {
		n++
	}
	if d.Handler != nil {
		n++
	}
	switch {
	case d.Name == "":
		return fmt.Errorf("name: must not be empty")
	case n == 0:
		return fmt.Errorf("command: a job needs command, shell or a Go handler")
	case n > 1:
		return fmt.Errorf("command: set only one of command, shell and a Go handler")
	case d.Schedule != nil && !d.At.IsZero():
		return fmt.Errorf("at: a job has either schedule or at, not both")
	case d.MaxConcurrency < 0:
		return fmt.Errorf("max_concurrency: must not be negative")
	case d.Jitter < 0:
		return fmt.Errorf("jitter: must not be negative")
	case d.ExpectSuccessWithin < 0:
		return fmt.Errorf("expect_success_within: must not be negative")
	case d.Schedule != nil && d.Jitter > 0 && d.StartDeadline > 0 && d.StartDeadline <= d.Jitter:
		return fmt.Errorf("jitter: must be shorter than start_deadline (%s), which counts from the tick", d.StartDeadline)
	}
	if err := ValidateWindow(d.NotBefore, d.NotAfter); err != nil {
		return fmt.Errorf("not_after: %w", err)
	}
	if !d.At.IsZero() && !d.NotAfter.IsZero() && !d.NotAfter.After(d.At) {
		return fmt.Errorf("not_after: must be after at")
	}
	if err := d.Retry.Validate(); err != nil {
		return fmt.Errorf("retry.%w", err)
	}
	return nil
}

// Info describes the run a handler or a command executes.
type Info struct {
	RunID       string
	Job         string
	Attempt     int
	ScheduledAt time.Time
	Trigger     Trigger
	Payload     string
	Node        string
	// ParentRunID is the run whose end made this one (a chain); empty
	// for any other run.
	ParentRunID string
}

type infoKey struct{}

// WithInfo returns a context carrying info.
func WithInfo(ctx context.Context, info Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the run a handler executes.
func InfoFrom(ctx context.Context) (Info, bool) {
	info, ok := ctx.Value(infoKey{}).(Info)
	return info, ok
}

// Product defaults of a job's settings.
const (
	DefaultTimeout       = time.Hour
	DefaultKillGrace     = 10 * time.Second
	DefaultMisfireGrace  = time.Minute
	DefaultCatchupWindow = 24 * time.Hour
	DefaultCatchupMax    = 100
	DefaultOutputLimit   = 64 << 10
	DefaultOverlap       = OverlapAllow
	DefaultCatchup       = CatchupLatest
)

// WithDefaults fills the settings left zero with the product defaults.
// Timeout < 0 means no timeout and is turned into 0.
func (d *Definition) WithDefaults() {
	if d.Timeout == 0 {
		d.Timeout = DefaultTimeout
	} else if d.Timeout < 0 {
		d.Timeout = 0
	}
	if d.KillGrace == 0 {
		d.KillGrace = DefaultKillGrace
	}
	if d.MisfireGrace == 0 {
		d.MisfireGrace = DefaultMisfireGrace
	}
	if d.CatchupWindow == 0 {
		d.CatchupWindow = DefaultCatchupWindow
	}
	if d.CatchupMax == 0 {
		d.CatchupMax = DefaultCatchupMax
	}
	if d.OutputLimit == 0 {
		d.OutputLimit = DefaultOutputLimit
	}
	if d.Overlap == "" {
		d.Overlap = DefaultOverlap
	}
	if d.Catchup == "" {
		d.Catchup = DefaultCatchup
	}
	if d.Retry == (RetryPolicy{}) {
		d.Retry = DefaultRetry
	}
}
