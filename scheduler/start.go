package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// processExists reports whether a process with this pid exists and runs the
// same program as this one (a pid reused by an unrelated program does not
// count).
func processExists(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	self, err1 := os.Readlink("/proc/self/exe")
	other, err2 := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err1 != nil || err2 != nil {
		return true // cannot tell: assume it is ours
	}
	return strings.TrimSuffix(other, " (deleted)") == strings.TrimSuffix(self, " (deleted)")
}

// Start registers the node, resolves the attempts that this node's previous
// process left running, makes the runs of one-off jobs, and starts the loops.
// It returns after that synchronous setup.
func (s *Scheduler) Start(ctx context.Context) error {
	if !s.life.started.CompareAndSwap(false, true) {
		return errors.New("scheduler already started")
	}
	now := s.clock.Now()
	prev, err := s.register(ctx, now)
	if err != nil {
		return err
	}
	s.lease.lastHeartbeat.Store(now.UnixNano())
	if prev != nil {
		s.log.InfoContext(ctx, "node took over from its previous process",
			"previous_incarnation", prev.Incarnation, "previous_pid", prev.PID, "incarnation", s.Incarnation())
	}
	if err := s.recoverOwn(ctx, now); err != nil {
		return err
	}
	// What the feed brought so far is in the results syncJobs reads.
	s.st.ResultFeed().Take()
	if err := s.syncJobs(ctx, now); err != nil {
		return err
	}

	s.life.loopCtx, s.life.stopLoop = context.WithCancelCause(context.WithoutCancel(ctx))
	s.life.runCtx, s.life.stopRuns = context.WithCancelCause(context.WithoutCancel(ctx))
	s.loop.last.Store(now.UnixNano())
	// At most 2*Concurrency results wait (attemptSet.free): an attempt
	// hands its result over without waiting, and its goroutine ends.
	s.results.queue = make(chan *completion, 2*s.cfg.Concurrency)
	s.results.done = make(chan struct{})
	go s.completers()
	s.life.loops.Add(4)
	// The loops count their deadlines from now, read here and not in the
	// goroutines, so their schedule does not depend on when they first run.
	go s.tickLoop()
	go s.heartbeatLoop(now)
	go s.pruneLoop(now)
	go s.resultsLoop()
	s.life.live.Store(true)
	s.log.InfoContext(ctx, "scheduler started", "incarnation", s.Incarnation(), "jobs", len(s.declared.all), "concurrency", s.cfg.Concurrency)
	return nil
}

func (s *Scheduler) jobNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, len(s.declared.all))
	for i, j := range s.declared.all {
		names[i] = j.def.Name
	}
	return names
}

// register records this incarnation of the node. When the id has a row, the
// node takes it over at once if the incarnation there is gone: the store is
// held exclusively, or it ran on this host and its process no longer exists,
// or it has been silent for inactive_threshold. A live incarnation elsewhere
// makes the start fail: two processes must never share a node id.
func (s *Scheduler) register(ctx context.Context, now time.Time) (*store.Node, error) {
	p := store.NodeRegisterParams{
		ID: s.cfg.NodeID, Incarnation: s.Incarnation(), Host: hostname(), PID: os.Getpid(),
		Version: s.cfg.Version, Jobs: s.jobNames(), Now: s.storeNow(now),
	}
	prev, err := s.st.NodeRegister(ctx, p)
	if err == nil || !errors.Is(err, store.ErrLocked) || prev == nil {
		if err != nil {
			return nil, fmt.Errorf("register node: %w", err)
		}
		return prev, nil
	}
	if why, alive := s.alive(prev); alive {
		return nil, fmt.Errorf("%w: node id %q belongs to a live process (host %s, pid %d, %s); give each node its own node_id",
			store.ErrLocked, s.cfg.NodeID, prev.Host, prev.PID, why)
	}
	p.Replace = prev.Incarnation
	if prev, err = s.st.NodeRegister(ctx, p); err != nil {
		return nil, fmt.Errorf("register node: %w", err)
	}
	return prev, nil
}

// alive judges whether the incarnation in a node row may still be running.
func (s *Scheduler) alive(n *store.Node) (string, bool) {
	switch {
	case s.cfg.ExclusiveStore:
		return "", false
	case n.Host == hostname():
		if processExists(n.PID) && n.PID != os.Getpid() {
			return "its process still runs on this host", true
		}
		return "", false
	case s.age(n) < s.cfg.InactiveThreshold:
		return fmt.Sprintf("last heartbeat %s ago, under inactive_threshold %s", s.age(n).Round(time.Second), s.cfg.InactiveThreshold), true
	}
	return "", false
}

// Stop stops claiming and firing, lets running attempts finish for
// shutdown_grace, then stops them (reason shutdown, through the retry flow)
// and waits until their results are written. It is idempotent.
func (s *Scheduler) Stop(ctx context.Context) {
	if !s.life.live.Load() {
		return
	}
	s.life.stopOnce.Do(func() {
		s.mu.Lock()
		s.attempts.draining = true
		n := len(s.attempts.running)
		s.mu.Unlock()
		s.life.stopLoop(ErrStopped)
		s.life.loops.Wait()
		s.withdrawAhead(ctx)
		if n > 0 {
			s.log.InfoContext(ctx, "waiting for running attempts", "running", n, "shutdown_grace", s.cfg.ShutdownGrace)
		}
		done := make(chan struct{})
		go func() { s.life.workers.Wait(); close(done) }()
		t := s.clock.NewTimer(s.cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C():
			s.life.stopRuns(stopCause{jobs.ReasonShutdown})
			<-done
		case <-ctx.Done():
			s.life.stopRuns(stopCause{jobs.ReasonShutdown})
			<-done
		}
		s.life.stopRuns(ErrStopped)
		close(s.results.queue) // every worker is done: no more results
		<-s.results.done
		s.log.InfoContext(ctx, "scheduler stopped")
	})
}

// withdrawAhead takes back, when the node stops, the ticks fired ahead
// whose time has not come: they were not reached while the node ran, so
// when it starts again they follow catchup like any tick missed meanwhile,
// and another node that runs on fires them at their time (it reads the
// cursor again then). Should the store not answer, they stay, as they do
// when the process is killed: each then runs once, late.
func (s *Scheduler) withdrawAhead(ctx context.Context) {
	names := s.aheadJobs()
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.withdraw(ctx, names, s.clock.Now()); err != nil {
		s.log.ErrorContext(ctx, "withdraw the ticks fired ahead at stop", "error", err)
	}
}

// aheadJobs returns the jobs whose cursor was later than the clock when it
// was read or written (a tick fired ahead) and whose tick the loop has not
// reached yet.
func (s *Scheduler) aheadJobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ahead.jobs()
}
