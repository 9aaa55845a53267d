package model

import (
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// inLife reports whether the tick t of d is part of the job's life: not
// before its not_before, and with a start before its not_after.
func inLife(d *jobs.Definition, t time.Time) bool {
	if !d.NotBefore.IsZero() && t.Before(d.NotBefore) {
		return false
	}
	return d.NotAfter.IsZero() || tickStart(d, t).Before(d.NotAfter)
}

// tickStart is when the run of d's tick t may start: t, delayed by the
// job's jitter (docs/configuration.md, Jitter).
func tickStart(d *jobs.Definition, t time.Time) time.Time {
	if d.Jitter <= 0 || d.Schedule == nil {
		return t
	}
	bound := d.Jitter
	if next := d.Schedule.Next(t); !next.IsZero() && next.Sub(t) < bound {
		bound = next.Sub(t)
	}
	return t.Add(jitterDelay(d.Name, t, bound))
}

// jitterDelay is the documented pure function: the first 8 bytes of the
// SHA-256 of the name, a 0 byte and the tick as 8 bytes of big-endian Unix
// microseconds, read as a big-endian unsigned integer u, give
// floor(u × b / 2^64) milliseconds, b being the bound in whole
// milliseconds.
func jitterDelay(name string, tick time.Time, bound time.Duration) time.Duration {
	b := int64(bound / time.Millisecond)
	if b <= 0 {
		return 0
	}
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(tick.UnixMicro()))
	h.Write(ts[:])
	u := new(big.Int).SetBytes(h.Sum(nil)[:8])
	u.Mul(u, big.NewInt(b))
	u.Rsh(u, 64)
	return time.Duration(u.Int64()) * time.Millisecond
}

// window is the start window of the run of d's tick t: from its start
// (tickStart, never before the job's not_before) to the job's not_after,
// tightened to t + start_deadline.
func window(d *jobs.Definition, t time.Time) (nb, na time.Time) {
	nb, na = tickStart(d, t), d.NotAfter
	if !d.NotBefore.IsZero() && nb.Before(d.NotBefore) {
		nb = d.NotBefore
	}
	if d.StartDeadline > 0 {
		if dl := t.Add(d.StartDeadline); na.IsZero() || dl.Before(na) {
			na = dl
		}
	}
	return nb, na
}

// activeRuns returns the active runs of a job. A waiting run whose
// not_after has come is not active: it is expired.
func (st *state) activeRuns(job string) []*run {
	var out []*run
	for _, r := range st.runs {
		if r.key.Job == job && r.active() {
			out = append(out, r)
		}
	}
	return out
}

// fire fires, for every declared cron job, the ticks that are due and
// the tick due within FireLead, and reports whether it did anything.
func (st *state) fire() bool {
	changed := false
	for _, name := range sortedKeys(st.cursors) {
		d, c := st.defs[name], st.cursors[name]
		if d == nil || d.Schedule == nil || c.paused {
			continue
		}
		if !c.ahead.IsZero() {
			if c.ahead.After(st.now) {
				continue
			}
			// The tick fired ahead has come.
			c.ahead, c.claimLooked = time.Time{}, false
		}
		if !c.deferred.IsZero() && !c.deferred.After(st.now) {
			c.deferred = time.Time{} // due now
		}
		var due []time.Time
		for t := d.Schedule.Next(c.last); !t.IsZero() && !t.After(st.now); t = d.Schedule.Next(t) {
			due = append(due, t)
		}
		if len(due) > 0 {
			st.fireTicks(d, c, due)
			changed = true
			continue
		}
		next := d.Schedule.Next(c.last)
		if next.IsZero() || next.After(st.now.Add(FireLead)) || next.Equal(c.deferred) {
			continue
		}
		// Ahead of its tick (docs/firing-ahead.md): a skip or replace job
		// with an active run has its tick judged at its time.
		if inLife(d, next) && (d.Overlap == jobs.OverlapSkip || d.Overlap == jobs.OverlapReplace) && len(st.activeRuns(name)) > 0 {
			c.deferred = next
			continue
		}
		c.ahead, c.last, changed = next, next, true
		if !inLife(d, next) {
			continue
		}
		nb, na := window(d, next)
		r := st.newRun(RunKey{Job: name, Trigger: jobs.TriggerSchedule, At: next}, d, nb, na, "")
		r.aheadTick = next
	}
	return changed
}

// fireTicks handles the due ticks of a cron job (docs/guarantees.md 2,
// docs/configuration.md catchup and overlap): a tick late by at most
// misfire_grace is simply late; one missed for longer follows catchup,
// unless older than catchup_window (skipped); ticks outside the job's
// life are neither fired nor counted. The ticks that fire are then judged
// one after another against the job's active runs by its overlap policy.
func (st *state) fireTicks(d *jobs.Definition, c *cursor, due []time.Time) {
	var missed, onTime []time.Time
	skipped := 0
	for _, t := range due {
		late := st.now.Sub(t)
		switch {
		case !inLife(d, t):
		case late <= d.MisfireGrace:
			onTime = append(onTime, t)
		case late > d.CatchupWindow:
			skipped++
		default:
			missed = append(missed, t)
		}
	}
	keep := 0
	switch d.Catchup {
	case jobs.CatchupAll:
		keep = max(d.CatchupMax, 1)
	case jobs.CatchupLatest:
		keep = 1
		if len(onTime) > 0 {
			keep = 0
		}
	}
	if len(missed) > keep {
		skipped += len(missed) - keep
		missed = missed[len(missed)-keep:]
	}
	fire := append(missed, onTime...)
	c.last = due[len(due)-1]
	active := st.activeRuns(d.Name)
	switch d.Overlap {
	case jobs.OverlapSkip:
		if len(active) > 0 {
			skipped += len(fire)
			fire = nil
		} else if len(fire) > 1 {
			skipped += len(fire) - 1
			fire = fire[:1]
		}
	case jobs.OverlapReplace:
		if len(fire) > 0 {
			for _, r := range active {
				r.status, r.reason = jobs.StatusCancelled, jobs.ReasonReplaced
			}
			skipped += len(fire) - 1
			fire = fire[len(fire)-1:]
		}
	}
	st.skipped[d.Name] += skipped
	if skipped > 0 {
		st.trace("job %s: %d ticks skipped", d.Name, skipped)
	}
	for _, t := range fire {
		nb, na := window(d, t)
		st.newRun(RunKey{Job: d.Name, Trigger: jobs.TriggerSchedule, At: t}, d, nb, na, "")
	}
}
