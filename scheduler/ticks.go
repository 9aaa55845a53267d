package scheduler

import (
	"container/heap"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// The cron jobs' next ticks are kept in a timer heap, so that a loop
// iteration costs what is due, not the number of jobs: with 100,000 jobs a
// pass over all of them took milliseconds every iteration.
//
// Each active cron job (declared, with a cursor, not paused) has one live
// entry: the time of its next tick after its cursor, recorded in its
// tickCache as queued. An entry whose time is not the job's queued time is
// stale (the job was queued again, earlier) and is dropped when it comes up.
// Code that moves a cursor queues the job again (queueLocked); a cursor
// that only moves forward needs nothing more, since its old entry, when it
// comes up, finds the later tick and queues it.

// tickCache is a cron job's next tick after the cursor last, and the time
// of its live heap entry (zero: none).
type tickCache struct{ last, next, queued time.Time }

// tickEntry is an entry of the timer heap.
type tickEntry struct {
	at  time.Time
	job string
}

// tickHeap is a min-heap of entries by time (container/heap).
type tickHeap []tickEntry

func (h tickHeap) Len() int           { return len(h) }
func (h tickHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h tickHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tickHeap) Push(x any)        { *h = append(*h, x.(tickEntry)) }
func (h *tickHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// nextTickLocked returns the next tick of a cron job after its cursor,
// cached until the cursor moves (setJobs drops the cache when the
// definitions change). s.mu is held.
func (s *Scheduler) nextTickLocked(d *jobs.Definition, last time.Time) time.Time {
	c, ok := s.nextTicks[d.Name]
	if ok && c.last.Equal(last) {
		return c.next
	}
	c.last, c.next = last, d.Schedule.Next(last)
	s.nextTicks[d.Name] = c
	return c.next
}

// queueLocked makes sure the heap holds an entry for the next tick of the
// named job if it is an active cron job. s.mu is held.
func (s *Scheduler) queueLocked(name string) {
	d, cur := s.defs[name], s.cursors[name]
	if d == nil || d.Schedule == nil || cur == nil || cur.Paused {
		return
	}
	nt := s.nextTickLocked(d, cur.Last)
	if nt.IsZero() {
		return
	}
	c := s.nextTicks[name]
	if !c.queued.IsZero() && !nt.Before(c.queued) {
		return // the live entry comes up first, and finds nt then
	}
	c.queued = nt
	s.nextTicks[name] = c
	heap.Push(&s.ticks, tickEntry{at: nt, job: name})
}

// requeueAllLocked rebuilds the heap from the declared jobs and cursors.
// s.mu is held.
func (s *Scheduler) requeueAllLocked() {
	s.ticks = s.ticks[:0]
	for name, c := range s.nextTicks {
		c.queued = time.Time{}
		s.nextTicks[name] = c
	}
	for _, d := range s.cron {
		s.queueLocked(d.Name)
	}
}

// dueLocked takes out of the heap the cron jobs whose next tick is at or
// before now, in tick order. The caller fires them and queues them again
// (queueLocked) whatever the outcome. s.mu is held.
func (s *Scheduler) dueLocked(now time.Time) []*jobs.Definition {
	var due []*jobs.Definition
	for len(s.ticks) > 0 && !s.ticks[0].at.After(now) {
		e := heap.Pop(&s.ticks).(tickEntry)
		c, ok := s.nextTicks[e.job]
		if !ok || !c.queued.Equal(e.at) {
			continue // stale
		}
		c.queued = time.Time{}
		s.nextTicks[e.job] = c
		d, cur := s.defs[e.job], s.cursors[e.job]
		if d == nil || d.Schedule == nil || cur == nil || cur.Paused {
			continue // queued again when resumed or declared
		}
		switch nt := s.nextTickLocked(d, cur.Last); {
		case nt.IsZero():
		case nt.After(now):
			s.queueLocked(e.job)
		default:
			due = append(due, d)
		}
	}
	return due
}

// nextQueuedLocked is the time of the first heap entry; zero when empty.
// s.mu is held.
func (s *Scheduler) nextQueuedLocked() time.Time {
	if len(s.ticks) == 0 {
		return time.Time{}
	}
	return s.ticks[0].at
}
