package model

import (
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// checkLead notes as ambiguous an event that comes while a tick is
// fired ahead and not yet reached (docs/firing-ahead.md, taking a run
// back): the model does not follow what a pause, reload, stop, kill or
// cancel does in that moment; firing-ahead's own tests do.
func (st *state) checkLead(ev Event) {
	if !st.up {
		return
	}
	for _, name := range sortedKeys(st.cursors) {
		d, c := st.defs[name], st.cursors[name]
		if d == nil || d.Schedule == nil || c.paused {
			continue
		}
		t := c.ahead
		if t.IsZero() {
			t = d.Schedule.Next(c.last)
		}
		if !t.IsZero() && !t.Add(-FireLead).After(st.now) && t.After(st.now) {
			st.ambiguous(st.now, "event %s inside the fire lead of job %s's tick", ev.Kind, name)
		}
	}
}

// endGrace stops, at the end of shutdown_grace, the attempts still
// running (reason shutdown, through the retry flow); the daemon is down.
func (st *state) endGrace() {
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.owner == st.incarnation {
			st.failAttempt(r, jobs.ReasonShutdown)
		}
	}
	st.stopping = false
}

// apply applies the event ev (the i-th of the timeline) at now.
func (st *state) apply(i int, ev Event) {
	refuse := func(why string) { st.res.Refused[i] = why; st.trace("event #%d refused: %s", i, why) }
	st.trace("event #%d: %s", i, ev)
	if !st.up && ev.Kind != Start {
		switch ev.Kind {
		case Trigger, Cancel, Pause, Resume, Reload:
			refuse("the daemon is not running")
			return
		}
	}
	switch ev.Kind {
	case Start:
		if st.up || st.stopping {
			panic("model: start of a running daemon")
		}
		st.incarnation++
		st.up = true
		// What the previous process kept in memory is gone: the ticks it
		// fired ahead are cursors in the store, and those it deferred
		// were never written.
		for _, c := range st.cursors {
			if !c.ahead.After(st.now) {
				c.ahead, c.claimLooked = time.Time{}, false
			}
			c.deferred = time.Time{}
		}
		// The attempts the previous process left running were interrupted.
		for _, r := range st.runs {
			if r.status == jobs.StatusRunning {
				st.failAttempt(r, jobs.ReasonInterrupted)
			}
		}
		st.load(ev.Jobs)
	case Reload:
		st.load(ev.Jobs)
	case Stop:
		st.up = false
		st.stopping = true
		st.graceEnd = st.now.Add(st.set.ShutdownGrace)
		if st.set.ShutdownGrace <= 0 {
			st.endGrace()
		}
	case Kill:
		st.up, st.stopping = false, false
	case Trigger:
		st.trigger(ev, refuse)
	case Cancel:
		r := st.byKey[ev.Label]
		switch {
		case r == nil:
			refuse("no such run")
		case !r.active():
			refuse("run is " + string(r.status))
		default:
			r.status, r.reason = jobs.StatusCancelled, jobs.ReasonCancelled
		}
	case Jump:
		st.jump(ev)
	case Pause, Resume:
		d := st.defs[ev.Job]
		c := st.cursors[ev.Job]
		if d == nil || d.Schedule == nil || c == nil {
			refuse("not a declared cron job")
			return
		}
		if ev.Kind == Pause {
			c.paused = true
			return
		}
		if c.paused {
			c.paused = false
			if c.last.Before(st.now) {
				c.last = st.now
			}
		}
	}
}

// jump steps the wall clock by ev.Delta (docs/guarantees.md, "When the
// clock is stepped"). Every time the engine keeps is of the wall clock
// (ticks, cursors, windows, retries) but what it measures as elapsed: an
// attempt's duration and timeout and the shutdown grace end as long after
// the step as they would have without it. The engine looks at the clock
// again at once: ticks the step passed over are late ticks (misfire_grace,
// catchup), and after a step back no tick fires again before the clock
// has passed the cursor.
func (st *state) jump(ev Event) {
	for _, r := range st.runs {
		if r.status != jobs.StatusRunning || r.owner != st.incarnation || (!st.up && !st.stopping) {
			continue
		}
		if r.end.IsZero() {
			// Claimed ahead, waiting for its tick: within a fire lead.
			st.ambiguous(st.now, "a step of the clock while run %s waits for its tick", r.key)
			continue
		}
		r.end = r.end.Add(ev.Delta)
		if !r.timeoutAt.IsZero() {
			r.timeoutAt = r.timeoutAt.Add(ev.Delta)
		}
	}
	if st.stopping {
		st.graceEnd = st.graceEnd.Add(ev.Delta)
	}
	st.now = st.now.Add(ev.Delta)
	st.trace("the clock was stepped %+v", ev.Delta)
	st.checkLead(ev)
}

// load makes defs the declared jobs (at a start or reload): a cron job
// without a cursor gets one at now (it does not catch up on the past); a
// one-off job whose run at its at time does not exist gets it.
func (st *state) load(defs []*jobs.Definition) {
	st.defs = map[string]*jobs.Definition{}
	for _, d := range defs {
		st.defs[d.Name] = d
		if d.Schedule != nil && st.cursors[d.Name] == nil {
			st.cursors[d.Name] = &cursor{last: st.now}
		}
	}
	for _, d := range defs {
		if d.At.IsZero() {
			continue
		}
		key := RunKey{Job: d.Name, Trigger: jobs.TriggerOnce, At: d.At}
		if st.byKey[key.String()] != nil {
			continue
		}
		nb, na := d.At, d.NotAfter
		if nb.Before(d.NotBefore) {
			nb = d.NotBefore
		}
		st.newRun(key, d, nb, na, "")
	}
}

// trigger makes a manual run (docs: schedulerd trigger): its window is
// the asked one (now, and none, by default) within the job's life; a
// window that cannot open, or whose not_after has passed, is refused, and
// so is a dedup id that a non-terminal run of the job has.
func (st *state) trigger(ev Event, refuse func(string)) {
	d := st.defs[ev.Job]
	if d == nil {
		refuse("unknown job")
		return
	}
	nb, na := ev.NotBefore, ev.NotAfter
	if nb.IsZero() {
		nb = st.now
	}
	if !d.NotBefore.IsZero() && nb.Before(d.NotBefore) {
		nb = d.NotBefore
	}
	if !d.NotAfter.IsZero() && (na.IsZero() || d.NotAfter.Before(na)) {
		na = d.NotAfter
	}
	if !na.IsZero() && (!na.After(nb) || !na.After(st.now)) {
		refuse("window")
		return
	}
	if ev.DedupID != "" {
		for _, r := range st.runs {
			if r.key.Job == ev.Job && r.dedup == ev.DedupID && r.active() {
				refuse("duplicate dedup id")
				return
			}
		}
	}
	st.newRun(RunKey{Job: ev.Job, Trigger: jobs.TriggerManual, Label: ev.Label}, d, nb, na, ev.DedupID)
}

func (st *state) newRun(key RunKey, d *jobs.Definition, nb, na time.Time, dedup string) *run {
	st.seq++
	r := &run{key: key, created: st.now, seq: st.seq, nb: nb, na: na, firstNB: nb, firstNA: na,
		status: jobs.StatusPending, retry: d.Retry, dedup: dedup}
	st.runs = append(st.runs, r)
	st.byKey[key.String()] = r
	st.trace("run %s made: not_before %s not_after %s", key, nb.UTC().Format("15:04:05.000000"), na.UTC().Format("15:04:05.000000"))
	return r
}
