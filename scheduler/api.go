package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TriggerParams are the options of a manual trigger.
type TriggerParams struct {
	DedupID   string
	Payload   string
	NotBefore time.Time // zero: now
	NotAfter  time.Time // zero: none
	// Actor is who asks, recorded on the run and its creation event
	// (jobs.Run.Actor): the control API passes "api:TOKEN" or
	// "socket:USER". Empty for a program's own trigger.
	Actor string
}

// ErrInvalidWindow is returned for a trigger whose window can never open.
var ErrInvalidWindow = errors.New("invalid window")

// Trigger makes a manual run of a declared job. store.ErrDuplicate when a
// non-terminal run of the job has the same dedup id.
func (s *Scheduler) Trigger(ctx context.Context, job string, p TriggerParams) (*jobs.Run, error) {
	d, ok := s.Job(job)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, job)
	}
	now := s.clock.Now()
	nb, na := p.NotBefore, p.NotAfter
	if nb.IsZero() {
		nb = now
	}
	if !d.NotBefore.IsZero() && nb.Before(d.NotBefore) {
		nb = d.NotBefore
	}
	if !d.NotAfter.IsZero() && (na.IsZero() || d.NotAfter.Before(na)) {
		na = d.NotAfter
	}
	if err := jobs.ValidateWindow(nb, na); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidWindow, err)
	}
	if !na.IsZero() && !na.After(now) {
		return nil, fmt.Errorf("%w: not_after %s has passed", ErrInvalidWindow, na.UTC().Format(time.RFC3339))
	}
	r, err := s.st.RunInsert(ctx, store.RunInsertParams{
		Job: job, Trigger: jobs.TriggerManual, ScheduledAt: now, NotBefore: nb, NotAfter: na,
		Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, DedupID: p.DedupID, Payload: p.Payload,
		Node: s.cfg.NodeID, Actor: p.Actor, Now: s.storeNow(now),
	})
	if err != nil {
		return nil, err
	}
	s.logRun(ctx, r, "", "run triggered", "actor", r.Actor)
	s.Wake()
	return r, nil
}

// Rerun makes a new run of the job of run id, linked to it by rerun_of,
// on behalf of actor (see TriggerParams.Actor).
func (s *Scheduler) Rerun(ctx context.Context, id, actor string) (*jobs.Run, error) {
	old, err := s.st.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	d, ok := s.Job(old.Job)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, old.Job)
	}
	now := s.clock.Now()
	nb, na := d.Window(jobs.TriggerRerun, now)
	r, err := s.st.RunInsert(ctx, store.RunInsertParams{
		Job: old.Job, Trigger: jobs.TriggerRerun, ScheduledAt: now, NotBefore: nb, NotAfter: na,
		Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, RerunOf: old.ID, Payload: old.Payload,
		Node: s.cfg.NodeID, Actor: actor, Now: s.storeNow(now),
	})
	if err != nil {
		return nil, err
	}
	s.logRun(ctx, r, "", "run rerun", "actor", r.Actor)
	s.Wake()
	return r, nil
}

// Cancel cancels a pending or retrying run at once, or stops a running
// attempt (its process group gets SIGTERM, then SIGKILL after kill_grace)
// and ends the run cancelled, on behalf of actor (see TriggerParams.Actor),
// whom the run records as CancelledBy.
//
// A waiting run whose not_after has come has expired, whether or not the
// loop has recorded it yet (it looks once a second at most, and between
// its wakes): the expiries due are recorded first, and the cancel of such
// a run is refused as of a run already ended.
func (s *Scheduler) Cancel(ctx context.Context, id, actor string) (*jobs.Run, error) {
	now := s.clock.Now()
	if err := s.expireRuns(ctx, now); err != nil {
		return nil, fmt.Errorf("expire runs before the cancel: %w", err)
	}
	r, err := s.st.RunCancel(ctx, store.RunCancelParams{
		ID: id, Node: s.cfg.NodeID, Actor: actor, Reason: jobs.ReasonCancelled, Now: s.storeNow(now),
	})
	if err != nil {
		return nil, err
	}
	if r.Status == jobs.StatusRunning {
		s.stopLocal(r.ID, jobs.ReasonCancelled)
		s.log.InfoContext(ctx, "cancel requested for a running attempt", "job", r.Job, "run", r.ID, "attempt", r.Attempt,
			"node", r.Node, "actor", actor)
	} else {
		s.logRun(ctx, r, "", "run cancelled", "actor", actor)
		s.noteRunsEnded(r)
	}
	s.Wake()
	return r, nil
}

// Pause stops a cron job's schedule (triggers still work), persistently.
// The log says who asked (actor, see TriggerParams.Actor); the store does
// not keep it.
func (s *Scheduler) Pause(ctx context.Context, job, actor string) (*store.Cursor, error) {
	return s.setPaused(ctx, job, true, actor)
}

// Resume restarts a paused schedule from now: ticks that fell while it was
// paused are not caught up. The log says who asked, as for Pause.
func (s *Scheduler) Resume(ctx context.Context, job, actor string) (*store.Cursor, error) {
	return s.setPaused(ctx, job, false, actor)
}

func (s *Scheduler) setPaused(ctx context.Context, job string, paused bool, actor string) (*store.Cursor, error) {
	d, ok := s.Job(job)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, job)
	}
	if d.Schedule == nil {
		return nil, fmt.Errorf("job %q has no schedule to pause", job)
	}
	c, err := s.st.SchedulePause(ctx, job, paused, s.storeNow(s.clock.Now()))
	if err != nil {
		return nil, err
	}
	s.setCursor(job, c)
	s.log.InfoContext(ctx, map[bool]string{true: "schedule paused", false: "schedule resumed"}[paused], "job", job,
		"actor", actor)
	s.Wake()
	return c, nil
}

// NextFire returns the next fire time of a declared job: the next tick of a
// cron job (zero while paused), the at time of a one-off job.
func (s *Scheduler) NextFire(job string) time.Time {
	s.mu.Lock()
	j := s.declared.job(job)
	var (
		d      *jobs.Definition
		last   time.Time
		active bool
	)
	if j != nil {
		d, last, active = j.def, j.lastTick(), j.active()
	}
	s.mu.Unlock()
	switch {
	case d == nil:
		return time.Time{}
	case d.Schedule == nil:
		return d.At
	case !active:
		return time.Time{}
	}
	now := s.clock.Now()
	if last.After(now) {
		return last // fired ahead of its time: still to come
	}
	if last.Before(now.Add(-d.MisfireGrace)) {
		last = now.Add(-d.MisfireGrace)
	}
	return d.Schedule.Next(last)
}

// Health describes whether this node works.
type Health struct {
	OK            bool
	Problems      []string
	Incarnation   string
	LastHeartbeat time.Time
	LastLoop      time.Time
	Running       int
}

// Health checks that the store answers, the heartbeat is fresh and the
// scheduling loop is alive. Each call pings the store once (a bounded
// query, see pingTimeout): callers that serve health to clients share and
// briefly cache the result instead of calling it per request, as the
// control package's listeners do, so that a flood of health requests does
// not become a flood of queries.
func (s *Scheduler) Health(ctx context.Context) Health {
	now := s.clock.Now()
	h := Health{
		Incarnation:   s.Incarnation(),
		LastHeartbeat: time.Unix(0, s.lease.lastHeartbeat.Load()),
		LastLoop:      time.Unix(0, s.loop.last.Load()),
		Running:       s.Running(),
	}
	if !s.life.live.Load() {
		h.Problems = append(h.Problems, "scheduler not started")
	}
	if err := s.pingStore(ctx); err != nil {
		h.Problems = append(h.Problems, "store unreachable: "+err.Error())
	}
	// Stale from the moment the node stops starting attempts without a
	// heartbeat first (leaseHeld).
	if !s.leaseHeld(now) {
		h.Problems = append(h.Problems, fmt.Sprintf("heartbeat is stale: last success %s ago",
			now.Sub(h.LastHeartbeat).Round(time.Second)))
	}
	if age := now.Sub(h.LastLoop); age > 2*s.cfg.PollInterval+5*time.Second {
		h.Problems = append(h.Problems, fmt.Sprintf("scheduling loop stuck: last iteration %s ago", age.Round(time.Second)))
	}
	s.mu.Lock()
	draining := s.attempts.draining
	s.mu.Unlock()
	if draining {
		h.Problems = append(h.Problems, "shutting down")
	}
	h.OK = len(h.Problems) == 0
	return h
}

// pingStore asks the store whether it answers, within pingTimeout.
func (s *Scheduler) pingStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.pingTimeout())
	defer cancel()
	return s.st.Ping(ctx)
}

// pingTimeout bounds the store ping of Health: half the heartbeat
// interval, from 100ms to 3s. A store that hangs is then reported within a
// heartbeat interval, long before the heartbeat itself goes stale (at
// inactive_threshold), and a health request never waits on it for long.
func (s *Scheduler) pingTimeout() time.Duration {
	return min(max(s.cfg.HeartbeatInterval/2, 100*time.Millisecond), 3*time.Second)
}
