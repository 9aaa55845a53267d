package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// claimParts claims the due runs of the jobs reached, part jobs at a
// time, sideBySide parts at once (on a ConcurrentWriter, with a slot free
// for each job), and returns the errors of the parts that failed.
func (s *Scheduler) claimParts(ctx context.Context, now time.Time, reached []string, part int) []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	var parts [][]string
	for start := 0; start < len(reached); start += part {
		parts = append(parts, reached[start:min(start+part, len(reached))])
	}
	// sideBySide claimers, each taking the parts in turn from the first.
	var next atomic.Int64
	for range min(sideBySide, len(parts)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(parts)); i = next.Add(1) - 1 {
				names := parts[i]
				if _, _, err := s.claimJobs(ctx, now, len(names), true, names); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// sideBySide is how many claims of a round's parts run at once on a
// ConcurrentWriter.
const sideBySide = 4

// freeSlots is how many attempts may start now (see attemptSet.free).
func (s *Scheduler) freeSlots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts.free(s.cfg.Concurrency)
}

// claim starts due runs up to the free slots, and at most most of them
// unless most is 0. It returns how many it started and reports whether it
// asked the store and got fewer runs than it had slots (or failed): only
// then can the next due run be later than the next wake-up.
func (s *Scheduler) claim(ctx context.Context, now time.Time, most int, due bool) (int, bool, error) {
	return s.claimJobs(ctx, now, most, due, nil)
}

// claimJobs is claim over the declared jobs named in only, or over all of
// them when only is nil.
func (s *Scheduler) claimJobs(ctx context.Context, now time.Time, most int, due bool, only []string) (int, bool, error) {
	runs, more, err := s.claimRuns(ctx, s.storeNow(now), most, due, only, nil, nil)
	return len(runs), more, err
}

// claimRuns is claimJobs with the Now to give the store, and returns the
// runs it claimed. Their attempts start when start is closed (at once
// when it is nil), as part of the round rs.
func (s *Scheduler) claimRuns(ctx context.Context, now time.Time, most int, due bool, only []string,
	start *gate, rs *roundStart) ([]*jobs.Run, bool, error) {
	s.mu.Lock()
	free := s.attempts.free(s.cfg.Concurrency)
	draining := s.attempts.draining || s.lease.fenced.Load()
	limits := s.declared.limits // replaced, never changed, by setJobs
	s.mu.Unlock()
	if only != nil {
		limits = limits.Only(only)
	}
	if free <= 0 || draining || limits.Len() == 0 {
		return nil, false, nil
	}
	// Claim in batches: while attempts are finishing, wait until half of
	// the slots are free (every finished attempt wakes the loop, and
	// claiming the one slot it frees would make claims one run each under
	// load, each a transaction). Slots held by attempts that are still
	// running are not waited for: a due run must not wait for long
	// attempts to end.
	if free < max(1, s.cfg.Concurrency/2) && s.attempts.finishing.Load() > 0 {
		return nil, false, nil
	}
	limit := free
	if most > 0 {
		limit = min(free, most)
	}
	runs, err := s.st.RunsClaim(ctx, store.ClaimParams{
		Node: s.cfg.NodeID, Incarnation: s.Incarnation(), Jobs: limits, Limit: limit, Now: now, Due: due,
	})
	if err != nil {
		s.loop.claimFailed.Store(true)
		return nil, true, err
	}
	msg := "attempt started"
	if start != nil {
		msg = "attempt claimed; it starts at its tick"
	}
	for _, r := range runs {
		s.logRun(ctx, r, "", msg)
		s.startAttempt(r, start, rs)
	}
	return runs, len(runs) < free, nil
}

// claimAhead claims, ClaimLead before their tick, the runs of the ticks
// fired ahead (aheadTicks.takeRounds), with the tick as the claim's time
// (the attempt's started_at), and starts their attempts when the clock
// reaches the tick. At the tick nothing is left to write: the handlers
// start then, not after a claim of the whole round. The jobs whose run
// the claim did not take (it is gone, withdrawn, or the job is at its
// concurrency limit) go back to ahead: at their tick the loop claims them,
// or reads their cursor again, as it does for every tick fired ahead.
//
// The clock that starts them is the node's, the one that fired the tick,
// also when the store's clock rules (StoreClock): the claim is given the
// tick explicitly, and takes only runs whose not_before is at or before it.
func (s *Scheduler) claimAhead(ctx context.Context, now time.Time) error {
	if s.cfg.ClaimLead <= 0 {
		return nil
	}
	s.mu.Lock()
	rounds := s.ahead.takeRounds(now.UnixMicro(), now.Add(s.cfg.ClaimLead).UnixMicro(), s.attempts.free(s.cfg.Concurrency))
	s.mu.Unlock()
	for i, round := range rounds {
		at := fromMicros(round.at)
		rs := newRoundStart()
		runs, _, err := s.claimRuns(ctx, at, len(round.jobs), true, round.jobs, s.startAt(at, rs), rs)
		rs.attemptStarted(s) // the claim's own hold
		// A job's run of the tick, that is: the claim may have taken
		// another due run of the job instead (a retry).
		claimed := make(map[string]bool, len(runs))
		for _, r := range runs {
			if r.ScheduledAt.UnixMicro() == round.at {
				claimed[r.Job] = true
			}
		}
		s.mu.Lock()
		for _, name := range round.jobs {
			if !claimed[name] {
				s.ahead.add(name, round.at)
			}
		}
		if err != nil {
			// The later rounds are claimed at their tick too.
			for _, later := range rounds[i+1:] {
				for _, name := range later.jobs {
					s.ahead.add(name, later.at)
				}
			}
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// startAt returns a gate that opens when the clock reaches t (at once if
// it has), or when the node's attempts are stopped for good. When it
// opens, rs becomes the round that is starting.
func (s *Scheduler) startAt(t time.Time, rs *roundStart) *gate {
	start := new(gate)
	open := func() {
		s.results.starting.Store(rs)
		start.open()
	}
	if !t.After(s.clock.Now()) {
		open()
		return start
	}
	go func() {
		s.waitUntil(t)
		open()
	}()
	return start
}

// roundStart follows the start of the attempts of a round claimed ahead:
// from its tick until every one of them has started (or was stopped
// before), the results of other attempts wait to be written and the
// attempts that end do not wake the loop. On SQLite, whose writes and
// reads run on this process's processors, the completer's write and the
// loop's claim otherwise took both processors from the round's attempts,
// which waited for them.
type roundStart struct {
	// waiting counts the attempts claimed that have not started, plus
	// one held by the claim until it has started them all.
	waiting atomic.Int64
	done    chan struct{} // closed when waiting reaches 0
}

func newRoundStart() *roundStart {
	rs := &roundStart{done: make(chan struct{})}
	rs.waiting.Store(1)
	return rs
}

// attemptStarted notes that one more attempt of the round has started
// (or that the claim has started them all); the last wakes the loop.
func (rs *roundStart) attemptStarted(s *Scheduler) {
	if rs.waiting.Add(-1) == 0 {
		close(rs.done)
		s.Wake()
	}
}

// started reports whether every attempt of the round has started.
func (rs *roundStart) started() bool {
	select {
	case <-rs.done:
		return true
	default:
		return false
	}
}

// adoptLostClaims runs the attempts that a claim whose answer was lost
// took. A claim that fails may have committed: when the connection breaks
// as the claim commits (PostgreSQL restarting, or failing over to a
// standby that has the commit), the store holds runs running on this
// incarnation that no process runs, and that no other node recovers, as
// this node heartbeats. So after a claim failed, once the iteration's
// claims are done (claims run in the loop alone), the loop lists the runs
// the store holds running on this node and starts those of this
// incarnation that it does not know of, each at the time it was claimed
// for: a run claimed ahead of its tick starts at the tick.
func (s *Scheduler) adoptLostClaims(it *iteration) {
	if !s.loop.claimFailed.Swap(false) || s.lease.fenced.Load() {
		return
	}
	inc := s.Incarnation()
	// What this node runs or writes the result of, read before the store
	// is: an attempt that ends meanwhile is in it, and nothing is claimed
	// meanwhile.
	s.mu.Lock()
	known := make(map[string]bool, len(s.attempts.running)+len(s.attempts.writing))
	for id := range s.attempts.running {
		known[id] = true
	}
	for id := range s.attempts.writing {
		known[id] = true
	}
	s.mu.Unlock()
	runs, err := s.st.RunsRunning(it.ctx, s.cfg.NodeID)
	if err != nil {
		s.loop.claimFailed.Store(true) // look again at the next iteration
		s.loopError(it, "look for runs claimed by a claim that failed", err)
		return
	}
	for _, r := range runs {
		if r.Incarnation != inc || known[r.ID] || s.lease.fenced.Load() || s.Incarnation() != inc {
			continue
		}
		s.log.WarnContext(it.ctx, "attempt claimed by a claim whose answer was lost: starting it",
			"job", r.Job, "run", r.ID, "attempt", r.Attempt, "claimed_for", r.StartedAt.UTC().Format(time.RFC3339Nano))
		s.startAttempt(r, s.openAt(r.StartedAt), nil)
	}
}

// openAt returns a gate that the clock opens at t, or nil (start at once)
// when t has come.
func (s *Scheduler) openAt(t time.Time) *gate {
	if !t.After(s.clock.Now()) {
		return nil
	}
	start := new(gate)
	go func() {
		s.waitUntil(t)
		start.open()
	}()
	return start
}

// waitUntil returns when the clock reaches t, or when the node's attempts
// are stopped for good. A timer that fires early (the clock was stepped
// back) is set again.
func (s *Scheduler) waitUntil(t time.Time) {
	for t.After(s.clock.Now()) {
		tm := s.clock.TimerAt(t)
		select {
		case <-tm.C():
		case <-s.life.runCtx.Done():
			tm.Stop()
			return
		}
	}
}
