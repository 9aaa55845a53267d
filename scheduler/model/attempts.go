package model

import (
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// attemptsAt ends the attempts whose handler returns or whose timeout
// comes at now, and starts those claimed ahead whose tick has come.
func (st *state) attemptsAt() {
	var ending []*run
	for _, r := range st.runs {
		if r.status != jobs.StatusRunning || r.owner != st.incarnation {
			continue
		}
		// An attempt claimed ahead begins at its tick; until then it has
		// no end. (Its start is no guide once the clock was stepped back.)
		if r.end.IsZero() && r.start.Equal(st.now) {
			st.begin(r)
		}
		if r.end.IsZero() {
			continue
		}
		if r.end.Equal(st.now) || r.timeoutAt.Equal(st.now) {
			ending = append(ending, r)
		}
	}
	if len(ending) > 0 {
		st.decisionsAt("an attempt ends")
		st.endedAtLimit, st.endedAt = map[string]bool{}, st.now
		for _, r := range ending {
			if d := st.defs[r.key.Job]; d != nil && limit(d) > 0 && st.runningOf(r.key.Job) >= limit(d) {
				st.endedAtLimit[r.key.Job] = true
			}
		}
	}
	for _, r := range ending {
		switch {
		case !r.timeoutAt.IsZero() && !r.timeoutAt.After(r.end):
			if r.timeoutAt.Equal(r.end) {
				st.ambiguous(st.now, "run %s ends at its timeout", r.key)
			}
			st.failAttempt(r, jobs.ReasonTimeout)
		case r.ok:
			r.status, r.reason = jobs.StatusCompleted, jobs.ReasonSucceeded
			st.trace("run %s completed", r.key)
		default:
			st.failAttempt(r, jobs.ReasonFailed)
		}
	}
}

// decisionsAt notes as ambiguous an instant where an attempt ends (what)
// and the engine also decides something that the end could change: a
// tick, a run due or past its window, a start.
func (st *state) decisionsAt(what string) {
	if !st.up {
		return
	}
	for name, c := range st.cursors {
		d := st.defs[name]
		if d == nil || d.Schedule == nil || c.paused {
			continue
		}
		t := d.Schedule.Next(c.last)
		if !c.ahead.IsZero() {
			t = c.ahead
		}
		if t.Equal(st.now) || t.Add(-FireLead).Equal(st.now) || t.Add(-ClaimLead).Equal(st.now) {
			st.ambiguous(st.now, "%s at a tick's instant of job %s", what, name)
		}
	}
	for _, r := range st.runs {
		if r.waiting() && (r.nb.Equal(st.now) || r.na.Equal(st.now)) {
			st.ambiguous(st.now, "%s as run %s becomes due or expires", what, r.key)
		}
		if r.status == jobs.StatusRunning && r.end.IsZero() && r.start.Equal(st.now) {
			st.ambiguous(st.now, "%s as run %s starts", what, r.key)
		}
	}
}

// begin starts the attempt of a claimed run: its handler runs from now.
func (st *state) begin(r *run) {
	d, ok := st.outcome(r.key, r.attempt)
	r.end, r.ok = st.now.Add(d), ok
	r.timeoutAt = time.Time{}
	if def := st.defs[r.key.Job]; def != nil && def.Timeout > 0 {
		r.timeoutAt = st.now.Add(def.Timeout)
	}
}

// failAttempt ends r's attempt as failed for reason, through the retry
// flow (docs/configuration.md, retry and windows): dead letter after the
// last attempt; else the next attempt after the backoff, not before the
// run's not_before; expired when that is not before its not_after.
func (st *state) failAttempt(r *run, reason jobs.Reason) {
	defer func() {
		st.trace("run %s attempt %d failed (%s): %s, not_before %s", r.key, r.attempt, reason, r.status, r.nb.UTC().Format("15:04:05.000000"))
	}()
	r.reason = reason
	if r.attempt >= max(r.retry.MaxAttempts, 1) {
		r.status = jobs.StatusDeadLetter
		return
	}
	next := st.now.Add(backoff(r.retry, r.attempt, st.set.RetryRand))
	if next.Before(r.nb) {
		next = r.nb
	}
	if !r.na.IsZero() && !next.Before(r.na) {
		r.status, r.reason = jobs.StatusCancelled, jobs.ReasonExpired
		return
	}
	r.status, r.nb = jobs.StatusRetrying, next
}

// backoff is the wait after failed attempt number attempt: fixed waits
// initial_delay; exponential doubles it per failed attempt, capped at
// max_delay (0: no cap); with jitter it is drawn from [d/2, d].
func backoff(p jobs.RetryPolicy, attempt int, rnd float64) time.Duration {
	d := p.InitialDelay
	if p.Backoff == jobs.BackoffExponential {
		for i := 1; i < attempt; i++ {
			if p.MaxDelay > 0 && d >= p.MaxDelay {
				break
			}
			d *= 2
		}
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if p.Jitter && d > 0 {
		half := d / 2
		d = half + time.Duration(rnd*float64(d-half))
	}
	return d
}
