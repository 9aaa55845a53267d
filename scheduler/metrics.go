package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// counters count what this process did since it started.
type counters struct {
	ticksFired      atomic.Int64
	attemptsStarted atomic.Int64
	staleWrites     atomic.Int64
	// runs ended or moved on by this node's results, by the status the
	// result wrote: completed, retrying, dead_letter, cancelled.
	completed, retrying, deadLetter, cancelled atomic.Int64
}

// noteResult counts a result written with status to.
func (c *counters) noteResult(to jobs.Status) {
	switch to {
	case jobs.StatusCompleted:
		c.completed.Add(1)
	case jobs.StatusRetrying:
		c.retrying.Add(1)
	case jobs.StatusDeadLetter:
		c.deadLetter.Add(1)
	case jobs.StatusCancelled:
		c.cancelled.Add(1)
	}
}

// Metrics are this process's figures for /metrics: read from memory, so a
// scrape costs the store nothing.
type Metrics struct {
	Node, Incarnation, Version string
	Jobs                       int
	Concurrency                int
	Running                    int // attempts whose result is not written yet
	Fenced                     bool
	LastHeartbeat              time.Time // last successful heartbeat
	LastLoop                   time.Time // last iteration of the scheduling loop
	// TicksFired counts the runs this node made for cron ticks (one
	// taken back by a pause or reload before its claim included).
	TicksFired      int64
	AttemptsStarted int64 // handlers or processes started
	// Results written by this node, by the status they wrote.
	Results map[jobs.Status]int64
	// StaleWrites are results refused because the attempt had been taken
	// from this node (fencing).
	StaleWrites int64
	// FireBatch is how long the store takes to write a fire of 500 cron
	// ticks (fireCost.note); 0 until one of 250 or more was written.
	FireBatch time.Duration
}

// Metrics returns this process's figures.
func (s *Scheduler) Metrics() Metrics {
	s.mu.Lock()
	nJobs := len(s.declared.all)
	fireBatch := time.Duration(s.ticks.cost.median) * time.Microsecond
	s.mu.Unlock()
	c := &s.count
	return Metrics{
		Node: s.cfg.NodeID, Incarnation: s.Incarnation(), Version: s.cfg.Version, Jobs: nJobs, Concurrency: s.cfg.Concurrency,
		Running: s.Running(), Fenced: s.lease.fenced.Load(),
		LastHeartbeat: time.Unix(0, s.lease.lastHeartbeat.Load()), LastLoop: time.Unix(0, s.loop.last.Load()),
		TicksFired: c.ticksFired.Load(), AttemptsStarted: c.attemptsStarted.Load(),
		Results: map[jobs.Status]int64{
			jobs.StatusCompleted: c.completed.Load(), jobs.StatusRetrying: c.retrying.Load(),
			jobs.StatusDeadLetter: c.deadLetter.Load(), jobs.StatusCancelled: c.cancelled.Load(),
		},
		StaleWrites: c.staleWrites.Load(), FireBatch: fireBatch,
	}
}
