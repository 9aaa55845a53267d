package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Errors the API returns for callers to branch on.
var (
	ErrUnknownJob = errors.New("unknown job")
	ErrStopped    = errors.New("scheduler is stopped")
)

// Scheduler is the engine of one node.
type Scheduler struct {
	cfg   Config
	st    store.Store
	log   *slog.Logger
	clock Clock
	// inc is the current incarnation: new at every start, and again when
	// the node rejoins after fencing itself.
	inc atomic.Pointer[string]
	// tokenKey signs attempt tokens (AttemptToken); new at every process
	// start and never stored.
	tokenKey [32]byte
	lease    lease

	// fireMu is held while ticks are fired and while the heartbeat stops
	// the runs whose cancellation was requested (cluster.go).
	fireMu sync.Mutex
	// mu guards the declared jobs, the queue of their next ticks, the
	// ticks fired ahead, the attempts running and the per-job series.
	mu       sync.Mutex
	declared jobSet
	ticks    tickQueue
	ahead    aheadTicks
	attempts attemptSet
	perJob   *jobMetrics
	// retired are the expectations of jobs this node does not declare
	// (expect.go), and notifiers the notifiers they name, by name.
	retired   retiredSet
	notifiers map[string]jobs.NotifyTarget
	// overdueAsked is, by declared job, when this node last asked the
	// store to make it overdue (checkOverdue), so that a job the store
	// does not hold overdue (a success this node has not heard of yet) is
	// asked again a minute later. setJobs empties it with the states.
	overdueAsked map[*jobState]int64
	// overdueChanged says that something the dead man's switch reads
	// other than the clock (the declared or retired jobs, their windows,
	// successes, overdue states or the times they were expected since)
	// may have changed since its last pass over the jobs: until then, and
	// until the next time a job may become due, it need not look again.
	overdueChanged bool

	loop    loopState
	wake    chan struct{}
	results resultQueue
	life    lifecycle

	// lastStoreErr is the last store error, cleared when a loop iteration
	// or a rejoin has none.
	lastStoreErr atomic.Pointer[string]
	count        counters // for Metrics

	testSignals testSignals

	// OnLoop, if set before Start, is called after each loop iteration from the
	// loop goroutine (the daemon sends the systemd watchdog ping from it).
	OnLoop func()
	// OnNotify, if set before Start, is called when notifications may have
	// been written: by this node's transitions that carry notifiers, or,
	// on a store that sends wakeups, by any node. It must not block (the
	// daemon wakes its notify.Deliverer).
	OnNotify func()
}

// testSignals are what tests wait on to know that the loops did their
// work, instead of sleeping. Only tests set them, before Start; the
// engine counts and signals, and does nothing else with them.
type testSignals struct {
	// iterSeq counts the scheduling loop's iterations started; iterDone,
	// when set, is called with the number of each finished iteration.
	iterSeq  atomic.Int64
	iterDone func(seq int64)
	// hbDone, when set, is called after each heartbeat round with the
	// number of the round, counted in hbSeq.
	hbSeq  atomic.Int64
	hbDone func(seq int64)
	// attemptDone, when set, receives for each finished attempt the
	// iteration count read just before the attempt woke the loop (so an
	// iteration after it follows).
	attemptDone chan int64
	// resultsDone, when set, is called each time the results loop has
	// recorded what the store's feed brought (and read again what it
	// missed).
	resultsDone func()
	// overduePasses counts the dead man's switch's passes over the jobs.
	overduePasses atomic.Int64
}

// iterationDone signals that iteration seq of the loop has finished.
func (ts *testSignals) iterationDone(seq int64) {
	if ts.iterDone != nil {
		ts.iterDone(seq)
	}
}

// resultsApplied signals that the results loop recorded a batch.
func (ts *testSignals) resultsApplied() {
	if ts.resultsDone != nil {
		ts.resultsDone()
	}
}

// heartbeatDone signals that a heartbeat round has finished.
func (ts *testSignals) heartbeatDone() {
	if ts.hbDone != nil {
		ts.hbDone(ts.hbSeq.Add(1))
	}
}

// attemptEnded signals that an attempt has ended and its result is
// written; seq is the loop's iteration count read before it woke the loop.
func (ts *testSignals) attemptEnded(seq int64) {
	if ts.attemptDone != nil {
		ts.attemptDone <- seq
	}
}

// lease is the node's standing in the cluster as this process sees it:
// whether its last heartbeat is recent enough that no other node can have
// judged it dead (Scheduler.leaseHeld), and whether it has fenced itself.
type lease struct {
	lastHeartbeat atomic.Int64 // unix nanos of the last successful heartbeat
	// aliveMu makes one heartbeat serve all the attempts that must prove
	// the node alive before they start (Scheduler.provenAlive).
	aliveMu sync.Mutex
	// fenced is set while the node has fenced itself: it claims nothing.
	fenced atomic.Bool
}

// loopState is what the scheduling loop keeps from one iteration to the
// next.
type loopState struct {
	last atomic.Int64 // unix nanos of the last iteration, for Health
	// pausedReadAt is when the loop last re-read paused cursors, expiredAt
	// when it last expired runs (the loop's alone).
	pausedReadAt time.Time
	expiredAt    time.Time
	// overdueAt is when the loop last checked for overdue jobs, and
	// overdueNext the next time a job may become overdue (zero: none).
	overdueAt, overdueNext time.Time
	// retiredReadAt is when the loop last read the expectations of the
	// retired jobs.
	retiredReadAt time.Time
	// claimFailed is set when a claim fails: it may have committed (see
	// adoptLostClaims).
	claimFailed atomic.Bool
	// backfills are the unfinished backfills of the declared jobs as the
	// loop last read them, at backfillsReadAt (the loop's alone);
	// backfillsNew asks it to read them again at once.
	backfills       []*store.Backfill
	backfillsReadAt time.Time
	backfillsNew    atomic.Bool
}

// lifecycle is the engine's start and stop (Start, Stop): the contexts
// that stop its loops and its attempts, and the groups that wait for them.
type lifecycle struct {
	started  atomic.Bool // Start was called
	live     atomic.Bool // Start succeeded: there are loops to stop
	stopOnce sync.Once
	// loopCtx is the loops' context, cancelled when Stop begins; loops
	// counts the loops.
	loopCtx  context.Context
	stopLoop context.CancelCauseFunc
	loops    sync.WaitGroup
	// runCtx is the parent of every attempt, cancelled at the end of
	// shutdown grace; workers counts the attempts' goroutines.
	runCtx   context.Context
	stopRuns context.CancelCauseFunc
	workers  sync.WaitGroup
}

// attempt is an attempt running on this node.
type attempt struct {
	run    *jobs.Run
	fence  jobs.Fence
	cancel context.CancelCauseFunc
	live   *LiveOutput // its output as it is written
}

// stopCause carries the reason an attempt was stopped.
type stopCause struct{ reason jobs.Reason }

func (c stopCause) Error() string { return "attempt stopped: " + string(c.reason) }

// New returns a scheduler over st with the given jobs. It validates the jobs
// and does nothing else until Start.
func New(st store.Store, cfg Config, defs []*jobs.Definition) (*Scheduler, error) {
	cfg = cfg.withDefaults()
	s := &Scheduler{
		cfg:          cfg,
		st:           st,
		log:          cfg.Logger.With("component", "scheduler", "node", cfg.NodeID),
		clock:        cfg.Clock,
		attempts:     attemptSet{running: map[string]*attempt{}, writing: map[string]bool{}},
		perJob:       newJobMetrics(),
		ahead:        newAheadTicks(),
		ticks:        newTickQueue(cfg.FireLead),
		overdueAsked: map[*jobState]int64{},
		wake:         make(chan struct{}, 1),
		results:      resultQueue{backlog: make(chan struct{}, 1)},
	}
	inc := uuid.NewString()
	s.inc.Store(&inc)
	if err := newTokenKey(&s.tokenKey); err != nil {
		return nil, err
	}
	if err := s.setJobs(defs); err != nil {
		return nil, err
	}
	s.SetNotifiers(cfg.Notifiers)
	return s, nil
}

// Incarnation is this process's incarnation id.
func (s *Scheduler) Incarnation() string { return *s.inc.Load() }

// NodeID is the node's id.
func (s *Scheduler) NodeID() string { return s.cfg.NodeID }

// Jobs returns the declared jobs in declaration order.
func (s *Scheduler) Jobs() []*jobs.Definition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*jobs.Definition, 0, len(s.declared.all))
	for _, j := range s.declared.all {
		out = append(out, j.def)
	}
	return out
}

// notifyWake tells OnNotify that notifications may have been written.
func (s *Scheduler) notifyWake() {
	if s.OnNotify != nil {
		s.OnNotify()
	}
}

// notifyTargets returns the notifiers of the declared job named job; nil
// when it is not declared (a reload removed it), or has none.
func (s *Scheduler) notifyTargets(job string) []jobs.NotifyTarget {
	if d, ok := s.Job(job); ok {
		return notifyOf(d)
	}
	return nil
}

// notifyOf returns what a transition of a run of d carries: its
// notifiers, and for a job with expect_success_within and none, an empty
// list, so that its success still ends its overdue state in the store.
func notifyOf(d *jobs.Definition) []jobs.NotifyTarget {
	if d.Notify == nil && d.ExpectSuccessWithin > 0 {
		return []jobs.NotifyTarget{}
	}
	return d.Notify
}

// chainOf returns the chain of the declared job named job, as a
// transition of its runs carries it (jobs.Transition.Chain): each job it
// names with what a trigger of that job gets (its retry policy, its
// no-retry exit codes, its window). Nil when job is not declared or names
// none; a named job that a reload removed is left out.
func (s *Scheduler) chainOf(job string) *jobs.Chain {
	d, ok := s.Job(job)
	if !ok || len(d.OnSuccess)+len(d.OnFailure) == 0 {
		return nil
	}
	runs := func(names []string) []jobs.ChainRun {
		var out []jobs.ChainRun
		for _, name := range names {
			if c, ok := s.Job(name); ok {
				out = append(out, jobs.ChainRun{Job: c.Name, Retry: c.Retry, NoRetryExitCodes: c.NoRetryExitCodes,
					NotBefore: c.NotBefore, NotAfter: c.NotAfter})
			}
		}
		return out
	}
	return &jobs.Chain{OnSuccess: runs(d.OnSuccess), OnFailure: runs(d.OnFailure)}
}

// chainWake wakes the loop after transitions that may have made runs of a
// chain, which may be due at once.
func (s *Scheduler) chainWake(ts ...jobs.Transition) {
	if slices.ContainsFunc(ts, func(t jobs.Transition) bool { return !t.Chain.Empty() }) {
		s.Wake()
	}
}

// Job returns one declared job.
func (s *Scheduler) Job(name string) (*jobs.Definition, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.declared.job(name); j != nil {
		return j.def, true
	}
	return nil, false
}

// Wake makes the loop look for work now.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Running returns the number of attempts of this node whose result is not
// written yet: those running and those that ended a moment ago.
func (s *Scheduler) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts.unwritten()
}

// storeNow is the Now to pass to the store: zero when the store's clock rules.
func (s *Scheduler) storeNow(now time.Time) time.Time {
	if s.cfg.StoreClock {
		return time.Time{}
	}
	return now
}

// age is how long ago a node heartbeated, by the clock that rules.
func (s *Scheduler) age(n *store.Node) time.Duration {
	if s.cfg.StoreClock {
		return n.Age
	}
	return s.clock.Now().Sub(n.HeartbeatAt)
}

// transition applies t to run r and logs the change.
func (s *Scheduler) transition(ctx context.Context, r *jobs.Run, t jobs.Transition) (*jobs.Run, error) {
	t.Time = s.storeNow(t.Time)
	if t.Notify == nil {
		t.Notify = s.notifyTargets(r.Job)
	}
	if t.Chain == nil {
		t.Chain = s.chainOf(r.Job)
	}
	nr, err := s.st.RunTransition(ctx, t)
	if err == nil && len(t.Notify) > 0 {
		s.notifyWake()
	}
	if err == nil {
		s.chainWake(t)
	}
	if err != nil {
		if errors.Is(err, store.ErrFenced) {
			s.logFenced(ctx, r, t)
		}
		return nil, err
	}
	s.logRun(ctx, nr, r.Status, "")
	return nr, nil
}

// logFenced logs the transition t of r that the store refused because r's
// attempt is no longer the one t was fenced by.
func (s *Scheduler) logFenced(ctx context.Context, r *jobs.Run, t jobs.Transition) {
	s.log.WarnContext(ctx, "stale attempt write rejected", "job", r.Job, "run", r.ID, "attempt", r.Attempt, "to", t.To, "reason", t.Reason)
}

func (s *Scheduler) logRun(ctx context.Context, r *jobs.Run, from jobs.Status, msg string, extra ...any) {
	level := slog.LevelInfo
	if r.Status == jobs.StatusDeadLetter || r.Status == jobs.StatusRetrying {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := append([]any{"job", r.Job, "run", r.ID, "attempt", r.Attempt, "status", r.Status, "reason", r.Reason}, extra...)
	if from != "" {
		attrs = append(attrs, "from", from)
	}
	if r.Status == jobs.StatusRetrying {
		attrs = append(attrs, "next_attempt_at", r.NotBefore.UTC().Format(time.RFC3339))
	}
	if r.Error != "" {
		attrs = append(attrs, "error", r.Error)
	}
	if r.ExitCode != nil {
		attrs = append(attrs, "exit_code", *r.ExitCode)
	}
	if msg == "" {
		msg = "run " + string(r.Status)
	}
	s.log.Log(ctx, level, msg, attrs...)
}
