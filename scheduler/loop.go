package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
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
		seq := s.iterSeq.Add(1)
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
		if s.iterDone != nil {
			s.iterDone(seq)
		}
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

// fireBatch bounds the jobs whose ticks one transaction fires.
const fireBatch = 500

// splitRound is the largest round of due jobs fired in one transaction.
const splitRound = 32

// fireSize is how many of n due jobs each fire transaction takes: a round
// of more than splitRound is fired in two halves, or in batches of
// fireBatch, and each is claimed before the next is fired, so that half of
// the round's runs start after half of the writing.
func fireSize(n int) int {
	if n <= splitRound {
		return n
	}
	return min(fireBatch, (n+1)/2)
}

// fire handles the due ticks of several cron jobs in one transaction, or,
// ahead, their ticks due within FireLead (see planAhead). A job whose
// cursor another writer moved has its cursor read again.
func (s *Scheduler) fire(ctx context.Context, due []*jobState, now time.Time, ahead bool) error {
	var (
		params []store.FireParams
		plans  []tickPlan
		fired  []*jobState
	)
	s.mu.Lock()
	lasts := make([]time.Time, len(due))
	horizons := make([]time.Time, len(due))
	for i, j := range due {
		lasts[i] = j.lastTick()
		// The ticks within FireLead, or the next one, which a large round
		// fires further ahead (roundLeadLocked).
		horizons[i] = now.Add(s.cfg.FireLead)
		if nt := fromMicros(j.nextTick()); nt.After(horizons[i]) {
			horizons[i] = nt
		}
	}
	s.mu.Unlock()
	for i, j := range due {
		d, last := j.def, lasts[i]
		var plan tickPlan
		if ahead {
			plan = planAhead(d, last, now, horizons[i])
		} else {
			plan = planTicks(d, last, now)
		}
		if plan.Cursor.IsZero() {
			continue
		}
		p := store.FireParams{
			Job: d.Name, Expect: last, Cursor: plan.Cursor,
			Skipped: plan.SkippedCount, LastSkipped: plan.LastSkipped,
			Overlap: d.Overlap, Node: s.cfg.NodeID, Now: s.storeNow(now),
		}
		for _, t := range plan.Fire {
			nb, na := d.Window(jobs.TriggerSchedule, t)
			p.Runs = append(p.Runs, store.RunInsertParams{
				Job: d.Name, Trigger: jobs.TriggerSchedule, ScheduledAt: t, NotBefore: nb, NotAfter: na,
				Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, Node: s.cfg.NodeID, Now: s.storeNow(now),
			})
		}
		params, plans, fired = append(params, p), append(plans, plan), append(fired, j)
	}
	if len(params) == 0 {
		return nil
	}
	results, err := s.st.ScheduleFires(ctx, params)
	if err != nil {
		return err
	}
	var lost []string
	for i, res := range results {
		d, plan := fired[i].def, plans[i]
		if res.Deferred {
			// An active run of a skip or replace job: the tick is fired at
			// its time, when the policy can judge the runs active then.
			s.mu.Lock()
			j := fired[i]
			j.deferred = j.nextTick()
			s.mu.Unlock()
			continue
		}
		if !res.Advanced {
			// Another writer moved the cursor (or paused the job): read it
			// and plan again.
			lost = append(lost, d.Name)
			continue
		}
		s.setCursor(d.Name, res.Cursor)
		s.logFire(ctx, d, plan, res, now)
	}
	if len(lost) > 0 {
		cs, err := s.st.ScheduleCursors(ctx, lost)
		if err != nil {
			return err
		}
		for name, c := range cs {
			s.setCursor(name, c)
		}
	}
	return nil
}

// setCursor records a cursor of a declared cron job read from or written
// to the store, and queues the job at its next tick.
func (s *Scheduler) setCursor(job string, c *store.Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobLocked(job); j != nil && j.def.Schedule != nil {
		j.setCursor(c)
		s.noteAheadLocked(j, s.clock.Now())
		s.queueLocked(j)
	}
}

// logFire logs what firing did for one job: skipped ticks, overlap
// decisions, the runs made; and stops the attempts that overlap = replace
// cancelled.
func (s *Scheduler) logFire(ctx context.Context, d *jobs.Definition, plan tickPlan, res *store.FireResult, now time.Time) {
	for _, t := range plan.Skipped {
		why := "missed by more than misfire_grace"
		if !t.After(now.Add(-d.CatchupWindow)) {
			why = "older than catchup_window"
		}
		s.log.WarnContext(ctx, "tick skipped", "job", d.Name, "tick", t.UTC().Format(time.RFC3339), "catchup", d.Catchup, "why", why)
	}
	if n := plan.SkippedCount - len(plan.Skipped); n > 0 {
		s.log.WarnContext(ctx, "more ticks skipped", "job", d.Name, "count", n, "newest", plan.LastSkipped.UTC().Format(time.RFC3339))
	}
	if res.SkippedOverlap > 0 {
		s.log.WarnContext(ctx, "tick skipped: the previous run is still active", "job", d.Name, "count", res.SkippedOverlap, "overlap", d.Overlap)
	}
	for _, r := range res.Replaced {
		if r.Status == jobs.StatusRunning {
			s.stopLocal(r.ID, jobs.ReasonReplaced)
		} else {
			s.logRun(ctx, r, "", "run replaced by a newer tick")
		}
	}
	s.count.ticksFired.Add(int64(len(res.Created)))
	for _, r := range res.Created {
		// late is negative for a tick fired ahead of its time.
		s.log.InfoContext(ctx, "tick fired", "job", r.Job, "run", r.ID, "tick", r.ScheduledAt.UTC().Format(time.RFC3339),
			"late", now.Sub(r.ScheduledAt).Round(time.Millisecond).String())
	}
	if res.Duplicates > 0 {
		s.log.InfoContext(ctx, "tick already fired", "job", d.Name, "count", res.Duplicates)
	}
}

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

// freeSlots is how many attempts may start now (see freeLocked).
func (s *Scheduler) freeSlots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freeLocked()
}

// freeLocked is how many attempts may start now. An attempt that ended
// holds no slot while its result is written, but at most Concurrency
// results may wait for their write: a store that writes them slower than
// attempts end holds claims back. s.mu is held.
func (s *Scheduler) freeLocked() int {
	return min(s.cfg.Concurrency-len(s.running), 2*s.cfg.Concurrency-len(s.running)-int(s.finishing.Load()))
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
	start <-chan struct{}, rs *roundStart) ([]*jobs.Run, bool, error) {
	s.mu.Lock()
	free := s.freeLocked()
	draining := s.draining || s.fenced.Load()
	limits := s.limits // replaced, never changed, by setJobs
	s.mu.Unlock()
	if only != nil {
		sub := make(map[string]int, len(only))
		for _, name := range only {
			if limit, ok := limits[name]; ok {
				sub[name] = limit
			}
		}
		limits = sub
	}
	if free <= 0 || draining || len(limits) == 0 {
		return nil, false, nil
	}
	// Claim in batches: while attempts are finishing, wait until half of
	// the slots are free (every finished attempt wakes the loop, and
	// claiming the one slot it frees would make claims one run each under
	// load, each a transaction). Slots held by attempts that are still
	// running are not waited for: a due run must not wait for long
	// attempts to end.
	if free < max(1, s.cfg.Concurrency/2) && s.finishing.Load() > 0 {
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
// fired ahead (see roundsAheadLocked), with the tick as the claim's time
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
	rounds := s.roundsAheadLocked(now.UnixMicro(), now.Add(s.cfg.ClaimLead).UnixMicro())
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
				s.aheadLocked(name, round.at)
			}
		}
		if err != nil {
			// The later rounds are claimed at their tick too.
			for _, later := range rounds[i+1:] {
				for _, name := range later.jobs {
					s.aheadLocked(name, later.at)
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

// startAt returns a channel that is closed when the clock reaches t (at
// once if it has), or when the node's attempts are stopped for good. When
// it closes, rs becomes the round that is starting.
func (s *Scheduler) startAt(t time.Time, rs *roundStart) <-chan struct{} {
	start := make(chan struct{})
	open := func() {
		s.starting.Store(rs)
		close(start)
	}
	d := t.Sub(s.clock.Now())
	if d <= 0 {
		open()
		return start
	}
	tm := s.clock.NewTimer(d)
	go func() {
		select {
		case <-tm.C():
		case <-s.runCtx.Done():
			tm.Stop()
		}
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
// which waited 2-3 ms for them.
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

// withdraw takes back, in the store, the ticks of the named jobs fired
// ahead of now, and records their cursors.
func (s *Scheduler) withdraw(ctx context.Context, names []string, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	cs, n, err := s.st.ScheduleWithdraw(ctx, names, s.storeNow(now))
	if err != nil {
		return fmt.Errorf("withdraw ticks fired ahead: %w", err)
	}
	for name, c := range cs {
		s.setCursor(name, c)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "ticks fired ahead withdrawn", "runs", n)
	}
	return nil
}

// stopLocal stops an attempt running on this node, if there is one.
func (s *Scheduler) stopLocal(runID string, reason jobs.Reason) bool {
	s.mu.Lock()
	a := s.running[runID]
	s.mu.Unlock()
	if a == nil {
		return false
	}
	a.cancel(stopCause{reason})
	return true
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
