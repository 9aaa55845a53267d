package scheduler

import (
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// maxOldTicksPerPlan bounds the ticks older than the catch-up window that one
// plan walks over, so a job firing every second whose cursor is a year old
// costs bounded work per loop iteration; the next iterations go on from there.
// Those ticks are skipped whatever the policy, so cutting the walk is safe.
const maxOldTicksPerPlan = 200_000

// tickPlan is what to do with the ticks of one cron job between its cursor
// and now.
type tickPlan struct {
	Fire []time.Time // ticks that get a run, oldest first
	// SkippedCount counts the skipped ticks, FirstSkipped and LastSkipped
	// are the oldest and the newest of them, and SkippedOld counts those
	// older than catchup_window (the others were missed by more than
	// misfire_grace): what the one log line of a job's skipped ticks says.
	SkippedCount              int
	SkippedOld                int
	FirstSkipped, LastSkipped time.Time
	// Cursor is the newest tick handled; zero when no tick was due.
	Cursor time.Time
	// More is set when the plan stopped early: plan again from Cursor.
	More bool
}

// skip counts t as skipped; old says it is older than catchup_window.
func (p *tickPlan) skip(t time.Time, old bool) {
	if p.SkippedCount == 0 || t.Before(p.FirstSkipped) {
		p.FirstSkipped = t
	}
	if t.After(p.LastSkipped) {
		p.LastSkipped = t
	}
	p.SkippedCount++
	if old {
		p.SkippedOld++
	}
}

// planTicks decides, for a cron job whose last handled tick is last, which
// ticks up to now fire and which are skipped:
//
//   - a tick late by at most misfire_grace is simply late: it fires;
//   - ticks missed for longer follow catchup: none skips them; latest fires
//     the newest of them unless a tick within the grace fires anyway; all
//     fires each of them, at most catchup_max (the newest);
//   - ticks older than catchup_window are skipped whatever the policy;
//   - ticks outside the job's life (before its not_before, or whose run
//     could not start before its not_after: jobs.Definition.InLife) are
//     neither fired nor counted.
func planTicks(d *jobs.Definition, last, now time.Time) tickPlan {
	var p tickPlan
	grace := d.MisfireGrace
	horizon := now.Add(-max(d.CatchupWindow, grace))
	lateLimit := now.Add(-grace)
	windowLimit := now.Add(-d.CatchupWindow)
	skip := func(t time.Time) { p.skip(t, !t.After(windowLimit)) }
	keepMissed := 0
	switch d.Catchup {
	case jobs.CatchupAll:
		keepMissed = max(d.CatchupMax, 1)
	case jobs.CatchupLatest:
		keepMissed = 1
	}
	// missed keeps the newest keepMissed missed ticks; older ones are skipped
	// as newer ones push them out.
	var missed, onTime []time.Time
	old := 0
	for t := d.Schedule.Next(last); !t.IsZero() && !t.After(now); t = d.Schedule.Next(t) {
		switch {
		case !d.InLife(t):
		case !t.After(horizon):
			skip(t)
			if old++; old >= maxOldTicksPerPlan {
				p.Cursor, p.More = t, true
				return p
			}
		case t.Before(lateLimit):
			if keepMissed == 0 {
				skip(t)
				break
			}
			if len(missed) == keepMissed {
				skip(missed[0])
				missed = missed[1:]
			}
			missed = append(missed, t)
		default:
			onTime = append(onTime, t)
		}
		p.Cursor = t
	}
	if d.Catchup == jobs.CatchupLatest && len(onTime) > 0 {
		// A tick within the grace fires: it is the newest run, so the
		// missed one is not needed.
		for _, t := range missed {
			skip(t)
		}
		missed = nil
	}
	p.Fire = append(missed, onTime...)
	return p
}

// planAhead plans the ticks of a cron job after last that fall after now
// and no later than horizon: fired ahead of their time, none of them late.
// It is asked only for jobs whose next tick is after now; should one be
// due after all, it plans nothing (planTicks' case).
func planAhead(d *jobs.Definition, last, now, horizon time.Time) tickPlan {
	var p tickPlan
	for t := d.Schedule.Next(last); !t.IsZero() && !t.After(horizon); t = d.Schedule.Next(t) {
		if !t.After(now) {
			return tickPlan{} // due: planTicks' case
		}
		if d.InLife(t) {
			p.Fire = append(p.Fire, t)
		}
		p.Cursor = t
	}
	return p
}
