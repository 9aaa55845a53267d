package scheduler

import (
	"maps"
	"slices"
	"time"
)

// aheadTicks holds, by job name, the cursors read or written later than
// the clock (a tick fired ahead of its time, by this node or another)
// until the clock reaches them. The loop wakes then to claim the runs of
// those ticks and reads the cursors again: a withdrawal (a pause, a reload
// elsewhere) may have taken the tick back, and then it fires at once.
// Scheduler.mu guards it.
type aheadTicks struct {
	byJob map[string]int64
	// first is the earliest tick in byJob, noTick when it is empty.
	first int64
	// claimedTo is how far ahead the loop has claimed the runs of the
	// ticks in byJob (see Scheduler.claimAhead): a tick at or before it
	// that is still in byJob is claimed at its time. firstToClaim is the
	// earliest tick in byJob later than claimedTo, noTick when there is
	// none.
	claimedTo    int64
	firstToClaim int64
}

func newAheadTicks() aheadTicks {
	return aheadTicks{byJob: map[string]int64{}, first: noTick, claimedTo: noTick, firstToClaim: noTick}
}

// note records the job's cursor if it is later than now: a tick fired
// ahead of its time.
func (a *aheadTicks) note(j *jobState, now time.Time) {
	if !j.hasCursor || j.last <= now.UnixMicro() {
		return
	}
	a.add(j.def.Name, j.last)
}

// add records that the job's tick at is to be claimed.
func (a *aheadTicks) add(job string, at int64) {
	a.byJob[job] = at
	a.first = earliest(a.first, at)
	if at > a.claimedTo {
		a.firstToClaim = earliest(a.firstToClaim, at)
	}
}

// readAgainAt puts back jobs whose ticks the clock has reached, to be
// taken again at at. Their ticks have come: they are not claimed ahead.
func (a *aheadTicks) readAgainAt(jobs []string, at int64) {
	for _, name := range jobs {
		a.byJob[name] = at
	}
	a.first = earliest(a.first, at)
}

// takeRounds takes out the rounds to claim ahead of their tick (see
// Scheduler.claimAhead): those of the ticks later than now, no later than
// horizon, and not looked at before, as long as the free slots take each
// round whole and it has at most fireBatch jobs (a larger round is
// claimed at its tick, between the fires that it needs). It returns them
// by tick, earliest first.
func (a *aheadTicks) takeRounds(now, horizon int64, free int) []aheadRound {
	if a.firstToClaim == noTick || a.firstToClaim > horizon {
		return nil
	}
	from := max(a.claimedTo, now)
	byTick := map[int64][]string{}
	a.firstToClaim = noTick
	for name, at := range a.byJob {
		switch {
		case at > horizon:
			a.firstToClaim = earliest(a.firstToClaim, at)
		case at > from:
			byTick[at] = append(byTick[at], name)
		}
	}
	a.claimedTo = horizon
	var rounds []aheadRound
	for _, at := range slices.Sorted(maps.Keys(byTick)) {
		names := byTick[at]
		if len(names) > fireBatch || len(names) > free {
			continue
		}
		free -= len(names)
		for _, name := range names {
			delete(a.byJob, name)
		}
		rounds = append(rounds, aheadRound{at: at, jobs: names})
	}
	if len(rounds) > 0 {
		a.first = noTick
		for _, at := range a.byJob {
			a.first = earliest(a.first, at)
		}
	}
	return rounds
}

// aheadRound is the jobs whose ticks fired ahead are at one time.
type aheadRound struct {
	at   int64
	jobs []string
}

// reached reports whether the clock has reached the earliest tick.
func (a *aheadTicks) reached(now time.Time) bool {
	return a.first != noTick && a.first <= now.UnixMicro()
}

// takeReached takes out the jobs whose cursor was ahead of the clock and
// no longer is.
func (a *aheadTicks) takeReached(now time.Time) []string {
	until := now.UnixMicro()
	if a.first == noTick || a.first > until {
		return nil
	}
	var due []string
	a.first = noTick
	for name, at := range a.byJob {
		if at <= until {
			due = append(due, name)
			delete(a.byJob, name)
		} else {
			a.first = earliest(a.first, at)
		}
	}
	return due
}

// jobs returns the jobs in it.
func (a *aheadTicks) jobs() []string {
	names := make([]string, 0, len(a.byJob))
	for name := range a.byJob {
		names = append(names, name)
	}
	return names
}
