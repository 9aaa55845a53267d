package model

import (
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// limit is how many runs of d may run at once: max_concurrency, and 1 for
// any overlap policy but allow.
func limit(d *jobs.Definition) int {
	l := d.MaxConcurrency
	if d.Overlap != jobs.OverlapAllow && (l == 0 || l > 1) {
		l = 1
	}
	return l
}

func (st *state) free() int {
	n := 0
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.owner == st.incarnation {
			n++
		}
	}
	return st.set.Concurrency - n
}

func (st *state) runningOf(job string) int {
	n := 0
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.key.Job == job {
			n++
		}
	}
	return n
}

// claimAhead claims, ClaimLead before a tick fired ahead, the runs of the
// jobs whose tick it is (docs/firing-ahead.md): only when the free slots
// take the whole round; their attempts start at the tick.
func (st *state) claimAhead() bool {
	byTick := map[int64][]string{} // by the tick's Unix microseconds
	for _, name := range sortedKeys(st.cursors) {
		c := st.cursors[name]
		if c.ahead.IsZero() || c.claimLooked || c.paused || st.defs[name] == nil {
			continue
		}
		if c.ahead.Add(-ClaimLead).After(st.now) || !c.ahead.After(st.now) {
			continue
		}
		byTick[c.ahead.UnixMicro()] = append(byTick[c.ahead.UnixMicro()], name)
	}
	if len(byTick) == 0 {
		return false
	}
	changed := false
	free := st.free()
	for _, at := range sortedKeys64(byTick) {
		tick := time.UnixMicro(at).UTC()
		names := byTick[at]
		for _, name := range names {
			st.cursors[name].claimLooked = true
		}
		st.trace("claim ahead round %s: %v, %d free", tick.UTC().Format("15:04:05.000"), names, free)
		if len(names) > free {
			continue
		}
		n := st.claimAt(tick, min(len(names), free), names)
		free -= n
		changed = changed || n > 0
	}
	return changed
}

// claim starts the due runs of declared jobs up to the free slots.
func (st *state) claim() bool {
	return st.claimAt(st.now, st.free(), nil) > 0
}

// claimAt claims, at the time at (now, or a tick claimed ahead), up to
// most due runs of the declared jobs (of only, when set), in the order of
// their not_before, then of their making, within each job's limit, and
// returns how many it claimed. A run past its not_after is not due.
func (st *state) claimAt(at time.Time, most int, only []string) int {
	if most <= 0 || !st.up {
		return 0
	}
	var cands []*run
	for _, r := range st.runs {
		d := st.defs[r.key.Job]
		if d == nil || !r.waiting() || r.nb.After(at) || (!r.na.IsZero() && !r.na.After(at)) {
			continue
		}
		if only != nil && !slices.Contains(only, r.key.Job) {
			continue
		}
		cands = append(cands, r)
	}
	slices.SortFunc(cands, func(a, b *run) int {
		if c := a.nb.Compare(b.nb); c != 0 {
			return c
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	if st.endedAt.Equal(st.now) && len(st.endedAtLimit) > 0 && len(cands) > most {
		for _, r := range cands {
			if st.endedAtLimit[r.key.Job] {
				st.ambiguous(st.now, "an attempt of %s ends at its limit while %d runs compete for %d slots", r.key.Job, len(cands), most)
				break
			}
		}
	}
	var claimed []*run
	for _, r := range cands {
		d := st.defs[r.key.Job]
		full := len(claimed) >= most
		jobFull := limit(d) > 0 && st.runningOf(r.key.Job) >= limit(d)
		if full || jobFull {
			// A run that the order does not tell from one claimed: which of
			// the two the engine takes is left to chance.
			for _, c := range claimed {
				if c.nb.Equal(r.nb) && c.created.Equal(r.created) && (!jobFull || c.key.Job == r.key.Job) {
					st.ambiguous(st.now, "runs %s and %s tie for a slot", c.key, r.key)
				}
			}
			continue
		}
		r.status = jobs.StatusRunning
		r.attempt++
		r.owner = st.incarnation
		r.start = at
		r.starts = append(r.starts, at)
		if at.Equal(st.now) {
			st.begin(r)
		} else {
			r.end, r.timeoutAt = time.Time{}, time.Time{}
		}
		claimed = append(claimed, r)
		st.trace("run %s claimed: attempt %d starts %s", r.key, r.attempt, at.UTC().Format("15:04:05.000000"))
	}
	return len(claimed)
}

// expire cancels (reason expired) the waiting runs whose not_after has
// come, of declared jobs or not.
func (st *state) expire() bool {
	changed := false
	for _, r := range st.runs {
		if r.waiting() && !r.na.IsZero() && !r.na.After(st.now) {
			r.status, r.reason = jobs.StatusCancelled, jobs.ReasonExpired
			changed = true
			st.trace("run %s expired", r.key)
		}
	}
	return changed
}
