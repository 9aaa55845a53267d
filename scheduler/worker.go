package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/command"
	"github.com/schedulerd/schedulerd/store"
)

// attemptSet is this node's attempts whose result is not written yet, and
// whether the node still claims: what a claim counts its slots by.
type attemptSet struct {
	// running is the attempts running, by run id. Scheduler.mu guards it.
	running map[string]*attempt
	// writing is the runs whose attempt has ended here and whose result is
	// being written, or could not be (it stays then, until the next
	// attempt of the run here ends). Scheduler.mu guards it.
	writing map[string]bool
	// finishing counts the attempts that have ended (and left running)
	// and whose result is being written.
	finishing atomic.Int64
	// draining is set when Stop begins: nothing more is claimed.
	// Scheduler.mu guards it.
	draining bool
}

// free is how many attempts may start now, of concurrency. An attempt
// that ended holds no slot while its result is written, but at most
// concurrency results may wait for their write: a store that writes them
// slower than attempts end holds claims back. Scheduler.mu is held.
func (as *attemptSet) free(concurrency int) int {
	return min(concurrency-len(as.running), 2*concurrency-len(as.running)-int(as.finishing.Load()))
}

// unwritten is how many attempts have a result not written yet: those
// running and those that ended a moment ago. Scheduler.mu is held.
func (as *attemptSet) unwritten() int {
	return len(as.running) + int(as.finishing.Load())
}

// startAttempt runs a claimed run in its own goroutine. The attempt is
// registered before startAttempt returns, so the next claim sees the slot
// taken. The slot is free again when the attempt ends, before its result
// is written (the completer writes results in batches).
//
// A run claimed ahead of its tick waits for start to open with no
// goroutine of its own: the goroutine begins when start opens, or when the
// attempt is stopped before that (a cancel, shutdown, fencing), whichever
// comes first. A burst claimed ahead holds one function per run until its
// tick, not one stack each. The goroutine ends once the result is handed
// to the completer, which settles the attempt when the result is written.
func (s *Scheduler) startAttempt(r *jobs.Run, start *gate, rs *roundStart) {
	s.mu.Lock()
	var (
		d  *jobs.Definition
		as *attemptSeries
	)
	if j := s.declared.job(r.Job); j != nil {
		d, as = j.def, s.perJob.of(r.Job).attempted()
	}
	f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
	ctx, cancel := context.WithCancelCause(s.life.runCtx)
	limit := jobs.DefaultOutputLimit
	if d != nil {
		limit = d.OutputLimit
	}
	a := &attempt{run: r, fence: f, cancel: cancel, live: newLiveOutput(limit)}
	s.attempts.running[r.ID] = a
	s.life.workers.Add(1)
	s.mu.Unlock()
	if rs != nil {
		rs.waiting.Add(1)
	}

	run := func() {
		defer s.life.workers.Done()
		var res jobs.Result
		ok := ctx.Err() == nil
		if ok && !s.provenAlive(ctx) {
			cancel(stopCause{jobs.ReasonFenced})
			ok = false
		}
		if rs != nil {
			rs.attemptStarted(s)
		}
		switch {
		case !ok:
			res = stoppedBeforeStart(ctx)
		case d == nil: // removed by a reload between claim and start
			res = jobs.Result{Err: fmt.Errorf("job %q is no longer declared on this node", r.Job), StartFailed: true}
		default:
			s.count.attemptsStarted.Add(1)
			began := s.clock.Now()
			as.startLag.observe(max(began.Sub(r.NotBefore).Seconds(), 0))
			res = s.execute(ctx, cancel, r, d, a.live)
			as.duration.observe(max(s.clock.Now().Sub(began).Seconds(), 0))
		}
		cancel(nil)
		a.live.end()
		if res.Reason == "" && !res.Ok() {
			// A user may have asked to cancel just as the attempt failed by
			// itself: the request wins over a retry.
			if cur, err := s.st.RunGet(context.Background(), r.ID); err == nil && cur.CancelRequested {
				res.Reason = jobs.ReasonCancelled
			}
		}
		t := jobs.Finish(r, f, s.cfg.NodeID, res, s.clock.Now(), s.cfg.Rand)
		if d != nil {
			t.Notify = notifyOf(d)
		} else {
			t.Notify = s.notifyTargets(r.Job)
		}
		t.Chain = s.chainOf(r.Job)
		// The attempt no longer runs: its slot is free while its result
		// is written, so the next claim need not wait for that write.
		s.mu.Lock()
		delete(s.attempts.running, r.ID)
		s.attempts.writing[r.ID] = true
		if s.attempts.finishing.Add(1) == int64(s.cfg.Concurrency) {
			select {
			case s.results.backlog <- struct{}{}:
			default:
			}
		}
		s.mu.Unlock()
		if rs == nil || rs.started() {
			s.Wake() // else the round's last start wakes the loop
		}
		// The queue holds as many results as may wait: the send does
		// not block (see Start).
		s.results.queue <- &completion{run: r, t: t}
	}
	if start == nil {
		go run()
		return
	}
	var launched atomic.Bool
	launch := func() {
		if launched.CompareAndSwap(false, true) {
			go run()
		}
	}
	stop := context.AfterFunc(ctx, launch)
	start.wait(func() {
		stop()
		launch()
	})
}

// gate holds the attempts claimed ahead of a time until the clock reaches
// it (see Scheduler.startAt, openAt): each waits as a function, run when
// the gate opens.
type gate struct {
	mu      sync.Mutex
	opened  bool
	waiting []func()
}

// wait runs f when the gate opens: at once if it has.
func (g *gate) wait(f func()) {
	g.mu.Lock()
	if g.opened {
		g.mu.Unlock()
		f()
		return
	}
	g.waiting = append(g.waiting, f)
	g.mu.Unlock()
}

// open opens the gate: what waits runs, in the order it began to wait.
func (g *gate) open() {
	g.mu.Lock()
	g.opened = true
	waiting := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	for _, f := range waiting {
		f()
	}
}

// stoppedBeforeStart is the result of an attempt stopped before it
// started: it ends as an attempt stopped at once would, with the stop's
// reason, and no handler or process ran.
func stoppedBeforeStart(ctx context.Context) jobs.Result {
	if reason, ok := stopReason(ctx); ok {
		return jobs.Result{Err: fmt.Errorf("stopped before it started: %s", reason), Reason: reason}
	}
	return jobs.Result{Err: fmt.Errorf("stopped before it started: %w", context.Cause(ctx))}
}

// stopReason is the reason an attempt's context was stopped for, when the
// scheduler stopped it (a stopCause).
func stopReason(ctx context.Context) (jobs.Reason, bool) {
	cause := context.Cause(ctx)
	if cause == nil { // not stopped: no stopCause to allocate
		return "", false
	}
	var sc stopCause
	if errors.As(cause, &sc) {
		return sc.reason, true
	}
	return "", false
}

// resultQueue hands the results of attempts to the completers, which
// write them, and holds their writes back while the loop starts runs.
type resultQueue struct {
	// queue feeds the completers; done closes when they end.
	queue chan *completion
	done  chan struct{}
	// burst is set while the loop fires the ticks of a burst, more than
	// one transaction of them, and starts their runs: the channel closes
	// when it is done. The completer waits for it, so that the writes
	// that start due runs are not queued behind the results of attempts
	// that ended; backlog is signalled when Concurrency results wait, and
	// the completer then writes them anyway (they hold claims back).
	burst   atomic.Pointer[chan struct{}]
	backlog chan struct{}
	// starting is the last round claimed ahead whose tick has come (see
	// roundStart): the completer waits until its attempts have started.
	starting atomic.Pointer[roundStart]
}

// completion is the result of an attempt waiting to be written.
type completion struct {
	run *jobs.Run
	t   jobs.Transition
	// gaveUp is set when the result could not be written (see finish).
	gaveUp bool
}

// completionBatch bounds the results one transaction writes.
const completionBatch = 1000

// completers runs the completers: two when more results may wait than one
// batch holds (Concurrency above completionBatch) on a store that writes
// transactions side by side (store.ConcurrentWriter), so that the next
// batch is written while one is; one otherwise. A second completer on a
// store whose writes take turns would only wait for the first, and with
// fewer results waiting than a batch holds it would split batches that
// one completer writes whole: in the burn-down on PostgreSQL, two
// completers did fewer runs per second than one at concurrency 64, and
// more at concurrency 2,000. (Batches lock their runs in the order of the
// ids, so two never deadlock, and an attempt's result is in one batch
// only.) s.results.done closes when they have all ended.
func (s *Scheduler) completers() {
	defer close(s.results.done)
	n := 1
	if _, ok := s.st.(store.ConcurrentWriter); ok && s.cfg.Concurrency > completionBatch {
		n = 2
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(s.completer)
	}
	wg.Wait()
}

// completer writes the results of attempts: whatever has accumulated while
// the previous write ran goes in one transaction, so under load results
// are written in batches and when idle each is written at once. It ends
// when s.results.queue is closed (after the workers are done).
func (s *Scheduler) completer() {
	batch := make([]*completion, 0, completionBatch)
	for first := range s.results.queue {
		s.awaitBurst()
		batch = append(batch[:0], first)
	drain:
		for len(batch) < completionBatch {
			select {
			case c, ok := <-s.results.queue:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		s.writeCompletions(batch)
		s.settle(batch)
	}
}

// settle ends the attempts whose results the batch wrote (or gave up on):
// each run leaves writing, unless its result could not be written (it
// stays then, until the next attempt of the run here ends), and frees its
// place among the results that wait; the loop wakes, as a claim may now
// take more.
func (s *Scheduler) settle(batch []*completion) {
	s.mu.Lock()
	for _, c := range batch {
		if !c.gaveUp {
			delete(s.attempts.writing, c.run.ID)
		}
	}
	s.mu.Unlock()
	for range batch {
		s.attempts.finishing.Add(-1)
		seq := s.testSignals.iterSeq.Load()
		s.Wake()
		s.testSignals.attemptEnded(seq)
	}
}

// awaitBurst waits, while the attempts of a round claimed ahead start
// (see roundStart) and while the loop fires a burst of ticks, until that
// is done or Concurrency results wait to be written. A burst of thousands
// of ticks takes a while to fire, and its runs start that much sooner
// when the results of the runs it started do not take turns with its
// writes; those results are written a moment later. Results that hold claims back
// (Concurrency of them: see claim) are written at once.
func (s *Scheduler) awaitBurst() {
	if rs := s.results.starting.Load(); rs != nil {
		select {
		case <-rs.done:
		case <-s.results.backlog:
		}
	}
	done := s.results.burst.Load()
	if done == nil || s.attempts.finishing.Load() >= int64(s.cfg.Concurrency) {
		return
	}
	select {
	case <-*done:
	case <-s.results.backlog:
	}
}

// writeCompletions writes a batch of results in one transaction; if the
// batch as a whole fails, each is written on its own with retries.
func (s *Scheduler) writeCompletions(batch []*completion) {
	ctx := context.Background()
	ts := make([]jobs.Transition, len(batch))
	for i, c := range batch {
		ts[i] = c.t
		ts[i].Time = s.storeNow(ts[i].Time)
	}
	results, err := s.st.RunTransitionMany(ctx, ts)
	if err == nil && slices.ContainsFunc(ts, func(t jobs.Transition) bool { return len(t.Notify) > 0 }) {
		s.notifyWake()
	}
	if err == nil {
		s.chainWake(ts...)
	}
	if err != nil {
		s.noteStoreError(err)
		s.log.Warn("record attempt results: the batch failed; writing them one by one", "count", len(batch), "error", err)
		for _, c := range batch {
			c.gaveUp = !s.finish(c.run, c.t)
		}
		return
	}
	ended := make([]*jobs.Run, 0, len(results))
	for i, res := range results {
		c := batch[i]
		switch {
		case res.Err == nil:
			s.count.noteResult(res.Run.Status)
			ended = append(ended, res.Run)
			s.logRun(ctx, res.Run, c.run.Status, "")
		case errors.Is(res.Err, store.ErrFenced):
			s.staleWrite(ctx, c.run, c.t)
		default:
			s.log.Error("record attempt result", "job", c.run.Job, "run", c.run.ID, "attempt", c.run.Attempt, "error", res.Err)
		}
	}
	s.noteRunsEnded(ended...)
}

// staleWrite notes the result t of r's attempt that the store refused:
// the attempt had been taken from this node.
func (s *Scheduler) staleWrite(ctx context.Context, r *jobs.Run, t jobs.Transition) {
	s.count.staleWrites.Add(1)
	s.log.WarnContext(ctx, "stale attempt write rejected", "job", r.Job, "run", r.ID, "attempt", r.Attempt,
		"to", t.To, "reason", t.Reason, "error", t.Error)
}

// finish writes the result of an attempt. A store error is retried for a
// while: the result is the one thing a worker must not drop. A fenced write
// is final: the attempt was taken from this node. It reports false when it
// gave up.
func (s *Scheduler) finish(r *jobs.Run, t jobs.Transition) bool {
	ctx := context.Background()
	delay := 100 * time.Millisecond
	deadline := s.clock.Now().Add(2 * time.Minute)
	for {
		nr, err := s.transition(ctx, r, t)
		if err == nil || errors.Is(err, store.ErrFenced) || errors.Is(err, jobs.ErrInvalidTransition) || errors.Is(err, store.ErrNotFound) {
			switch {
			case err == nil:
				s.count.noteResult(t.To)
				s.noteRunsEnded(nr)
			case errors.Is(err, store.ErrFenced):
				s.staleWrite(ctx, r, t)
			case err != nil:
				s.log.Error("record attempt result", "job", r.Job, "run", r.ID, "attempt", r.Attempt, "error", err)
			}
			return true
		}
		s.noteStoreError(err)
		if s.clock.Now().After(deadline) {
			s.log.Error("record attempt result: giving up; the attempt is resolved when the node restarts",
				"job", r.Job, "run", r.ID, "attempt", r.Attempt, "error", err)
			return false
		}
		s.log.Warn("record attempt result: retrying", "job", r.Job, "run", r.ID, "error", err)
		tm := s.clock.NewTimer(delay)
		<-tm.C()
		delay = min(delay*2, 5*time.Second)
	}
}

// execute runs one attempt of r and returns its result. cancel stops the
// attempt's ctx: the timeout calls it with its reason, from a timer of the
// clock rather than a goroutine that waits for one.
func (s *Scheduler) execute(ctx context.Context, cancel context.CancelCauseFunc, r *jobs.Run, d *jobs.Definition, live *LiveOutput) jobs.Result {
	if d.Timeout > 0 {
		stop := s.clock.AfterFunc(d.Timeout, func() { cancel(stopCause{jobs.ReasonTimeout}) })
		defer stop()
	}
	info := jobs.Info{
		RunID: r.ID, Job: r.Job, Attempt: r.Attempt, ScheduledAt: r.ScheduledAt,
		Trigger: r.Trigger, Payload: r.Payload, Node: s.cfg.NodeID, ParentRunID: r.ParentRunID,
	}
	var res jobs.Result
	if d.Handler != nil {
		res = runHandler(jobs.WithInfo(ctx, info), d.Handler)
	} else {
		res = s.runCommand(ctx, d, info, live)
	}
	if reason, ok := stopReason(ctx); ok {
		res.Reason = reason
		if res.Err == nil && (res.ExitCode == nil || *res.ExitCode != 0) {
			res.Err = fmt.Errorf("stopped: %s", reason)
		}
		if reason == jobs.ReasonTimeout {
			res.Err = fmt.Errorf("timed out after %s", d.Timeout)
		}
	}
	return res
}

func runHandler(ctx context.Context, h jobs.Handler) (res jobs.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = jobs.Result{Err: fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())}
		}
	}()
	return jobs.Result{Err: h(ctx)}
}

func (s *Scheduler) runCommand(ctx context.Context, d *jobs.Definition, info jobs.Info, live *LiveOutput) jobs.Result {
	env := make(map[string]string, len(d.Env)+8)
	for k, v := range d.Env {
		env[k] = v
	}
	env["SCHEDULERD_JOB"] = info.Job
	env["SCHEDULERD_RUN_ID"] = info.RunID
	env["SCHEDULERD_ATTEMPT"] = strconv.Itoa(info.Attempt)
	env["SCHEDULERD_ATTEMPT_TOKEN"] = s.AttemptToken(info.RunID, info.Attempt)
	env["SCHEDULERD_SCHEDULED_AT"] = info.ScheduledAt.UTC().Format(time.RFC3339)
	env["SCHEDULERD_NODE"] = info.Node
	env["SCHEDULERD_TRIGGER"] = string(info.Trigger)
	if s.cfg.SocketPath != "" {
		env["SCHEDULERD_SOCKET"] = s.cfg.SocketPath
	}
	if info.Payload != "" {
		env["SCHEDULERD_PAYLOAD"] = info.Payload
	}
	if info.ParentRunID != "" {
		env["SCHEDULERD_PARENT_RUN_ID"] = info.ParentRunID
	}
	cr := command.Run(ctx, command.Spec{
		Argv: d.Command, Shell: d.Shell, Dir: d.Workdir, User: d.User, Env: env,
		KillGrace: d.KillGrace, OutputLimit: d.OutputLimit, Live: live.write,
	})
	res := jobs.Result{
		Output: cr.Output.String(), OutputBytes: cr.Output.Total, Truncated: cr.Output.Truncated,
	}
	switch {
	case cr.StartErr != nil:
		res.Err, res.StartFailed = cr.StartErr, true
	case cr.Signal != "":
		res.Err = fmt.Errorf("killed by signal: %s", cr.Signal)
	default:
		code := cr.ExitCode
		res.ExitCode = &code
		if code != 0 {
			res.Err = fmt.Errorf("exit status %d", code)
		}
	}
	if cr.Killed {
		res.Err = fmt.Errorf("%w (SIGKILL after kill_grace %s)", res.Err, d.KillGrace)
	}
	return res
}

// stopLocal stops an attempt running on this node, if there is one.
func (s *Scheduler) stopLocal(runID string, reason jobs.Reason) bool {
	s.mu.Lock()
	a := s.attempts.running[runID]
	s.mu.Unlock()
	if a == nil {
		return false
	}
	a.cancel(stopCause{reason})
	return true
}
