package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// fireBatch bounds the jobs whose ticks one transaction fires.
const fireBatch = 500

// splitRound is the largest round of due jobs fired in one transaction.
const splitRound = 32

// fireSize is how many of n due jobs each fire transaction takes: a round
// of more than splitRound is fired in two halves, or in batches of
// fireBatch, and each is claimed before the next is fired, so that half of
// the round's runs start after half of the writing.
func fireSize(n int) int {
	if n <= splitRound {
		return n
	}
	return min(fireBatch, (n+1)/2)
}

// fire handles the due ticks of several cron jobs in one transaction, or,
// ahead, their ticks due within FireLead (see planAhead). A job whose
// cursor another writer moved has its cursor read again.
func (s *Scheduler) fire(ctx context.Context, due []*jobState, now time.Time, ahead bool) error {
	var (
		params []store.FireParams
		plans  []tickPlan
		fired  []*jobState
	)
	s.mu.Lock()
	lasts := make([]time.Time, len(due))
	horizons := make([]time.Time, len(due))
	for i, j := range due {
		lasts[i] = j.lastTick()
		// The ticks within FireLead, or the next one, which a large round
		// fires further ahead (tickQueue.roundLead).
		horizons[i] = now.Add(s.cfg.FireLead)
		if nt := fromMicros(j.nextTick()); nt.After(horizons[i]) {
			horizons[i] = nt
		}
	}
	s.mu.Unlock()
	for i, j := range due {
		d, last := j.def, lasts[i]
		var plan tickPlan
		if ahead {
			plan = planAhead(d, last, now, horizons[i])
		} else {
			plan = planTicks(d, last, now)
		}
		if plan.Cursor.IsZero() {
			continue
		}
		p := store.FireParams{
			Job: d.Name, Expect: last, Cursor: plan.Cursor,
			Skipped: plan.SkippedCount, LastSkipped: plan.LastSkipped,
			Overlap: d.Overlap, Node: s.cfg.NodeID, Now: s.storeNow(now), Notify: d.Notify,
		}
		for _, t := range plan.Fire {
			nb, na := d.Window(jobs.TriggerSchedule, t)
			p.Runs = append(p.Runs, store.RunInsertParams{
				Job: d.Name, Trigger: jobs.TriggerSchedule, ScheduledAt: t, NotBefore: nb, NotAfter: na,
				Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, Node: s.cfg.NodeID, Now: s.storeNow(now),
			})
		}
		params, plans, fired = append(params, p), append(plans, plan), append(fired, j)
	}
	if len(params) == 0 {
		return nil
	}
	results, err := s.st.ScheduleFireMany(ctx, params)
	if err != nil {
		return err
	}
	var lost []string
	for i, res := range results {
		d, plan := fired[i].def, plans[i]
		if res.Deferred {
			// An active run of a skip or replace job: the tick is fired at
			// its time, when the policy can judge the runs active then.
			s.mu.Lock()
			s.ticks.deferTick(fired[i])
			s.mu.Unlock()
			continue
		}
		if !res.Advanced {
			// Another writer moved the cursor (or paused the job): read it
			// and plan again.
			lost = append(lost, d.Name)
			continue
		}
		s.setCursor(d.Name, res.Cursor)
		s.logFire(ctx, d, plan, res, now)
		if d.Notify != nil && params[i].Skipped+res.SkippedOverlap > 0 {
			s.notifyWake() // the fire may have written skipped notifications
		}
	}
	if len(lost) > 0 {
		cs, err := s.st.ScheduleCursors(ctx, lost)
		if err != nil {
			return err
		}
		for name, c := range cs {
			s.setCursor(name, c)
		}
	}
	return nil
}

// setCursor records a cursor of a declared cron job read from or written
// to the store, and queues the job at its next tick.
func (s *Scheduler) setCursor(job string, c *store.Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.declared.job(job); j != nil && j.def.Schedule != nil {
		j.setCursor(c)
		s.ahead.note(j, s.clock.Now())
		s.ticks.queue(j)
	}
}

// logFire logs what firing did for one job: skipped ticks, overlap
// decisions, the runs made; and stops the attempts that overlap = replace
// cancelled.
func (s *Scheduler) logFire(ctx context.Context, d *jobs.Definition, plan tickPlan, res *store.FireResult, now time.Time) {
	if n := plan.SkippedCount; n > 0 {
		// One line for all of them: a job every 10s down for an hour
		// would otherwise log 360.
		why := "missed by more than misfire_grace"
		switch old := plan.SkippedOld; {
		case old == n:
			why = "older than catchup_window"
		case old > 0:
			why = fmt.Sprintf("%d older than catchup_window, %d missed by more than misfire_grace", old, n-old)
		}
		s.log.WarnContext(ctx, "ticks skipped", "job", d.Name, "count", n, "first", plan.FirstSkipped.UTC().Format(time.RFC3339),
			"last", plan.LastSkipped.UTC().Format(time.RFC3339), "catchup", d.Catchup, "why", why)
	}
	if res.SkippedOverlap > 0 {
		s.log.WarnContext(ctx, "tick skipped: the previous run is still active", "job", d.Name, "count", res.SkippedOverlap, "overlap", d.Overlap)
	}
	s.noteTicksSkipped(d.Name, plan.SkippedCount+res.SkippedOverlap)
	for _, r := range res.Replaced {
		if r.Status == jobs.StatusRunning {
			s.stopLocal(r.ID, jobs.ReasonReplaced)
		} else {
			s.logRun(ctx, r, "", "run replaced by a newer tick")
			s.noteRunsEnded(r)
		}
	}
	s.count.ticksFired.Add(int64(len(res.Created)))
	for _, r := range res.Created {
		// late is negative for a tick fired ahead of its time.
		s.log.InfoContext(ctx, "tick fired", "job", r.Job, "run", r.ID, "tick", r.ScheduledAt.UTC().Format(time.RFC3339),
			"late", now.Sub(r.ScheduledAt).Round(time.Millisecond).String())
	}
	if res.Duplicates > 0 {
		s.log.InfoContext(ctx, "tick already fired", "job", d.Name, "count", res.Duplicates)
	}
}

// withdraw takes back, in the store, the ticks of the named jobs fired
// ahead of now, and records their cursors.
func (s *Scheduler) withdraw(ctx context.Context, names []string, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	cs, n, err := s.st.ScheduleWithdraw(ctx, names, s.storeNow(now))
	if err != nil {
		return fmt.Errorf("withdraw ticks fired ahead: %w", err)
	}
	for name, c := range cs {
		s.setCursor(name, c)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "ticks fired ahead withdrawn", "runs", n)
	}
	return nil
}
