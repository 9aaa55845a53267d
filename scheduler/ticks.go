package scheduler

import (
	"container/heap"
	"math"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// jobState is what the engine keeps of one declared job: its definition
// and, for a cron job, its cursor as last read or written, the next tick
// after it and the heap entry. It is kept small, as integers rather than
// time.Time values, the flags together, and without the cursor's counters
// (the store has them) or what few jobs have (a deferred tick, an overdue
// asked: maps beside the states), because a node may declare 100,000
// jobs: one of these per job replaced a map of definitions, one of
// cursors and one of cached ticks.
type jobState struct {
	def *jobs.Definition
	// last is the cursor's Last in Unix microseconds, as the stores keep
	// it; valid when hasCursor. It is set by setLast, which drops next.
	last int64
	// next is the schedule's next tick after last (noTick: none), a cache
	// valid while nextKnown.
	next int64
	// rankOf is the tick for which the job has its rank (noTick: none).
	rankOf int64
	// queued is the time of the job's live heap entry; noTick: none.
	queued int64
	// succeeded and failed are when the newest run of the job that
	// completed, and that ended dead_letter, finished, on any node
	// (store.JobResult); noTick: none known.
	succeeded, failed int64
	// expectSince is when this node began expecting a success of a job
	// with expect_success_within (Unix microseconds): the reference of a
	// job that never succeeded.
	expectSince int64
	// rank is the job's place, from 1, among the jobs queued for its tick
	// rankOf; see tickQueue.roundLead.
	rank      int32
	hasCursor bool
	paused    bool
	nextKnown bool
	// overdue says the store holds the job overdue.
	overdue bool
}

// earliest is the earlier of the ticks a and b, either of which may be
// noTick (none).
func earliest(a, b int64) int64 {
	switch {
	case a == noTick:
		return b
	case b == noTick:
		return a
	}
	return min(a, b)
}

// noTick marks an absent time in a jobState: no Unix microsecond count a
// schedule can produce is this small.
const noTick = math.MinInt64

func newJobState(d *jobs.Definition) jobState {
	return jobState{def: d, next: noTick, queued: noTick, rankOf: noTick,
		succeeded: noTick, failed: noTick, expectSince: noTick}
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return noTick
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == noTick {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// setCursor records a cursor read from or written to the store.
func (j *jobState) setCursor(c *store.Cursor) {
	j.hasCursor, j.paused = true, c.Paused
	j.setLast(c.Last.UnixMicro())
}

// setLast sets the cursor's Last; the cached next tick goes when it moves.
func (j *jobState) setLast(us int64) {
	if us != j.last {
		j.nextKnown = false
	}
	j.last = us
}

// lastTick is the cursor's Last.
func (j *jobState) lastTick() time.Time { return fromMicros(j.last) }

// active reports whether the job fires: a cron job with a cursor, not paused.
func (j *jobState) active() bool {
	return j.def.Schedule != nil && j.hasCursor && !j.paused
}

// nextTick returns the next tick after the cursor, cached until the cursor
// moves; noTick when the schedule has none. s.mu is held.
func (j *jobState) nextTick() int64 {
	if !j.nextKnown {
		j.nextKnown, j.next = true, micros(j.def.Schedule.Next(j.lastTick()))
	}
	return j.next
}

// The cron jobs' next ticks are kept in a timer heap, so that a loop
// iteration costs what is due, not the number of jobs: with 100,000 jobs,
// a pass over all of them at every iteration would cost more than the
// work that is due.
//
// Each active cron job has one live entry: the time to fire its next tick
// after its cursor (FireLead before it, or the tick itself when its fire
// ahead was deferred), recorded in its jobState as queued. An entry whose
// time is not the job's queued time is stale (the job was queued again,
// earlier) and is dropped when it comes up. Code that moves a cursor
// queues the job again (tickQueue.queue); a cursor that only moves forward
// needs nothing more, since its old entry, when it comes up, finds the
// later tick and queues it. setJobs rebuilds the heap, so an entry never
// outlives its job's state.

// tickQueue is the timer heap of the active cron jobs, and what decides
// how far ahead of its tick each job is fired: FireLead, and in a large
// round the job's rank and the fire cost. Scheduler.mu guards it.
type tickQueue struct {
	heap     tickHeap
	fireLead time.Duration // Config.FireLead
	// rounds counts, by tick, the jobs ranked for it (roundLead).
	rounds map[int64]int32
	// deferred holds, by job, a tick whose fire ahead of time the store
	// deferred (an active run of a skip or replace job): it is fired at
	// its time. forget empties it with the states it holds.
	deferred map[*jobState]int64
	cost     fireCost
}

func newTickQueue(fireLead time.Duration) tickQueue {
	return tickQueue{fireLead: fireLead, rounds: map[int64]int32{}, deferred: map[*jobState]int64{}}
}

// deferTick records that the store deferred the fire ahead of time of
// the job's next tick.
func (q *tickQueue) deferTick(j *jobState) { q.deferred[j] = j.nextTick() }

// forget forgets the deferred ticks, when the states of the jobs are
// replaced (setJobs).
func (q *tickQueue) forget() { clear(q.deferred) }

// tickEntry is an entry of the timer heap.
type tickEntry struct {
	at  int64 // Unix microseconds
	job *jobState
}

// tickHeap is a min-heap of entries by time (container/heap).
type tickHeap []tickEntry

func (h tickHeap) Len() int           { return len(h) }
func (h tickHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h tickHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tickHeap) Push(x any)        { *h = append(*h, x.(tickEntry)) }
func (h *tickHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// queue makes sure the heap holds an entry for the next tick of the job
// if it is an active cron job.
func (q *tickQueue) queue(j *jobState) {
	if j == nil || !j.active() {
		return
	}
	at := q.fireAt(j)
	if at == noTick {
		return
	}
	if j.queued != noTick && at >= j.queued {
		return // the live entry comes up first, and finds at then
	}
	j.queued = at
	heap.Push(&q.heap, tickEntry{at: at, job: j})
}

// fireAt is when to fire the job's next tick: FireLead before it, earlier
// in a large round (roundLead), or at it when its fire ahead was deferred;
// noTick when there is none.
func (q *tickQueue) fireAt(j *jobState) int64 {
	nt := j.nextTick()
	if d, ok := q.deferred[j]; nt == noTick || (ok && nt == d) || q.fireLead <= 0 {
		return nt
	}
	at := nt - q.fireLead.Microseconds()
	if extra := q.roundLead(j, nt); extra > 0 {
		// Never before the job's previous tick: a job has at most one
		// tick fired ahead (its cursor), which the loop claims at its time.
		at = max(at-extra, j.last)
	}
	return at
}

// A round of many jobs at one tick is fired further ahead than FireLead,
// so that its runs are written before the tick and only the claim is left
// then. Each job queued for a tick gets a rank among the jobs queued for
// it, in the order they are queued; the first fireBatch ranks fire
// FireLead ahead, and each further fireBatch one step earlier than the
// one before. The round is then written in transactions of fireBatch, a
// step apart, the last one FireLead before the tick. Fired all at once
// FireLead ahead, a round of thousands of jobs was still being written
// after its tick, and the claim of the runs fired by then came after
// that, in one long statement: the round started late. The extra lead is
// at most maxRoundLead.
//
// The step is roundLeadStep (about what a fire of fireBatch takes on a
// fast machine), or 5/4 of the time the store takes to write a fire of
// fireBatch when that is longer (leadStep): on a slower store the round
// starts earlier, so that it is still written before the tick.
const (
	roundLeadStep = 50 * time.Millisecond
	maxRoundLead  = 10 * time.Second
)

// fireCost is how long the store takes to write a fire of fireBatch jobs,
// in microseconds: median is the median of the last fires counted (n of
// them in last, the next written at at); 0 before the first large fire.
type fireCost struct {
	median int64
	last   [3]int64
	n, at  int
}

// note counts the time the store took for a fire of n jobs, scaled to
// fireBatch, among the last three, and sets the median: one of the three,
// slowed by a stall (a checkpoint, a pause of the machine) or quick, does
// not move it; two of them do. The first fire of a process counts alone.
// Fires of fewer than fireBatch/2 jobs are not counted: their fixed costs
// would be scaled up with them.
func (c *fireCost) note(took time.Duration, n int) {
	if n < fireBatch/2 || took < 0 {
		return
	}
	c.last[c.at] = took.Microseconds() * fireBatch / int64(n)
	c.at = (c.at + 1) % len(c.last)
	c.n = min(c.n+1, len(c.last))
	last := c.last // a copy: the ring keeps its order
	sorted := last[:c.n]
	slices.Sort(sorted)
	// The lower median when there are two: the first fire of a process
	// (cold caches) is often its slowest.
	c.median = sorted[(len(sorted)-1)/2]
}

// leadStep is how much earlier each further fireBatch of a large round
// fires: roundLeadStep, or 5/4 of the fire cost if that is longer.
func (q *tickQueue) leadStep() int64 {
	return max(roundLeadStep.Microseconds(), q.cost.median*5/4)
}

// roundLead is how much further ahead than FireLead the job's tick at
// tick is fired, from its rank among the jobs queued for that tick, which
// it is given the first time it is queued for it.
func (q *tickQueue) roundLead(j *jobState, tick int64) int64 {
	if j.rankOf != tick {
		q.unrank(j)
		n := q.rounds[tick] + 1
		q.rounds[tick] = n
		j.rank, j.rankOf = n, tick
	}
	return min(int64((j.rank-1)/fireBatch)*q.leadStep(), maxRoundLead.Microseconds())
}

// unrank takes the job out of the count of its ranked tick.
func (q *tickQueue) unrank(j *jobState) {
	if j.rankOf == noTick {
		return
	}
	if n := q.rounds[j.rankOf] - 1; n > 0 {
		q.rounds[j.rankOf] = n
	} else {
		delete(q.rounds, j.rankOf)
	}
	j.rank, j.rankOf = 0, noTick
}

// requeue rebuilds the heap from the cron jobs and their cursors, in an
// array made for their number when the old one is too small or more than
// twice too large.
func (q *tickQueue) requeue(cron []*jobState) {
	if c := cap(q.heap); c < len(cron) || c > 2*len(cron)+64 {
		q.heap = make(tickHeap, 0, len(cron))
	} else {
		clear(q.heap)
		q.heap = q.heap[:0]
	}
	clear(q.rounds)
	for _, j := range cron {
		j.queued, j.rank, j.rankOf = noTick, 0, noTick
	}
	for _, j := range cron {
		q.queue(j)
	}
}

// popDue takes out of the heap the cron jobs whose next tick is to be
// fired at or before now (see fireAt), in that order. The caller fires
// them and queues them again whatever the outcome.
func (q *tickQueue) popDue(now time.Time) []*jobState {
	var due []*jobState
	until := now.UnixMicro()
	for len(q.heap) > 0 && q.heap[0].at <= until {
		e := heap.Pop(&q.heap).(tickEntry)
		j := e.job
		if j.queued != e.at {
			continue // stale
		}
		j.queued = noTick
		if !j.active() {
			q.unrank(j)
			continue // queued again when resumed
		}
		switch at := q.fireAt(j); {
		case at == noTick:
		case at > until:
			q.queue(j)
		default:
			due = append(due, j)
		}
	}
	return due
}

// next is the time of the first heap entry; zero when empty.
func (q *tickQueue) next() time.Time {
	if len(q.heap) == 0 {
		return time.Time{}
	}
	return fromMicros(q.heap[0].at)
}

// defaultFireLead is Config.FireLead's default: long enough to write the
// runs of fireBatch ticks due at one second before it comes, short enough
// that little can change in between (see Config.FireLead); a larger round
// starts earlier (tickQueue.roundLead).
const defaultFireLead = 250 * time.Millisecond

// defaultClaimLead is Config.ClaimLead's default: several times what the
// claim of a round of a few hundred runs takes on a fast machine, and
// short enough that a run is seen running before its tick only for a
// moment.
const defaultClaimLead = 50 * time.Millisecond
