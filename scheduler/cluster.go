package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// heartbeatLoop refreshes the node's heartbeat; stops the local attempts
// whose runs a user asked to cancel from elsewhere; recovers the runs of
// nodes that went silent; and fences this node when its own heartbeat has
// not succeeded for inactive_threshold - heartbeat_interval.
func (s *Scheduler) heartbeatLoop(start time.Time) {
	defer s.life.loops.Done()
	ctx := s.life.loopCtx
	next, woke := start, start
	// connectedSince is when the current streak of successful heartbeats
	// began: the node judges others only by time it was itself connected.
	var connectedSince time.Time
	for {
		// Absolute deadlines: a late timer fires at once and never drifts.
		// From when the round began: a clock that moved during the round
		// (a test's) must not push the next one a round further.
		next = nextRound(next, woke, s.cfg.HeartbeatInterval)
		t := s.clock.TimerAt(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		woke = s.clock.Now()
		s.heartbeatRound(ctx, &connectedSince)
		s.testSignals.heartbeatDone()
	}
}

// heartbeatRound is one round of the heartbeat loop.
func (s *Scheduler) heartbeatRound(ctx context.Context, connectedSince *time.Time) {
	now := s.clock.Now()
	if s.lease.fenced.Load() {
		if err := s.rejoin(ctx, now); err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "rejoin: store still unreachable", "error", err)
			}
			return
		}
		*connectedSince = now
		return
	}
	if err := s.heartbeat(ctx, now); err != nil {
		if ctx.Err() != nil {
			return
		}
		s.noteStoreError(err)
		*connectedSince = time.Time{}
		if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) {
			// Another node judged this one dead and took its runs.
			s.fence(ctx, "the node's registration was taken over or pruned: "+err.Error())
			return
		}
		last := time.Unix(0, s.lease.lastHeartbeat.Load())
		s.log.ErrorContext(ctx, "heartbeat", "error", err, "last_success", last.UTC().Format(time.RFC3339))
		if !s.leaseHeld(now) {
			s.fence(ctx, fmt.Sprintf("no successful heartbeat for %s", now.Sub(last).Round(time.Millisecond)))
		}
		return
	}
	if connectedSince.IsZero() {
		*connectedSince = now
	}
	// A fire that replaces a running run requests its cancellation in the
	// store and then stops it as replaced: fireMu keeps this round from
	// seeing the request in between and stopping it as cancelled.
	s.fireMu.Lock()
	if ids, err := s.st.RunsCancelRequested(ctx, s.Incarnation()); err == nil {
		for _, id := range ids {
			s.stopLocal(id, jobs.ReasonCancelled)
		}
	}
	s.fireMu.Unlock()
	if now.Sub(*connectedSince) >= s.cfg.InactiveThreshold {
		s.recoverDead(ctx, now)
	}
}

// provenAlive reports whether the node may start an attempt now. Another
// node takes over the runs of a node silent for inactive_threshold, so a
// node stopped that long (SIGSTOP, a suspended machine) between a claim and
// its start, or while a claim made ahead of its tick waits for the tick,
// may find its run taken. While its last successful heartbeat is less than
// inactive_threshold - heartbeat_interval old (the age at which the
// heartbeat loop fences the node), no other node can have judged it dead.
// Past that, the node proves it is alive with a heartbeat before it starts
// anything; when the store refuses it (the registration was taken over or
// pruned) or does not answer, the node fences itself, as the heartbeat loop
// would, and the attempt ends fenced without starting.
func (s *Scheduler) provenAlive(ctx context.Context) bool {
	if s.lease.fenced.Load() {
		return false
	}
	if s.leaseHeld(s.clock.Now()) {
		return true
	}
	s.lease.aliveMu.Lock()
	defer s.lease.aliveMu.Unlock()
	now := s.clock.Now()
	switch {
	case s.lease.fenced.Load():
		return false
	case s.leaseHeld(now): // proven meanwhile by another attempt or the heartbeat loop
		return true
	}
	last := time.Unix(0, s.lease.lastHeartbeat.Load())
	err := s.heartbeat(ctx, now)
	if err == nil {
		s.log.InfoContext(ctx, "node proved it is alive before starting an attempt", "silent_for",
			now.Sub(last).Round(time.Millisecond).String())
		return true
	}
	if ctx.Err() != nil {
		return false // the attempt was stopped meanwhile, for its own reason
	}
	s.noteStoreError(err)
	s.fence(ctx, fmt.Sprintf("no successful heartbeat for %s before starting an attempt: %v",
		now.Sub(last).Round(time.Millisecond), err))
	return false
}

// heartbeat refreshes the node's heartbeat, made at now, and notes it as
// the last successful one.
func (s *Scheduler) heartbeat(ctx context.Context, now time.Time) error {
	hctx, cancel := context.WithTimeout(ctx, max(s.cfg.HeartbeatInterval, time.Second))
	defer cancel()
	hb := store.NodeHeartbeatParams{ID: s.cfg.NodeID, Incarnation: s.Incarnation(), Now: s.storeNow(now)}
	if err := s.st.NodeHeartbeat(hctx, hb); err != nil {
		return err
	}
	s.lease.lastHeartbeat.Store(now.UnixNano())
	return nil
}

// leaseHeld reports whether the last successful heartbeat is recent enough
// at now that no other node can have judged this one dead.
func (s *Scheduler) leaseHeld(now time.Time) bool {
	return now.Sub(time.Unix(0, s.lease.lastHeartbeat.Load())) < s.cfg.InactiveThreshold-s.cfg.HeartbeatInterval
}

// nodeIncarnation is the incarnation that the node id's row names now, or
// "" when there is no row.
func (s *Scheduler) nodeIncarnation(ctx context.Context, id string) (string, error) {
	nodes, err := s.st.NodesList(ctx, false)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if n.ID == id {
			return n.Incarnation, nil
		}
	}
	return "", nil
}

// fence stops claiming and stops every local attempt (reason fenced): a node
// that cannot prove it is alive must not act as if it owned its runs, which
// the other nodes are about to recover.
func (s *Scheduler) fence(ctx context.Context, why string) {
	if !s.lease.fenced.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	n := len(s.attempts.running)
	for _, a := range s.attempts.running {
		a.cancel(stopCause{jobs.ReasonFenced})
	}
	s.mu.Unlock()
	s.log.ErrorContext(ctx, "node fenced itself: claims stopped and running attempts stopped", "why", why,
		"stopped_attempts", n, "incarnation", s.Incarnation())
}

// rejoin registers the node as a new incarnation once the store answers,
// and resolves what the old incarnation left running.
func (s *Scheduler) rejoin(ctx context.Context, now time.Time) error {
	old := s.Incarnation()
	inc := uuid.NewString()
	s.inc.Store(&inc)
	p := store.NodeRegisterParams{
		ID: s.cfg.NodeID, Incarnation: inc, Host: hostname(), PID: os.Getpid(),
		Version: s.cfg.Version, Jobs: s.jobNames(), Replace: old, Now: s.storeNow(now),
	}
	prev, err := s.st.NodeRegister(ctx, p)
	if errors.Is(err, store.ErrLocked) && (prev == nil || prev.Incarnation == store.LostIncarnation(old)) {
		// The row was pruned by a recovering node (register afresh), or
		// marked lost by one that recovers the old incarnation's runs (take
		// it over: each of those runs is fenced by that incarnation).
		p.Replace = ""
		if prev != nil {
			p.Replace = prev.Incarnation
		}
		prev, err = s.st.NodeRegister(ctx, p)
	}
	if err != nil {
		s.inc.Store(&old)
		return err
	}
	_ = prev
	s.lease.lastHeartbeat.Store(now.UnixNano())
	if err := s.recoverOwn(ctx, now); err != nil {
		return err
	}
	s.lease.fenced.Store(false)
	s.lastStoreErr.Store(nil)
	s.log.InfoContext(ctx, "node rejoined as a new incarnation", "incarnation", inc, "previous_incarnation", old)
	s.Wake()
	return nil
}

// recoverDead moves the running attempts of nodes silent past
// inactive_threshold through the retry flow (reason node_lost, counting
// toward max_attempts), then prunes the node. Each write is fenced by the
// dead attempt, so when several nodes race, exactly one recovers each run.
// It wakes the scheduling loop when it judged a silent node (their runs
// may be due here now), and only then: an idle node's loop is not woken
// at every heartbeat round.
func (s *Scheduler) recoverDead(ctx context.Context, now time.Time) {
	nodes, err := s.st.NodesList(ctx, false)
	if err != nil {
		return
	}
	judged := false
	for _, n := range nodes {
		age := s.age(n)
		if n.ID == s.cfg.NodeID || age < s.cfg.InactiveThreshold {
			continue
		}
		judged = true
		// Mark the node lost first, by compare-and-set on the heartbeat it
		// was judged by: from then on its heartbeats are refused, so a node
		// that wakes up fences itself instead of starting what is being
		// taken from it, and a node that heartbeated since it was listed
		// keeps its runs. A row already marked (by a node that stopped part
		// way) is recovered as it is.
		lost := n.Incarnation
		if _, marked := store.LostFrom(n.Incarnation); !marked {
			mark := store.NodeMarkLostParams{ID: n.ID, Incarnation: n.Incarnation, HeartbeatAt: n.HeartbeatAt}
			if lost, err = s.st.NodeMarkLost(ctx, mark); err != nil {
				if !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNotFound) {
					return
				}
				continue
			}
		}
		runs, err := s.st.RunsRunning(ctx, n.ID)
		if err != nil {
			return
		}
		// Every running run of the node id is dead (the lost incarnation's,
		// or an older one's whose restart stopped part way) unless a new
		// process has taken the id over since the mark: read after the runs,
		// the row names it, and its runs are alive.
		live, err := s.nodeIncarnation(ctx, n.ID)
		if err != nil {
			return
		}
		if live != lost {
			runs = slices.DeleteFunc(runs, func(r *jobs.Run) bool { return r.Incarnation == live })
		}
		res := jobs.Result{Err: fmt.Errorf("node %s silent for %s", n.ID, age.Round(time.Second))}
		recovered, err := s.failAttempts(ctx, runs, res, jobs.ReasonNodeLost, now)
		if err != nil {
			// The node's row stays, marked lost, until every run is
			// resolved: the next round recovers what is left. (Deleted now,
			// it would leave those runs running with no node to judge.)
			s.log.WarnContext(ctx, "recovering the runs of a silent node", "lost_node", n.ID, "lost_incarnation", n.Incarnation,
				"recovered_runs", recovered, "error", err)
			continue
		}
		if err := s.st.NodeDelete(ctx, store.NodeDeleteParams{ID: n.ID, Incarnation: lost}); err == nil || recovered > 0 {
			s.log.WarnContext(ctx, "recovered the runs of a silent node", "lost_node", n.ID, "lost_incarnation", n.Incarnation,
				"silent_for", age.Round(time.Second).String(), "recovered_runs", recovered)
		}
	}
	if judged {
		s.Wake()
	}
}
