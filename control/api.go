package control

import (
	"context"
	"errors"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Engine is what the server needs from the scheduler of this node. The
// daemon implements it over its *scheduler.Scheduler; errors that callers
// branch on are marked with the Err* kinds of this package (see Mark) or are
// the store's and the jobs package's sentinels.
type Engine interface {
	// Trigger makes a manual run of a declared job.
	Trigger(ctx context.Context, job string, p TriggerParams) (*jobs.Run, error)
	// Cancel cancels a waiting run or stops a running attempt.
	Cancel(ctx context.Context, id string) (*jobs.Run, error)
	// Rerun makes a new run of the job of run id, linked to it.
	Rerun(ctx context.Context, id string) (*jobs.Run, error)
	// Pause and Resume stop and restart a cron job's schedule.
	Pause(ctx context.Context, job string) error
	Resume(ctx context.Context, job string) error
	// Forget ends the expectation (expect_success_within) that the
	// cluster keeps of a job this node does not declare: ErrJobDeclared
	// when it declares it, ErrNotExpected when there is none.
	Forget(ctx context.Context, job string) error
	// Backfill makes runs of a cron job's past ticks that have none, or
	// lists them (BackfillParams.DryRun): ErrNoSchedule for a job without
	// a schedule, ErrBadRequest for a range or options it refuses.
	Backfill(ctx context.Context, job string, p BackfillParams) (*BackfillReply, error)
	// Jobs describes the declared jobs, in declaration order, then the
	// jobs the cluster expects that this node does not declare, by name.
	Jobs(ctx context.Context) ([]JobInfo, error)
	// Health says whether this node works.
	Health(ctx context.Context) Health
	// Progress records the progress of the attempt of run runID numbered
	// attempt, fenced by this node's incarnation.
	Progress(ctx context.Context, runID string, attempt, percent int, message string) error
	// CheckAttemptToken reports whether token is the one given to the
	// process of that attempt (SCHEDULERD_ATTEMPT_TOKEN).
	CheckAttemptToken(runID string, attempt int, token string) bool
	// Reload re-reads the config; an error means it was rejected and the
	// running config stays.
	Reload(ctx context.Context) error
	// LiveOutput returns the output, as it is written, of the attempt of
	// run runID that runs on this node, and the attempt's number; false
	// when no attempt of the run runs here.
	LiveOutput(runID string) (LiveOutput, int, bool)
	// NodeID is this node's id, as runs and attempts name it.
	NodeID() string
}

// AttemptTokenHeader carries "ATTEMPT:TOKEN", the attempt number and
// token that the daemon gave a job's process (SCHEDULERD_ATTEMPT and
// SCHEDULERD_ATTEMPT_TOKEN). A request with it acts as that attempt: it
// may report the attempt's progress and cancel its run, whatever the
// caller's user, and nothing else. Progress needs it.
const AttemptTokenHeader = "Schedulerd-Attempt-Token"

// TriggerParams are the options of a manual trigger.
type TriggerParams struct {
	DedupID   string
	Payload   string
	NotBefore time.Time // zero: now
	NotAfter  time.Time // zero: none
}

// Kinds of errors. The server maps them to HTTP statuses and codes, and the
// client's *APIError matches them with errors.Is, so a caller branches on
// the same values on both sides of the socket. store.ErrNotFound,
// store.ErrDuplicate, store.ErrFenced and jobs.ErrInvalidTransition are
// mapped too.
var (
	// ErrUnknownJob: no declared job has that name (404 unknown_job).
	ErrUnknownJob = errors.New("unknown job")
	// ErrUnknownRun: no run has that id (404 unknown_run).
	ErrUnknownRun = errors.New("unknown run")
	// ErrDuplicate: a non-terminal run of the job has the dedup id (409 duplicate).
	ErrDuplicate = errors.New("duplicate dedup id")
	// ErrInvalidWindow: the trigger's window can never open (400 invalid_window).
	ErrInvalidWindow = errors.New("invalid window")
	// ErrFenced: a progress report from an attempt that is no longer the
	// run's current one on this node (409 fenced).
	ErrFenced = errors.New("stale attempt")
	// ErrInvalidTransition: the run cannot make that change, e.g. cancel of
	// a finished run (409 invalid_transition).
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrNoSchedule: pause or resume of a job without a schedule (409 no_schedule).
	ErrNoSchedule = errors.New("job has no schedule")
	// ErrJobDeclared: forget of a job that this node declares; its
	// expectation is its config's (409 declared).
	ErrJobDeclared = errors.New("job is declared")
	// ErrNotExpected: forget of a job the cluster keeps no expectation of
	// (404 not_expected).
	ErrNotExpected = errors.New("job is not expected")
	// ErrReloadRejected: the config did not load; the running one stays
	// (422 reload_rejected).
	ErrReloadRejected = errors.New("reload rejected")
	// ErrBadRequest: the request is malformed (400 bad_request, or 404, 405
	// and 413 for unknown paths, wrong methods and oversized bodies).
	ErrBadRequest = errors.New("bad request")
	// ErrPermissionDenied: the caller may not use the socket (403
	// permission_denied, or EACCES when connecting), or the API without a
	// valid token (401 unauthorized) or with a token whose role does not
	// allow the request (403 permission_denied).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrDaemonNotRunning: nothing listens on the socket path.
	ErrDaemonNotRunning = errors.New("the daemon is not running")
	// ErrBusy: the daemon serves as many long polls, or makes as many
	// attempts replies, as it does at once (429 busy); ask again after the
	// reply's Retry-After, as the Client does.
	ErrBusy = errors.New("the daemon is busy")
	// ErrRateLimited: the API token made more requests than its rate
	// allows (429 rate_limited); ask again after the reply's Retry-After,
	// as the Client does.
	ErrRateLimited = errors.New("rate limited")
)

// Error codes of the JSON error body.
const (
	CodeBadRequest        = "bad_request"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeTooLarge          = "too_large"
	CodeUnknownJob        = "unknown_job"
	CodeUnknownRun        = "unknown_run"
	CodeDuplicate         = "duplicate"
	CodeInvalidWindow     = "invalid_window"
	CodeFenced            = "fenced"
	CodeInvalidTransition = "invalid_transition"
	CodeNoSchedule        = "no_schedule"
	CodeJobDeclared       = "declared"
	CodeNotExpected       = "not_expected"
	CodeReloadRejected    = "reload_rejected"
	CodePermissionDenied  = "permission_denied"
	CodeUnhealthy         = "unhealthy"
	CodeBusy              = "busy"
	CodeUnauthorized      = "unauthorized"
	CodeRateLimited       = "rate_limited"
	CodeInternal          = "internal"
)

// codeKinds maps codes to the kinds APIError matches.
var codeKinds = map[string]error{
	CodeBadRequest:        ErrBadRequest,
	CodeNotFound:          ErrBadRequest,
	CodeMethodNotAllowed:  ErrBadRequest,
	CodeTooLarge:          ErrBadRequest,
	CodeUnknownJob:        ErrUnknownJob,
	CodeUnknownRun:        ErrUnknownRun,
	CodeDuplicate:         ErrDuplicate,
	CodeInvalidWindow:     ErrInvalidWindow,
	CodeFenced:            ErrFenced,
	CodeInvalidTransition: ErrInvalidTransition,
	CodeNoSchedule:        ErrNoSchedule,
	CodeJobDeclared:       ErrJobDeclared,
	CodeNotExpected:       ErrNotExpected,
	CodeReloadRejected:    ErrReloadRejected,
	CodePermissionDenied:  ErrPermissionDenied,
	CodeBusy:              ErrBusy,
	CodeUnauthorized:      ErrPermissionDenied,
	CodeRateLimited:       ErrRateLimited,
}

// Mark returns an error with err's message that also matches kind (one of
// the Err* values of this package) with errors.Is.
func Mark(err, kind error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, kind: kind}
}

type markedError struct{ err, kind error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.kind} }

// APIError is an error reply of the server.
type APIError struct {
	Status  int    // HTTP status
	Code    string // one of the Code* constants
	Message string
	// RetryAfter is when to ask again, for the codes busy and rate_limited.
	RetryAfter time.Duration
}

func (e *APIError) Error() string { return e.Message }

// Is matches the kind of error that the code stands for.
func (e *APIError) Is(target error) bool {
	k, ok := codeKinds[e.Code]
	return ok && k == target
}

// errorBody is the JSON of an error reply.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// TriggerRequest is the body of POST /v1/jobs/{job}/trigger. Times are RFC
// 3339; the command line resolves relative times ("+30m") before sending.
type TriggerRequest struct {
	DedupID   string     `json:"dedup_id,omitempty"`
	NotBefore *time.Time `json:"not_before,omitempty"`
	NotAfter  *time.Time `json:"not_after,omitempty"`
	Payload   string     `json:"payload,omitempty"`
}

// ProgressRequest is the body of POST /v1/runs/{id}/progress. Attempt is
// the SCHEDULERD_ATTEMPT of the job that reports.
type ProgressRequest struct {
	Attempt int    `json:"attempt"`
	Percent int    `json:"percent"`
	Message string `json:"message,omitempty"`
}

// Bounds of request fields.
const (
	MaxDedupID         = 256
	MaxPayload         = 32 << 10
	MaxProgressMessage = 1024
)

// Run is a run as the API shows it. Times are UTC; a time that is not set is
// null.
type Run struct {
	ID              string       `json:"id"`
	Job             string       `json:"job"`
	Status          jobs.Status  `json:"status"`
	Attempt         int          `json:"attempt"`
	MaxAttempts     int          `json:"max_attempts"`
	Trigger         jobs.Trigger `json:"trigger"`
	ScheduledAt     *time.Time   `json:"scheduled_at"`
	NotBefore       *time.Time   `json:"not_before"`
	NotAfter        *time.Time   `json:"not_after"`
	CreatedAt       *time.Time   `json:"created_at"`
	StartedAt       *time.Time   `json:"started_at"`
	FinishedAt      *time.Time   `json:"finished_at"`
	Node            string       `json:"node"`
	ExitCode        *int         `json:"exit_code"`
	Error           string       `json:"error"`
	Reason          jobs.Reason  `json:"reason"`
	DedupID         string       `json:"dedup_id"`
	RerunOf         string       `json:"rerun_of"`
	Payload         string       `json:"payload"`
	Progress        int          `json:"progress"`
	ProgressMessage string       `json:"progress_message"`
	CancelRequested bool         `json:"cancel_requested"`
	// Actor is who made the run (Caller.Actor), "" for the engine;
	// CancelledBy who asked to cancel it, "" when no one did.
	Actor       string `json:"actor"`
	CancelledBy string `json:"cancelled_by"`
	// ParentRunID is the run whose end made this one (trigger chain);
	// "" for any other run.
	ParentRunID string `json:"parent_run_id"`
}

// NewRun converts a run of the store.
func NewRun(r *jobs.Run) Run {
	return Run{
		ID: r.ID, Job: r.Job, Status: r.Status, Attempt: r.Attempt, MaxAttempts: r.MaxAttempts,
		Trigger: r.Trigger, ScheduledAt: utc(r.ScheduledAt), NotBefore: utc(r.NotBefore), NotAfter: utc(r.NotAfter),
		CreatedAt: utc(r.CreatedAt), StartedAt: utc(r.StartedAt), FinishedAt: utc(r.FinishedAt),
		Node: r.Node, ExitCode: r.ExitCode, Error: r.Error, Reason: r.Reason, DedupID: r.DedupID,
		RerunOf: r.RerunOf, Payload: r.Payload, Progress: r.Progress, ProgressMessage: r.ProgressMessage,
		CancelRequested: r.CancelRequested, Actor: r.Actor, CancelledBy: r.CancelledBy, ParentRunID: r.ParentRunID,
	}
}

// Attempt is one attempt of a run.
type Attempt struct {
	Number      int         `json:"number"`
	Node        string      `json:"node"`
	Incarnation string      `json:"incarnation"`
	StartedAt   *time.Time  `json:"started_at"`
	FinishedAt  *time.Time  `json:"finished_at"`
	Status      jobs.Status `json:"status"`
	ExitCode    *int        `json:"exit_code"`
	Error       string      `json:"error"`
	Reason      jobs.Reason `json:"reason"`
	Output      string      `json:"output"`
	OutputBytes int64       `json:"output_bytes"`
	Truncated   bool        `json:"truncated"`
}

func newAttempt(a *jobs.Attempt) Attempt {
	return Attempt{
		Number: a.Number, Node: a.Node, Incarnation: a.Incarnation, StartedAt: utc(a.StartedAt),
		FinishedAt: utc(a.FinishedAt), Status: a.Status, ExitCode: a.ExitCode, Error: a.Error,
		Reason: a.Reason, Output: a.Output, OutputBytes: a.OutputBytes, Truncated: a.Truncated,
	}
}

// Event is one entry of a run's history.
type Event struct {
	Time    *time.Time  `json:"time"`
	Node    string      `json:"node"`
	Attempt int         `json:"attempt"`
	From    jobs.Status `json:"from"`
	To      jobs.Status `json:"to"`
	Reason  jobs.Reason `json:"reason"`
	Message string      `json:"message"`
	// Actor is who asked for the change (Caller.Actor), "" for the engine.
	Actor string `json:"actor"`
}

func newEvent(e *jobs.Event) Event {
	return Event{Time: utc(e.Time), Node: e.Node, Attempt: e.Attempt, From: e.From, To: e.To, Reason: e.Reason,
		Message: e.Message, Actor: e.Actor}
}

// JobInfo is what `schedulerd jobs` shows about a declared job.
type JobInfo struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // cron, once or trigger
	Schedule string `json:"schedule"`
	Timezone string `json:"timezone"`
	// At is the time of a one-off job.
	At *time.Time `json:"at"`
	// NextFire is the next tick of a cron job (null while paused), the at
	// time of a one-off job, null for a trigger-only job.
	NextFire *time.Time `json:"next_fire"`
	// NextStart is when the run of that tick may start: NextFire delayed
	// by the job's jitter (jobs.Definition.TickStart), or for a one-off job
	// its not_before.
	NextStart     *time.Time  `json:"next_start"`
	Paused        bool        `json:"paused"`
	LastRunID     string      `json:"last_run_id"`
	LastRunStatus jobs.Status `json:"last_run_status"`
	// LastRunAt is when the last run finished, else started, else was made.
	LastRunAt *time.Time `json:"last_run_at"`
	// Skipped counts the ticks skipped (missed beyond misfire_grace and not
	// caught up, or skipped by overlap = "skip").
	Skipped       int64      `json:"skipped"`
	LastSkippedAt *time.Time `json:"last_skipped_at"`
	// Overdue says that no run of the job completed within its
	// expect_success_within (cluster-wide); always false without it.
	Overdue bool `json:"overdue"`
	// Declared is false for a job that this node's config does not
	// declare but that the cluster still expects to succeed (a reload
	// removed it): it has no kind, schedule or next fire, and
	// `schedulerd forget` ends its expectation.
	Declared bool `json:"declared"`
	// ExpectSuccessWithin is the job's expect_success_within as a Go
	// duration ("26h0m0s"); "" without it.
	ExpectSuccessWithin string `json:"expect_success_within"`
	// OnSuccess and OnFailure are the jobs a run of this job makes a
	// run of when it completes, or ends dead_letter or expired (its
	// chain); empty for none.
	OnSuccess []string `json:"on_success"`
	OnFailure []string `json:"on_failure"`
}

// Health says whether this node works.
type Health struct {
	OK            bool       `json:"ok"`
	Problems      []string   `json:"problems"`
	Node          string     `json:"node"`
	Incarnation   string     `json:"incarnation"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	LastLoop      *time.Time `json:"last_loop"`
	Running       int        `json:"running"`
}

// Node is a registered daemon process.
type Node struct {
	ID          string     `json:"id"`
	Incarnation string     `json:"incarnation"`
	Host        string     `json:"host"`
	PID         int        `json:"pid"`
	Version     string     `json:"version"`
	StartedAt   *time.Time `json:"started_at"`
	HeartbeatAt *time.Time `json:"heartbeat_at"`
	// AgeSeconds is how long ago the heartbeat was, by the store's clock.
	AgeSeconds float64 `json:"age_seconds"`
	// State is active, or inactive when the heartbeat is older than the
	// inactive threshold (its runs are recovered by other nodes).
	State string   `json:"state"`
	Jobs  []string `json:"jobs"`
}

// NewNode converts a node of the store; it is inactive when its heartbeat
// is older than inactive.
func NewNode(n *store.Node, inactive time.Duration) Node {
	state := "active"
	if n.Age > inactive {
		state = "inactive"
	}
	js := n.Jobs
	if js == nil {
		js = []string{}
	}
	return Node{
		ID: n.ID, Incarnation: n.Incarnation, Host: n.Host, PID: n.PID, Version: n.Version,
		StartedAt: utc(n.StartedAt), HeartbeatAt: utc(n.HeartbeatAt), AgeSeconds: n.Age.Seconds(),
		State: state, Jobs: js,
	}
}

// PauseReply is the reply of pause and resume.
type PauseReply struct {
	Job    string `json:"job"`
	Paused bool   `json:"paused"`
}

// ForgetReply is the reply of a forget.
type ForgetReply struct {
	Job       string `json:"job"`
	Forgotten bool   `json:"forgotten"`
}

// ReloadReply is the reply of a reload that was applied.
type ReloadReply struct {
	Applied bool `json:"applied"`
}

// utc returns a pointer to t in UTC, or nil for the zero time.
func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// Time returns a time from the API as a time.Time (zero for null).
func Time(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
