package scheduler

import (
	"errors"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// overdueRecheck is how long after the store found a job not overdue (a
// success this node had not heard of) the node asks again; and how often
// a node that has retired jobs reads their expectations again.
const overdueRecheck = time.Minute

// overdueAsk is a job whose window has ended, to be made overdue in the
// store.
type overdueAsk struct {
	job    string
	within time.Duration
	since  time.Time
	notify []jobs.NotifyTarget
	// retired: this node does not declare the job (retiredJob).
	retired bool
}

// dueAt is when a job with window within is to be asked of the store:
// the end of its window from its newest success succeeded (or, with none,
// from since), and not before a minute after it was last asked (asked;
// noTick: never).
func dueAt(succeeded, since int64, within time.Duration, asked int64) int64 {
	due := windowEnd(succeeded, since, within)
	if asked != noTick {
		due = max(due, asked+overdueRecheck.Microseconds())
	}
	return due
}

// windowEnd is the end of a job's window within from its newest success
// succeeded or, with none, from since.
func windowEnd(succeeded, since int64, within time.Duration) int64 {
	ref := succeeded
	if ref == noTick {
		ref = since
	}
	return ref + within.Microseconds()
}

// checkOverdue is the dead man's switch: each job with
// expect_success_within, declared or retired (expect.go), whose last
// success (or, with none, the time the cluster began expecting one) is
// older than the window, and that this node does not know to be overdue,
// is made overdue in the store, once in the cluster (store.JobOverdue).
// It reads memory only until a job is due, at most once a second (and,
// with retired jobs, their expectations once a minute), goes over the jobs
// only when something it reads changed (Scheduler.overdueChanged) or a
// job's window may have ended, and returns the next time a job may become
// due (zero: none).
func (s *Scheduler) checkOverdue(it *iteration) time.Time {
	if it.now.Sub(s.loop.overdueAt) < time.Second && !it.now.Before(s.loop.overdueAt) {
		return s.loop.overdueNext
	}
	s.loop.overdueAt = it.now
	if it.now.Sub(s.loop.retiredReadAt) >= overdueRecheck || it.now.Before(s.loop.retiredReadAt) {
		s.loop.retiredReadAt = it.now
		if err := s.rereadRetired(it.ctx); err != nil {
			s.loopError(it, "read the expectations of retired jobs", err)
		}
	}
	now := it.now.UnixMicro()
	var (
		asks []overdueAsk
		next int64 = noTick
	)
	s.mu.Lock()
	if !s.overdueChanged && (s.loop.overdueNext.IsZero() || it.now.Before(s.loop.overdueNext)) {
		// Nothing changed since the last pass, and no job's window has
		// ended since: the answer is the last one (an idle node's loop
		// does not go over many jobs at every iteration).
		s.mu.Unlock()
		return s.loop.overdueNext
	}
	s.overdueChanged = false
	s.testSignals.overduePasses.Add(1)
	for _, j := range s.declared.all {
		within := j.def.ExpectSuccessWithin
		if within <= 0 || j.overdue {
			continue
		}
		if j.expectSince == noTick {
			j.expectSince = now
		}
		// A window that ends more than overdueRecheck from now is its
		// job's due time, whenever the job was asked (by now): the map of
		// the few jobs asked is not looked at for each of many jobs at
		// every check. (After a step of the clock back, an ask made
		// later than now may be missed here: the loop wakes early for
		// the job, and looks again.)
		asked := int64(noTick)
		if windowEnd(j.succeeded, j.expectSince, within) <= now+overdueRecheck.Microseconds() {
			if a, ok := s.overdueAsked[j]; ok {
				asked = a
			}
		}
		if due := dueAt(j.succeeded, j.expectSince, within, asked); due > now {
			next = earliest(next, due)
			continue
		}
		s.overdueAsked[j] = now
		asks = append(asks, overdueAsk{job: j.def.Name, within: within, since: fromMicros(j.expectSince), notify: notifyOf(j.def)})
	}
	for _, r := range s.retired {
		if r.overdue || s.declared.job(r.exp.Job) != nil {
			continue
		}
		if due := dueAt(r.succeeded, r.exp.Since.UnixMicro(), r.exp.Within, r.overdueAsked); due > now {
			next = earliest(next, due)
			continue
		}
		r.overdueAsked = now
		asks = append(asks, overdueAsk{job: r.exp.Job, within: r.exp.Within, since: r.exp.Since,
			notify: s.targetsOf(r.exp.Notify), retired: true})
	}
	// The asks change what the next pass finds (the time each was asked,
	// overdue states), whatever their answers: it looks again.
	s.overdueChanged = s.overdueChanged || len(asks) > 0
	s.mu.Unlock()
	for _, a := range asks {
		st, made, err := s.st.JobOverdue(it.ctx, store.JobOverdueParams{
			Job: a.job, Within: a.within, Since: a.since, Notify: a.notify, Retired: a.retired,
			Node: s.cfg.NodeID, Now: s.storeNow(it.now),
		})
		if a.retired && errors.Is(err, store.ErrNotFound) {
			s.mu.Lock()
			s.retired = s.retired.without(a.job)
			s.overdueChanged = true
			s.mu.Unlock()
			s.log.InfoContext(it.ctx, "expectation of a retired job forgotten by another node", "job", a.job)
			continue
		}
		if err != nil {
			s.loopError(it, "make job overdue", err)
			continue
		}
		if made {
			s.log.WarnContext(it.ctx, "job overdue: no run completed within expect_success_within",
				"job", a.job, "expect_success_within", a.within, "declared", !a.retired)
			s.notifyWake()
		}
		if !st.OverdueSince.IsZero() {
			s.mu.Lock()
			if j := s.declared.job(a.job); j != nil && !a.retired {
				j.overdue = true
			} else if r := s.retired.job(a.job); r != nil && a.retired {
				r.overdue = true
			}
			s.mu.Unlock()
		} else {
			next = earliest(next, it.now.Add(overdueRecheck).UnixMicro())
		}
	}
	s.loop.overdueNext = time.Time{}
	if next != noTick {
		s.loop.overdueNext = time.UnixMicro(next)
	}
	return s.loop.overdueNext
}

// Overdue reports whether the job, declared or retired, is overdue,
// cluster-wide, as this node knows.
func (s *Scheduler) Overdue(job string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.declared.job(job); j != nil {
		return j.overdue
	}
	r := s.retired.job(job)
	return r != nil && r.overdue
}

// lastSuccess is the newest success of the declared job that this node
// knows; zero when none.
func (s *Scheduler) lastSuccess(job string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.declared.job(job)
	if j == nil || j.succeeded == noTick {
		return time.Time{}
	}
	return time.UnixMicro(j.succeeded).UTC()
}
