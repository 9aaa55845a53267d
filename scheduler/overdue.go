package scheduler

import (
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// overdueRecheck is how long after the store found a job not overdue (a
// success this node had not heard of) the node asks again.
const overdueRecheck = time.Minute

// checkOverdue is the dead man's switch: each declared job with
// expect_success_within whose last success (or, with none, the time this
// node began expecting one) is older than the window, and that this node
// does not know to be overdue, is made overdue in the store, once in the
// cluster (store.JobOverdue). It reads memory only until a job is due, at
// most once a second, and returns the next time a job may become due
// (zero: none).
func (s *Scheduler) checkOverdue(it *iteration) time.Time {
	if it.now.Sub(s.loop.overdueAt) < time.Second && !it.now.Before(s.loop.overdueAt) {
		return s.loop.overdueNext
	}
	s.loop.overdueAt = it.now
	now := it.now.UnixMicro()
	type ask struct {
		def   *jobs.Definition
		since time.Time
	}
	var (
		asks []ask
		next int64 = noTick
	)
	s.mu.Lock()
	for _, j := range s.declared.all {
		within := j.def.ExpectSuccessWithin
		if within <= 0 || j.overdue {
			continue
		}
		if j.expectSince == noTick {
			j.expectSince = now
		}
		ref := j.succeeded
		if ref == noTick {
			ref = j.expectSince
		}
		due := ref + within.Microseconds()
		if asked, ok := s.overdueAsked[j]; ok {
			due = max(due, asked+overdueRecheck.Microseconds())
		}
		if due > now {
			next = earliest(next, due)
			continue
		}
		s.overdueAsked[j] = now
		asks = append(asks, ask{j.def, time.UnixMicro(j.expectSince).UTC()})
	}
	s.mu.Unlock()
	for _, a := range asks {
		st, made, err := s.st.JobOverdue(it.ctx, store.JobOverdueParams{
			Job: a.def.Name, Within: a.def.ExpectSuccessWithin, Since: a.since, Notify: notifyOf(a.def),
			Node: s.cfg.NodeID, Now: s.storeNow(it.now),
		})
		if err != nil {
			s.loopError(it, "make job overdue", err)
			continue
		}
		if made {
			s.log.WarnContext(it.ctx, "job overdue: no run completed within expect_success_within",
				"job", a.def.Name, "expect_success_within", a.def.ExpectSuccessWithin)
			s.notifyWake()
		}
		if !st.OverdueSince.IsZero() {
			s.mu.Lock()
			if j := s.declared.job(a.def.Name); j != nil {
				j.overdue = true
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

// Overdue reports whether the declared job is overdue, cluster-wide, as
// this node knows.
func (s *Scheduler) Overdue(job string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.declared.job(job)
	return j != nil && j.overdue
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
