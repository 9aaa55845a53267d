package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/dashboard"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store"
)

// engine is the control socket's view of this node: control.Engine over
// the scheduler and the store.
type engine struct {
	sched *scheduler.Scheduler
	st    store.Store
	// reload re-reads the config, as SIGHUP does, and logs who asked
	// (actor).
	reload func(ctx context.Context, actor string) error
}

var (
	_ control.Engine        = (*engine)(nil)
	_ dashboard.TickSource  = (*engine)(nil)
	_ dashboard.JobLister   = (*engine)(nil)
	_ control.MetricsSource = (*engine)(nil)
)

// controlError marks the scheduler's errors with the control kinds; the
// store's and the jobs package's sentinels are mapped by the server.
func controlError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, scheduler.ErrUnknownJob):
		return control.Mark(err, control.ErrUnknownJob)
	case errors.Is(err, scheduler.ErrInvalidWindow):
		return control.Mark(err, control.ErrInvalidWindow)
	case errors.Is(err, scheduler.ErrJobDeclared):
		return control.Mark(err, control.ErrJobDeclared)
	case errors.Is(err, scheduler.ErrNotExpected):
		return control.Mark(err, control.ErrNotExpected)
	}
	return err
}

// actor is who makes the request of ctx, as runs and events record it
// (control.Caller.Actor).
func actor(ctx context.Context) string {
	c, _ := control.CallerFrom(ctx)
	return c.Actor()
}

func (e *engine) Trigger(ctx context.Context, job string, p control.TriggerParams) (*jobs.Run, error) {
	r, err := e.sched.Trigger(ctx, job, scheduler.TriggerParams{
		DedupID: p.DedupID, Payload: p.Payload, NotBefore: p.NotBefore, NotAfter: p.NotAfter, Actor: actor(ctx),
	})
	return r, controlError(err)
}

func (e *engine) Cancel(ctx context.Context, id string) (*jobs.Run, error) {
	r, err := e.sched.Cancel(ctx, id, actor(ctx))
	return r, controlError(err)
}

func (e *engine) Rerun(ctx context.Context, id string) (*jobs.Run, error) {
	r, err := e.sched.Rerun(ctx, id, actor(ctx))
	return r, controlError(err)
}

func (e *engine) Pause(ctx context.Context, job string) error  { return e.setPaused(ctx, job, true) }
func (e *engine) Resume(ctx context.Context, job string) error { return e.setPaused(ctx, job, false) }

func (e *engine) setPaused(ctx context.Context, job string, paused bool) error {
	d, ok := e.sched.Job(job)
	switch {
	case !ok:
		return control.Mark(fmt.Errorf("%w %q", scheduler.ErrUnknownJob, job), control.ErrUnknownJob)
	case d.Schedule == nil:
		return control.Mark(fmt.Errorf("job %q has no schedule to pause or resume (it is a %s job)", job, d.Kind()), control.ErrNoSchedule)
	}
	var err error
	if paused {
		_, err = e.sched.Pause(ctx, job, actor(ctx))
	} else {
		_, err = e.sched.Resume(ctx, job, actor(ctx))
	}
	return controlError(err)
}

// Backfill makes runs of a cron job's past ticks that have none.
func (e *engine) Backfill(ctx context.Context, job string, p control.BackfillParams) (*control.BackfillReply, error) {
	res, err := e.sched.Backfill(ctx, job, scheduler.BackfillParams{From: p.From, To: p.To, DryRun: p.DryRun,
		MaxParallel: p.MaxParallel, Yes: p.Yes, Actor: actor(ctx)})
	switch {
	case errors.Is(err, scheduler.ErrNoSchedule):
		return nil, control.Mark(err, control.ErrNoSchedule)
	case errors.Is(err, scheduler.ErrBadBackfill):
		return nil, control.Mark(err, control.ErrBadRequest)
	case err != nil:
		return nil, controlError(err)
	}
	reply := &control.BackfillReply{Job: res.Job, From: res.From, To: res.To, TimeZone: res.Zone, Ticks: res.Ticks,
		Taken: res.Taken, DryRun: res.DryRun}
	for _, t := range res.List {
		reply.List = append(reply.List, control.BackfillTick{At: t.At, RunID: t.RunID})
	}
	if b := res.Backfill; b != nil {
		reply.Backfill = &control.BackfillState{ID: b.ID, MaxParallel: b.MaxParallel, Created: b.Created,
			Skipped: b.Skipped, Done: b.Done()}
		if !b.Done() {
			next := b.Next.UTC()
			reply.Backfill.Next = &next
		}
	}
	return reply, nil
}

// Forget ends the expectation of a job that this node does not declare.
func (e *engine) Forget(ctx context.Context, job string) error {
	return controlError(e.sched.Forget(ctx, job, actor(ctx)))
}

func (e *engine) Jobs(ctx context.Context) ([]control.JobInfo, error) {
	return e.JobsNamed(ctx, e.JobNames())
}

// JobNames are the names of the declared jobs, then of the retired jobs
// the cluster still expects: those Jobs describes, in its order.
func (e *engine) JobNames() []string {
	defs, retired := e.sched.Jobs(), e.sched.Retired()
	names := make([]string, 0, len(defs)+len(retired))
	for _, d := range defs {
		names = append(names, d.Name)
	}
	for _, r := range retired {
		names = append(names, r.Job)
	}
	return names
}

// JobsNamed describes the named jobs as Jobs does, in the order given, at
// the cost of those alone: the dashboard pages through many jobs with
// it. A name that is no job is left out.
func (e *engine) JobsNamed(ctx context.Context, names []string) ([]control.JobInfo, error) {
	var (
		known   []string
		defs    []*jobs.Definition // of known, nil for a retired job
		cron    []string
		retired map[string]scheduler.RetiredJob
	)
	for _, name := range names {
		d, ok := e.sched.Job(name)
		if !ok {
			if retired == nil {
				retired = map[string]scheduler.RetiredJob{}
				for _, r := range e.sched.Retired() {
					retired[r.Job] = r
				}
			}
			if _, ok := retired[name]; !ok {
				continue
			}
		} else if d.Schedule != nil {
			cron = append(cron, d.Name)
		}
		known, defs = append(known, name), append(defs, d)
	}
	last, err := e.st.JobsLastRun(ctx, known)
	if err != nil {
		return nil, err
	}
	// The cursors are read from the store, which counts the skipped ticks
	// and sees a pause made through any node.
	cursors, err := e.st.ScheduleCursors(ctx, cron)
	if err != nil {
		return nil, err
	}
	out := make([]control.JobInfo, 0, len(known))
	for i, d := range defs {
		if d == nil {
			// A job no config here declares, that the cluster still expects.
			r := retired[known[i]]
			j := control.JobInfo{Name: r.Job, ExpectSuccessWithin: r.Within.String(), Overdue: r.Overdue,
				OnSuccess: []string{}, OnFailure: []string{}}
			setLastRun(&j, last[r.Job])
			out = append(out, j)
			continue
		}
		j := control.JobInfo{Name: d.Name, Kind: d.Kind(), At: utcPtr(d.At), NextFire: utcPtr(e.sched.NextFire(d.Name)), Declared: true,
			OnSuccess: nonNil(d.OnSuccess), OnFailure: nonNil(d.OnFailure)}
		if d.ExpectSuccessWithin > 0 {
			j.ExpectSuccessWithin = d.ExpectSuccessWithin.String()
		}
		if d.Schedule != nil {
			j.Schedule = d.Schedule.String()
			if l, ok := d.Schedule.(interface{ Location() *time.Location }); ok && l.Location() != nil {
				j.Timezone = l.Location().String()
			}
			if c := cursors[d.Name]; c != nil {
				j.Paused, j.Skipped, j.LastSkippedAt = c.Paused, c.Skipped, utcPtr(c.LastSkippedAt)
				if c.Paused {
					j.NextFire = nil
				}
			}
		}
		switch {
		case j.NextFire == nil:
		case d.Schedule != nil:
			j.NextStart = utcPtr(d.TickStart(*j.NextFire))
		default:
			start, _ := d.Window(jobs.TriggerOnce, *j.NextFire)
			j.NextStart = utcPtr(start)
		}
		j.Overdue = d.ExpectSuccessWithin > 0 && e.sched.Overdue(d.Name)
		setLastRun(&j, last[d.Name])
		out = append(out, j)
	}
	return out, nil
}

// nonNil returns names, or an empty list for none (JSON [] rather than
// null).
func nonNil(names []string) []string {
	if names == nil {
		return []string{}
	}
	return names
}

// setLastRun fills in j's last run from r (nil: none).
func setLastRun(j *control.JobInfo, r *jobs.Run) {
	if r == nil {
		return
	}
	j.LastRunID, j.LastRunStatus = r.ID, r.Status
	switch {
	case !r.FinishedAt.IsZero():
		j.LastRunAt = utcPtr(r.FinishedAt)
	case !r.StartedAt.IsZero():
		j.LastRunAt = utcPtr(r.StartedAt)
	default:
		j.LastRunAt = utcPtr(r.CreatedAt)
	}
}

// NextTicks are the coming ticks of a cron job from its next fire time
// (none while paused), each with the start its jitter gives it, within
// the job's not_before and not_after.
func (e *engine) NextTicks(job string, n int) []dashboard.Tick {
	d, ok := e.sched.Job(job)
	if !ok || d.Schedule == nil {
		return nil
	}
	t := e.sched.NextFire(job) // zero while paused
	if !t.IsZero() && t.Before(d.NotBefore) {
		t = d.Schedule.Next(d.NotBefore.Add(-time.Nanosecond))
	}
	var out []dashboard.Tick
	for ; !t.IsZero() && len(out) < n && d.InLife(t); t = d.Schedule.Next(t) {
		out = append(out, dashboard.Tick{Fire: t, Start: d.TickStart(t)})
	}
	return out
}

func (e *engine) Health(ctx context.Context) control.Health {
	h := e.sched.Health(ctx)
	return control.Health{
		OK: h.OK, Problems: h.Problems, Node: e.sched.NodeID(), Incarnation: h.Incarnation,
		LastHeartbeat: utcPtr(h.LastHeartbeat), LastLoop: utcPtr(h.LastLoop), Running: h.Running,
	}
}

// Metrics are the scheduler's figures and the store's statement count.
func (e *engine) Metrics() control.Metrics {
	m := e.sched.Metrics()
	results := make(map[string]int64, len(m.Results))
	for st, n := range m.Results {
		results[string(st)] = n
	}
	stmts := int64(-1)
	if c, ok := e.st.(interface{ Statements() int64 }); ok {
		stmts = c.Statements()
	}
	return control.Metrics{
		Node: m.Node, Incarnation: m.Incarnation, Version: m.Version, Jobs: m.Jobs, Concurrency: m.Concurrency,
		Running: m.Running, Fenced: m.Fenced, LastHeartbeat: m.LastHeartbeat, LastLoop: m.LastLoop,
		TicksFired: m.TicksFired, AttemptsStarted: m.AttemptsStarted, Results: results,
		StaleWrites: m.StaleWrites, StoreStatements: stmts, FireBatch: m.FireBatch,
	}
}

// WriteJobMetrics writes the scheduler's per-job metrics.
func (e *engine) WriteJobMetrics(w io.Writer) { e.sched.WriteJobMetrics(w) }

// Progress is fenced by the run id and attempt the job reports and by this
// node's incarnation: the job runs on the node whose socket it was given.
func (e *engine) Progress(ctx context.Context, runID string, attempt, percent int, message string) error {
	f := jobs.Fence{RunID: runID, Attempt: attempt, Incarnation: e.sched.Incarnation()}
	return e.st.RunProgress(ctx, f, percent, message)
}

// LiveOutput is the output, as it is written, of the attempt of run
// runID running on this node.
func (e *engine) LiveOutput(runID string) (control.LiveOutput, int, bool) {
	live, attempt, ok := e.sched.LiveAttempt(runID)
	if !ok {
		return nil, 0, false
	}
	return live, attempt, true
}

// NodeID is this node's id.
func (e *engine) NodeID() string { return e.sched.NodeID() }

// CheckAttemptToken checks a job's SCHEDULERD_ATTEMPT_TOKEN.
func (e *engine) CheckAttemptToken(runID string, attempt int, token string) bool {
	return e.sched.CheckAttemptToken(runID, attempt, token)
}

// Reload outlives the request: a client that goes away does not cut a
// reload in half.
func (e *engine) Reload(ctx context.Context) error {
	return control.Mark(e.reload(context.WithoutCancel(ctx), actor(ctx)), control.ErrReloadRejected)
}

func utcPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
