package scheduler

import (
	"context"

	"github.com/schedulerd/schedulerd/jobs"
)

// setJobs validates defs and makes them the declared jobs.
func (s *Scheduler) setJobs(defs []*jobs.Definition) error {
	set, err := newJobSet(defs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	// The cursors stay as they were read until syncJobs reads them again;
	// so do the results.
	for _, j := range set.all {
		old := s.declared.job(j.def.Name)
		if old == nil {
			continue
		}
		j.succeeded, j.failed = old.succeeded, old.failed
		j.expectSince, j.overdue = old.expectSince, old.overdue
		if j.def.Schedule != nil && old.hasCursor {
			j.hasCursor, j.paused = true, old.paused
			j.setLast(old.last)
		}
	}
	s.declared = set
	s.ticks.forget()
	clear(s.overdueAsked)
	s.overdueChanged = true
	s.ticks.requeue(s.declared.cron)
	s.mu.Unlock()
	return nil
}

// Reload swaps in a new set of jobs. The caller validated them; attempts
// that are running go on with the definition they started with. A job
// with expect_success_within that the new set does not declare is still
// expected (expect.go) until Forget.
func (s *Scheduler) Reload(ctx context.Context, defs []*jobs.Definition) error {
	old := s.Jobs()
	now := s.clock.Now()
	withdraw := s.aheadJobs()
	if err := s.setJobs(defs); err != nil {
		return err
	}
	// The ticks fired ahead under the old definitions are taken back (the
	// tick may be gone from the new schedule, or the job with it) and fire
	// again under the new ones. No fire runs meanwhile.
	s.fireMu.Lock()
	err := s.withdraw(ctx, withdraw, now)
	if err == nil {
		err = s.syncJobs(ctx, now)
	}
	s.fireMu.Unlock()
	if err != nil {
		// Keep the old job set: nothing of the new one is half in force.
		_ = s.setJobs(old)
		return err
	}
	// The series of the jobs that the reload removed go with them.
	s.mu.Lock()
	s.perJob.retain(func(job string) bool { return s.declared.job(job) != nil })
	s.mu.Unlock()
	s.log.InfoContext(ctx, "jobs reloaded", "jobs", len(defs))
	s.Wake()
	return nil
}
