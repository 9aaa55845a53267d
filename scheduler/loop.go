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
	defer s.loops.Done()
	ctx := s.loopCtx
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
		s.lastLoop.Store(now.UnixNano())
		if s.OnLoop != nil {
			s.OnLoop()
		}
		s.testSignals.iterationDone(seq)
		// The deadline is absolute: if the clock moved meanwhile, the timer
		// fires at once.
		t := s.clock.NewTimer(deadline.Sub(s.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.wake:
			t.Stop()
		case <-wakeups:
			t.Stop()
		}
	}
}

// iterate does one round of work and returns when the next one is due.
func (s *Scheduler) iterate(ctx context.Context) time.Time {
	now := s.clock.Now()
	next := now.Add(s.cfg.PollInterval)
	storeOK := true
	noteErr := func(what string, err error) {
		if ctx.Err() != nil {
			return
		}
		storeOK = false
		s.noteStoreError(err)
		s.log.ErrorContext(ctx, what, "error", err)
	}

	// A pause or resume made through another node changes the cursor in
	// the store only: re-read paused cursors every poll interval. (A pause
	// made elsewhere is seen at once: firing on a paused cursor is refused
	// by the store and the cursor re-read.)
	if now.Sub(s.pausedReadAt) >= s.cfg.PollInterval {
		s.pausedReadAt = now
		if err := s.refreshPaused(ctx); err != nil {
			noteErr("read paused cursors", err)
		}
	}

	// Fire due ticks, the ticks of many jobs per transaction: first those
	// whose time has come, then those due within FireLead, ahead of time.
	s.mu.Lock()
	var due, early []*jobState
	for _, j := range s.dueLocked(now) {
		if j.nextTick() <= now.UnixMicro() {
			due = append(due, j)
		} else {
			early = append(early, j)
		}
	}
	s.mu.Unlock()
	size := fireSize(len(due))
	if size < len(due) || len(early) > fireBatch {
		// More than one fire transaction: the results of attempts wait
		// until the round's runs are fired and claimed, at the end of
		// this iteration.
		done := make(chan struct{})
		s.burst.Store(&done)
		defer func() {
			s.burst.Store(nil)
			close(done)
		}()
	}
	// On a store that writes transactions side by side, the claim after a
	// fire runs while the next fire is written. One claim runs at a time.
	_, concurrent := s.st.(store.ConcurrentWriter)
	var (
		claiming chan struct{}
		claimErr error
	)
	awaitClaim := func() {
		if claiming == nil {
			return
		}
		<-claiming
		claiming = nil
		if claimErr != nil {
			noteErr("claim runs", claimErr)
		}
	}
	claimBetween := func() {
		awaitClaim()
		if !concurrent {
			if _, _, err := s.claim(ctx, s.clock.Now(), 0, false); err != nil {
				noteErr("claim runs", err)
			}
			return
		}
		done := make(chan struct{})
		claiming = done
		go func() {
			defer close(done)
			_, _, claimErr = s.claim(ctx, s.clock.Now(), 0, false)
		}()
	}
	// fireQueued fires a batch and queues each of its jobs again, whatever
	// happened (fired, lost to another writer, failed), at the next tick
	// after its cursor: a tick that did not fire is due again at once.
	fireQueued := func(batch []*jobState, ahead bool) error {
		s.fireMu.Lock()
		began := s.clock.Now()
		err := s.fire(ctx, batch, now, ahead)
		took := s.clock.Now().Sub(began)
		s.fireMu.Unlock()
		s.mu.Lock()
		if err == nil {
			s.noteFireCostLocked(took, len(batch))
		}
		for _, j := range batch {
			s.queueLocked(j)
		}
		s.mu.Unlock()
		if err != nil {
			noteErr("fire ticks", err)
		}
		return err
	}
	for start := 0; start < len(due); start += size {
		err := fireQueued(due[start:min(start+size, len(due))], false)
		// With more ticks to fire, start the runs made so far: their
		// attempts run while the next batches are written.
		if err == nil && start+size < len(due) {
			claimBetween()
		}
	}
	// The ticks due within FireLead: their runs wait for their time, so
	// nothing is claimed between these fires unless that time has come (a
	// burst larger than FireLead lets it write).
	for start := 0; start < len(early); start += fireBatch {
		err := fireQueued(early[start:min(start+fireBatch, len(early))], true)
		if err == nil && start+fireBatch < len(early) && s.aheadReached(s.clock.Now()) {
			claimBetween()
		}
	}
	awaitClaim()

	// The ticks fired ahead whose time has come. When many jobs share the
	// tick, their runs are claimed in parts (of splitRound at least and
	// fireBatch at most): three or more one after another, or, on a
	// ConcurrentWriter, four or more, four side by side, so that the first
	// start after a part of the writing, not all of it; the results of
	// attempts that end meanwhile wait, as in a burst. The store need not
	// look whether anything is due first: it is. (With 10,000 runs at one
	// tick, one claim of 4,000 took 370 ms on PostgreSQL, a claim of 500
	// 20-30 ms.)
	claimAt := s.clock.Now()
	s.mu.Lock()
	reached := s.aheadDueLocked(claimAt)
	s.mu.Unlock()
	if len(reached) > splitRound {
		if s.burst.Load() == nil {
			done := make(chan struct{})
			s.burst.Store(&done)
			defer func() {
				s.burst.Store(nil)
				close(done)
			}()
		}
		// In turn, each part pays for a transaction of its own: with 167
		// jobs at one tick, the SQLite spread p50 was 4.8-5.2 ms in three
		// parts (one run of six: 7.6), 5.9-7.5 in two and 5.2-5.9 in four.
		part := min(fireBatch, max(splitRound, (len(reached)+2)/3))
		if concurrent && s.freeSlots() >= len(reached) {
			// Side by side, each part claiming the runs of its own jobs:
			// no part waits for another's write, and none skips the runs
			// another has locked.
			part = min(fireBatch, max(splitRound, (len(reached)+3)/4))
			for _, err := range s.claimParts(ctx, claimAt, reached, part) {
				noteErr("claim runs", err)
			}
		} else {
			for claimed := 0; claimed < len(reached); {
				n, _, err := s.claim(ctx, claimAt, part, true)
				if err != nil {
					noteErr("claim runs", err)
					break
				}
				if claimed += n; n < part {
					break
				}
				// Let the part's attempts start on this processor before
				// the next part is written. Handed to the other one, they
				// waited for its thread to wake: 1-3 ms on the benchmark's
				// VM.
				runtime.Gosched()
			}
		}
	}

	// Claim and start due runs. Only when the claim found fewer due runs
	// than it had slots is the next due run asked for: otherwise the
	// attempts that end wake the loop.
	_, askNext, err := s.claim(ctx, claimAt, 0, len(reached) > 0 && len(reached) <= splitRound)
	if err != nil {
		noteErr("claim runs", err)
	}
	// Then the runs of the ticks fired ahead that come within ClaimLead.
	if err := s.claimAhead(ctx, s.clock.Now()); err != nil {
		noteErr("claim runs ahead of their tick", err)
	}

	// Expire runs that can no longer start, at most once a second (under
	// load the loop turns hundreds of times a second), and after the
	// claims, which it would delay: a claim never takes a run past its
	// not_after, so this only records what already holds.
	if now.Sub(s.expiredAt) >= time.Second || now.Before(s.expiredAt) {
		s.expiredAt = now
		expired, err := s.st.RunsExpire(ctx, s.cfg.NodeID, s.storeNow(now))
		if err != nil {
			noteErr("expire runs", err)
		}
		for _, r := range expired {
			s.logRun(ctx, r, "", "run expired: not started by not_after")
		}
	}

	// The cursors of those ticks are read again: if a pause or a reload
	// took a tick back (its run is gone and the cursor moved back), the
	// tick is due now, and fires at the next iteration.
	if len(reached) > 0 {
		cs, err := s.st.ScheduleCursors(ctx, reached)
		if err != nil {
			noteErr("read schedule cursors", err)
			// Read them again in a second.
			again := claimAt.Add(time.Second).UnixMicro()
			s.mu.Lock()
			for _, name := range reached {
				s.ahead[name] = again
			}
			s.aheadAt = earliest(s.aheadAt, again)
			s.mu.Unlock()
		}
		for name, c := range cs {
			s.setCursor(name, c)
		}
	}
	s.mu.Lock()
	if nt := s.nextQueuedLocked(); !nt.IsZero() && nt.Before(next) {
		next = nt
	}
	if s.aheadAt != noTick {
		if at := fromMicros(s.aheadAt); at.Before(next) {
			next = at
		}
	}
	if s.cfg.ClaimLead > 0 && s.claimAheadAt != noTick {
		if at := fromMicros(s.claimAheadAt).Add(-s.cfg.ClaimLead); at.Before(next) {
			next = at
		}
	}
	s.mu.Unlock()
	if askNext {
		s.mu.Lock()
		limits := s.limits // replaced, never changed, by setJobs
		s.mu.Unlock()
		nextRun, err := s.st.RunsNextDue(ctx, limits)
		if err != nil {
			noteErr("next due run", err)
		} else if nextRun.After(now) && nextRun.Before(next) {
			next = nextRun
		}
	}
	if storeOK {
		s.lastStoreErr.Store(nil)
	} else if d := now.Add(time.Second); d.Before(next) {
		next = d // try again soon
	}
	return next
}

// pruneLoop deletes finished runs older than history, at start and then
// every PruneInterval.
func (s *Scheduler) pruneLoop(start time.Time) {
	defer s.loops.Done()
	ctx := s.loopCtx
	next := start
	for {
		n, err := s.st.RunsPrune(ctx, s.clock.Now().Add(-s.cfg.History))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "prune runs", "error", err)
		case n > 0:
			s.log.InfoContext(ctx, "pruned finished runs", "count", n, "history", s.cfg.History)
		}
		next = next.Add(s.cfg.PruneInterval)
		t := s.clock.NewTimer(next.Sub(s.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (s *Scheduler) noteStoreError(err error) {
	msg := err.Error()
	s.lastStoreErr.Store(&msg)
}

// refreshPaused re-reads the cursors of the jobs this node sees paused.
func (s *Scheduler) refreshPaused(ctx context.Context) error {
	s.mu.Lock()
	var paused []string
	for _, j := range s.cron {
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
