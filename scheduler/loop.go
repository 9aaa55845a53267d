package scheduler

import (
	"context"
	"runtime"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// tickLoop is the scheduling loop: it fires due ticks, expires runs past
// their window, claims due runs up to the free slots and starts them, then
// sleeps until the next tick, the next due run, a wake-up, or PollInterval.
func (s *Scheduler) tickLoop() {
	defer s.life.loops.Done()
	ctx := s.life.loopCtx
	var wakeups <-chan struct{} // nil (never ready) unless the store notifies
	if n, ok := s.st.(store.Notifier); ok {
		wakeups = n.Wakeups()
	}
	for {
		seq := s.testSignals.iterSeq.Add(1)
		next := s.iterate(ctx)
		now := s.clock.Now()
		deadline := next
		if poll := now.Add(s.cfg.PollInterval); poll.Before(deadline) {
			deadline = poll
		}
		s.loop.last.Store(now.UnixNano())
		if s.OnLoop != nil {
			s.OnLoop()
		}
		s.testSignals.iterationDone(seq)
		// The deadline is absolute: if the clock moved meanwhile, the timer
		// fires at once.
		t := s.clock.TimerAt(deadline)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.wake:
			t.Stop()
		case <-wakeups:
			t.Stop()
			s.notifyWake() // another node may have written notifications
		}
	}
}

// iterate does one iteration of the loop, a fixed sequence of steps, and
// returns when the next one is due.
func (s *Scheduler) iterate(ctx context.Context) time.Time {
	it := &iteration{ctx: ctx, now: s.clock.Now()}
	defer s.endBurst(it)
	s.rereadPaused(it)
	s.fireDue(it)
	s.topUpBackfills(it)
	claimAt := s.clock.Now()
	reached := s.takeReached(claimAt)
	s.claimReached(it, claimAt, reached)
	askNext := s.claimDue(it, claimAt, reached)
	s.adoptLostClaims(it)
	s.expire(it)
	overdueNext := s.checkOverdue(it)
	s.rereadReached(it, claimAt, reached)
	next := s.nextWake(it, askNext)
	if !overdueNext.IsZero() && overdueNext.Before(next) {
		next = overdueNext
	}
	return next
}

// iteration is what the steps of one loop iteration share.
type iteration struct {
	ctx context.Context
	now time.Time // the clock when the iteration began
	// storeFailed is set when a store call of the iteration failed: the
	// next iteration comes within a second.
	storeFailed bool
	// burst, when the iteration began a burst, is closed when it ends
	// (see resultQueue.burst).
	burst chan struct{}
}

// loopError notes a store call of the iteration that failed, unless the
// loop is stopping: it is logged and kept as the last store error, which
// an iteration with no failure clears.
func (s *Scheduler) loopError(it *iteration, what string, err error) {
	if it.ctx.Err() != nil {
		return
	}
	it.storeFailed = true
	s.noteStoreError(err)
	s.log.ErrorContext(it.ctx, what, "error", err)
}

// beginBurst makes the results of attempts wait until the iteration ends
// (see resultQueue.burst), unless it has begun a burst already.
func (s *Scheduler) beginBurst(it *iteration) {
	if it.burst != nil {
		return
	}
	done := make(chan struct{})
	it.burst = done
	s.results.burst.Store(&done)
}

// endBurst ends the iteration's burst, if it began one.
func (s *Scheduler) endBurst(it *iteration) {
	if it.burst == nil {
		return
	}
	s.results.burst.Store(nil)
	close(it.burst)
}

// rereadPaused re-reads the paused cursors every poll interval: a pause or
// resume made through another node changes the cursor in the store only.
// (A pause made elsewhere is seen at once: firing on a paused cursor is
// refused by the store and the cursor re-read.)
func (s *Scheduler) rereadPaused(it *iteration) {
	if it.now.Sub(s.loop.pausedReadAt) < s.cfg.PollInterval {
		return
	}
	s.loop.pausedReadAt = it.now
	if err := s.refreshPaused(it.ctx); err != nil {
		s.loopError(it, "read paused cursors", err)
	}
}

// fireDue fires due ticks, the ticks of many jobs per transaction: first
// those whose time has come, then those due within FireLead, ahead of time.
func (s *Scheduler) fireDue(it *iteration) {
	due, early := s.takeDue(it.now)
	size := fireSize(len(due))
	if size < len(due) || len(early) > fireBatch {
		// More than one fire transaction: the results of attempts wait
		// until the round's runs are fired and claimed, at the end of
		// this iteration.
		s.beginBurst(it)
	}
	between := &claimBetween{s: s, it: it}
	_, between.concurrent = s.st.(store.ConcurrentWriter)
	for start := 0; start < len(due); start += size {
		err := s.fireAndQueue(it, due[start:min(start+size, len(due))], false)
		// With more ticks to fire, start the runs made so far: their
		// attempts run while the next batches are written.
		if err == nil && start+size < len(due) {
			between.claim()
		}
	}
	// The ticks due within FireLead: their runs wait for their time, so
	// nothing is claimed between these fires unless that time has come (a
	// burst larger than FireLead lets it write).
	for start := 0; start < len(early); start += fireBatch {
		err := s.fireAndQueue(it, early[start:min(start+fireBatch, len(early))], true)
		if err == nil && start+fireBatch < len(early) && s.aheadReached(s.clock.Now()) {
			between.claim()
		}
	}
	between.wait()
}

// takeDue takes out of the tick queue the jobs whose next tick is to be
// fired now: due, those whose tick has come, and early, those whose tick
// is due within its lead.
func (s *Scheduler) takeDue(now time.Time) (due, early []*jobState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.ticks.popDue(now) {
		if j.nextTick() <= now.UnixMicro() {
			due = append(due, j)
		} else {
			early = append(early, j)
		}
	}
	return due, early
}

// fireAndQueue fires a batch and queues each of its jobs again, whatever
// happened (fired, lost to another writer, failed), at the next tick
// after its cursor: a tick that did not fire is due again at once.
func (s *Scheduler) fireAndQueue(it *iteration, batch []*jobState, ahead bool) error {
	s.fireMu.Lock()
	began := s.clock.Now()
	err := s.fire(it.ctx, batch, it.now, ahead)
	took := s.clock.Now().Sub(began)
	s.fireMu.Unlock()
	s.mu.Lock()
	if err == nil {
		s.ticks.cost.note(took, len(batch))
	}
	for _, j := range batch {
		s.ticks.queue(j)
	}
	s.mu.Unlock()
	if err != nil {
		s.loopError(it, "fire ticks", err)
	}
	return err
}

// claimBetween claims due runs between the fires of an iteration. On a
// store that writes transactions side by side (store.ConcurrentWriter),
// the claim runs while the next fire is written. One claim runs at a
// time.
type claimBetween struct {
	s          *Scheduler
	it         *iteration
	concurrent bool
	pending    chan struct{} // closed when the claim under way ends; nil if none
	err        error         // the error of the claim under way, once pending is closed
}

// claim waits for the claim under way, then claims, side by side with what
// the loop does next on a ConcurrentWriter.
func (c *claimBetween) claim() {
	c.wait()
	s := c.s
	if !c.concurrent {
		if _, _, err := s.claim(c.it.ctx, s.clock.Now(), 0, false); err != nil {
			s.loopError(c.it, "claim runs", err)
		}
		return
	}
	done := make(chan struct{})
	c.pending = done
	go func() {
		defer close(done)
		_, _, c.err = s.claim(c.it.ctx, s.clock.Now(), 0, false)
	}()
}

// wait waits for the claim under way, if any.
func (c *claimBetween) wait() {
	if c.pending == nil {
		return
	}
	<-c.pending
	c.pending = nil
	if c.err != nil {
		c.s.loopError(c.it, "claim runs", c.err)
	}
}

// takeReached takes out the jobs whose ticks, fired ahead, the clock has
// reached at now.
func (s *Scheduler) takeReached(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ahead.takeReached(now)
}

// aheadReached reports whether the clock has reached the earliest tick
// fired ahead.
func (s *Scheduler) aheadReached(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ahead.reached(now)
}

// claimReached claims the runs of the ticks fired ahead whose time has
// come, when more than splitRound jobs share the tick (claimDue claims a
// smaller round at once). They are claimed in parts (of splitRound at
// least and fireBatch at most): three or more one after another, or, on a
// ConcurrentWriter, four or more, four side by side, so that the first
// start after a part of the writing, not all of it; the results of
// attempts that end meanwhile wait, as in a burst. The store need not
// look whether anything is due first: it is. (One claim of a whole large
// round takes many times as long as a claim of fireBatch runs, and no
// attempt of it starts before it ends.)
func (s *Scheduler) claimReached(it *iteration, claimAt time.Time, reached []string) {
	if len(reached) <= splitRound {
		return
	}
	s.beginBurst(it)
	// In turn, each part pays for a transaction of its own: on SQLite,
	// three parts spread the starts of a round less than two or four.
	part := min(fireBatch, max(splitRound, (len(reached)+2)/3))
	if _, concurrent := s.st.(store.ConcurrentWriter); concurrent && s.freeSlots() >= len(reached) {
		// Side by side, each part claiming the runs of its own jobs:
		// no part waits for another's write, and none skips the runs
		// another has locked.
		part = min(fireBatch, max(splitRound, (len(reached)+3)/4))
		for _, err := range s.claimParts(it.ctx, claimAt, reached, part) {
			s.loopError(it, "claim runs", err)
		}
		return
	}
	for claimed := 0; claimed < len(reached); {
		n, _, err := s.claim(it.ctx, claimAt, part, true)
		if err != nil {
			s.loopError(it, "claim runs", err)
			return
		}
		if claimed += n; n < part {
			return
		}
		// Let the part's attempts start on this processor before
		// the next part is written. Handed to the other one, they
		// waited for its thread to wake.
		runtime.Gosched()
	}
}

// claimDue claims and starts due runs, then the runs of the ticks fired
// ahead that come within ClaimLead. It reports whether the claim of due
// runs found fewer than it had slots: only then is the next due run asked
// for, since otherwise the attempts that end wake the loop.
func (s *Scheduler) claimDue(it *iteration, claimAt time.Time, reached []string) (askNext bool) {
	_, askNext, err := s.claim(it.ctx, claimAt, 0, len(reached) > 0 && len(reached) <= splitRound)
	if err != nil {
		s.loopError(it, "claim runs", err)
	}
	if err := s.claimAhead(it.ctx, s.clock.Now()); err != nil {
		s.loopError(it, "claim runs ahead of their tick", err)
	}
	return askNext
}

// expire expires runs that can no longer start, at most once a second
// (under load the loop turns hundreds of times a second), and after the
// claims, which it would delay: a claim never takes a run past its
// not_after, so this only records what already holds.
func (s *Scheduler) expire(it *iteration) {
	if it.now.Sub(s.loop.expiredAt) < time.Second && !it.now.Before(s.loop.expiredAt) {
		return
	}
	s.loop.expiredAt = it.now
	if err := s.expireRuns(it.ctx, it.now); err != nil {
		s.loopError(it, "expire runs", err)
	}
}

// expireRuns records as expired the waiting runs whose not_after has come.
func (s *Scheduler) expireRuns(ctx context.Context, now time.Time) error {
	expired, err := s.st.RunsExpire(ctx, store.RunsExpireParams{Node: s.cfg.NodeID, Now: s.storeNow(now), Notify: s.notifyTargets,
		Chain: s.chainOf})
	for _, r := range expired {
		s.logRun(ctx, r, "", "run expired: not started by not_after")
	}
	s.noteRunsEnded(expired...)
	if len(expired) > 0 {
		s.notifyWake()
		s.Wake() // their chains' runs may be due
	}
	return err
}

// rereadReached reads again the cursors of the ticks fired ahead that the
// clock has reached: if a pause or a reload took a tick back (its run is
// gone and the cursor moved back), the tick is due now, and fires at the
// next iteration.
func (s *Scheduler) rereadReached(it *iteration, claimAt time.Time, reached []string) {
	if len(reached) == 0 {
		return
	}
	cs, err := s.st.ScheduleCursors(it.ctx, reached)
	if err != nil {
		s.loopError(it, "read schedule cursors", err)
		// Read them again in a second.
		again := claimAt.Add(time.Second).UnixMicro()
		s.mu.Lock()
		s.ahead.readAgainAt(reached, again)
		s.mu.Unlock()
	}
	for name, c := range cs {
		s.setCursor(name, c)
	}
}

// nextWake is when the next iteration is due: the next tick to fire, tick
// fired ahead to claim or run to claim ahead, the next due run when
// askNext, and at the latest a poll interval after this iteration began;
// within a second when a store call failed.
func (s *Scheduler) nextWake(it *iteration, askNext bool) time.Time {
	next := it.now.Add(s.cfg.PollInterval)
	s.mu.Lock()
	if nt := s.ticks.next(); !nt.IsZero() && nt.Before(next) {
		next = nt
	}
	if s.ahead.first != noTick {
		if at := fromMicros(s.ahead.first); at.Before(next) {
			next = at
		}
	}
	if s.cfg.ClaimLead > 0 && s.ahead.firstToClaim != noTick {
		if at := fromMicros(s.ahead.firstToClaim).Add(-s.cfg.ClaimLead); at.Before(next) {
			next = at
		}
	}
	s.mu.Unlock()
	if askNext {
		s.mu.Lock()
		names := s.declared.names // replaced, never changed, by setJobs
		s.mu.Unlock()
		nextRun, err := s.st.RunsNextDue(it.ctx, names, it.now)
		if err != nil {
			s.loopError(it, "next due run", err)
		} else if nextRun.After(it.now) && nextRun.Before(next) {
			next = nextRun
		}
	}
	if !it.storeFailed {
		s.lastStoreErr.Store(nil)
	} else if d := it.now.Add(time.Second); d.Before(next) {
		next = d // try again soon
	}
	return next
}

// pruneLoop deletes finished runs older than history, at start and then
// every PruneInterval.
func (s *Scheduler) pruneLoop(start time.Time) {
	defer s.life.loops.Done()
	ctx := s.life.loopCtx
	next := start
	for {
		now := s.clock.Now()
		n, err := s.st.RunsPrune(ctx, now.Add(-s.cfg.History))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "prune runs", "error", err)
		case n > 0:
			s.log.InfoContext(ctx, "pruned finished runs", "count", n, "history", s.cfg.History)
		}
		// Delivered and failed notifications go with the same history.
		if n, err := s.st.NotificationsPrune(ctx, s.clock.Now().Add(-s.cfg.History)); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "prune notifications", "error", err)
		} else if n > 0 {
			s.log.InfoContext(ctx, "pruned finished notifications", "count", n, "history", s.cfg.History)
		}
		// From the round's start: a clock that moved during the round
		// (a test's) must not push the next one a round further.
		next = nextRound(next, now, s.cfg.PruneInterval)
		t := s.clock.TimerAt(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// nextRound returns the deadline of a periodic loop's round after the one
// due at next: every after it, so that a late round is made up at once
// and the rounds never drift; but every after now when that is more than
// one round away from now: the clock was stepped (back, the rounds would
// stop until the clock came back to next; on, they would come at once,
// one after the other, until they caught up), or the rounds fell behind.
func nextRound(next, now time.Time, every time.Duration) time.Time {
	next = next.Add(every)
	if next.Before(now.Add(-every)) || next.After(now.Add(every)) {
		next = now.Add(every)
	}
	return next
}

func (s *Scheduler) noteStoreError(err error) {
	msg := err.Error()
	s.lastStoreErr.Store(&msg)
}

// refreshPaused re-reads the cursors of the jobs this node sees paused.
func (s *Scheduler) refreshPaused(ctx context.Context) error {
	s.mu.Lock()
	var paused []string
	for _, j := range s.declared.cron {
		if j.hasCursor && j.paused {
			paused = append(paused, j.def.Name)
		}
	}
	s.mu.Unlock()
	if len(paused) == 0 {
		return nil
	}
	cs, err := s.st.ScheduleCursors(ctx, paused)
	if err != nil {
		return err
	}
	for name, c := range cs {
		s.setCursor(name, c)
	}
	return nil
}
