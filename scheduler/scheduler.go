package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Config holds the engine's settings; it mirrors the [daemon] section.
type Config struct {
	NodeID            string
	Concurrency       int           // runs at once on this node; default 4
	HeartbeatInterval time.Duration // default 30s
	InactiveThreshold time.Duration // default 2m
	// ShutdownGrace is how long running attempts may finish after Stop
	// before they are stopped: default 30s; NoShutdownGrace (negative)
	// stops them at once.
	ShutdownGrace time.Duration
	History       time.Duration // default 720h
	// PollInterval is the longest the loop sleeps when it expects nothing:
	// it then looks for work that other writers made. Default 10s.
	PollInterval time.Duration
	// PruneInterval is how often finished runs are pruned. Default 1h.
	PruneInterval time.Duration
	// FireLead is how long before its tick a tick is fired: its run is
	// written then, pending until the tick (or until ClaimLead before it),
	// so that at the tick at most the claim is left to do. Default 250ms;
	// a round of more than 500 jobs at one tick begins earlier (see
	// tickQueue.roundLead); negative: ticks fire at their time.
	FireLead time.Duration
	// ClaimLead is how long before its tick the run of a tick fired ahead
	// is claimed: its attempt is this node's from then on, started_at the
	// tick, and its handler or process starts at the tick, with nothing
	// left to write. Default 50ms, at most FireLead; negative: the runs
	// are claimed at their tick.
	ClaimLead time.Duration
	Version   string
	// SocketPath is passed to command jobs as SCHEDULERD_SOCKET.
	SocketPath string
	// StoreClock makes the store's clock authoritative: store calls get a
	// zero Now, so leases, windows and liveness are judged by the database
	// clock (PostgreSQL, several nodes). Without it the engine's Clock is
	// passed down (one node, and tests with a schedulertest.FakeClock).
	StoreClock bool
	// ExclusiveStore says that this process holds the store alone (the
	// SQLite lock): any earlier incarnation of the node is then gone, and
	// the node takes over its id without judging its liveness.
	ExclusiveStore bool
	// Notifiers are the notifiers of the config ([[notifier]]), by which
	// the notifier names of the expectations of jobs this node does not
	// declare are resolved (see Retired); SetNotifiers replaces them.
	Notifiers []jobs.NotifyTarget
	Clock     Clock
	Logger    *slog.Logger
	// Rand returns floats in [0, 1) for backoff jitter.
	Rand func() float64
}

func (c Config) withDefaults() Config {
	c.NodeID = cmp.Or(c.NodeID, hostname())
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, 30*time.Second)
	c.InactiveThreshold = cmp.Or(c.InactiveThreshold, 2*time.Minute)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, 30*time.Second)
	if c.ShutdownGrace < 0 {
		c.ShutdownGrace = 0
	}
	c.History = cmp.Or(c.History, 720*time.Hour)
	c.PollInterval = cmp.Or(c.PollInterval, 10*time.Second)
	c.PruneInterval = cmp.Or(c.PruneInterval, time.Hour)
	c.FireLead = max(cmp.Or(c.FireLead, defaultFireLead), 0)
	c.ClaimLead = min(max(cmp.Or(c.ClaimLead, defaultClaimLead), 0), c.FireLead)
	c.Version = cmp.Or(c.Version, "dev")
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

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

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// NoShutdownGrace as Config.ShutdownGrace stops running attempts as soon
// as Stop is called (shutdown_grace = "0s"); a zero ShutdownGrace is the
// default's.
const NoShutdownGrace time.Duration = -1

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

// setJobs validates defs and makes them the declared jobs.
func (s *Scheduler) setJobs(defs []*jobs.Definition) error {
	set, err := newJobSet(defs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	// The cursors stay as they were read until syncJobs reads them again;
	// so do the results.
	for _, j := range set.all {
		old := s.declared.job(j.def.Name)
		if old == nil {
			continue
		}
		j.succeeded, j.failed = old.succeeded, old.failed
		j.expectSince, j.overdue = old.expectSince, old.overdue
		if j.def.Schedule != nil && old.hasCursor {
			j.hasCursor, j.paused = true, old.paused
			j.setLast(old.last)
		}
	}
	s.declared = set
	s.ticks.forget()
	clear(s.overdueAsked)
	s.ticks.requeue(s.declared.cron)
	s.mu.Unlock()
	return nil
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

// Job returns one declared job.
func (s *Scheduler) Job(name string) (*jobs.Definition, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.declared.job(name); j != nil {
		return j.def, true
	}
	return nil, false
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
	s.results.queue = make(chan *completion, s.cfg.Concurrency)
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

// recoverOwn resolves, through the retry flow, the attempts that an earlier
// process of this node left running: that process is gone (the store lock or
// the node registry says so), so they were interrupted.
func (s *Scheduler) recoverOwn(ctx context.Context, now time.Time) error {
	runs, err := s.st.RunsRunning(ctx, s.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("list interrupted runs: %w", err)
	}
	runs = slices.DeleteFunc(runs, func(r *jobs.Run) bool { return r.Incarnation == s.Incarnation() })
	res := jobs.Result{Err: errors.New("the node's previous process ended while the attempt ran")}
	_, err = s.failAttempts(ctx, runs, res, jobs.ReasonInterrupted, now)
	if err != nil {
		return fmt.Errorf("resolve interrupted runs: %w", err)
	}
	// So do the deliveries it had leased: they are due again at once.
	n, err := s.st.NotificationsRelease(ctx, store.NotificationsReleaseParams{Node: s.cfg.NodeID, Incarnation: s.Incarnation()})
	if err != nil {
		return fmt.Errorf("release interrupted notifications: %w", err)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "notifications of the previous process are due again", "count", n)
	}
	return nil
}

// recoverBatch bounds the attempts one recovery transaction ends.
const recoverBatch = 500

// failAttempts ends the running attempts of runs that no process runs any
// more (this node's previous process's, or a silent node's) through the
// retry flow with res and reason, recoverBatch per transaction: a node
// that ran 2,000 attempts is recovered in four writes, not 2,000. Each
// transition is fenced by the dead attempt, as s.transition's: a run that
// another node recovered meanwhile is left to it. It returns how many
// attempts it ended, and the first failure: of a batch (whose transitions
// wrote nothing), or of a run.
func (s *Scheduler) failAttempts(ctx context.Context, runs []*jobs.Run, res jobs.Result, reason jobs.Reason, now time.Time) (ended int, err error) {
	for part := range slices.Chunk(runs, recoverBatch) {
		ts := make([]jobs.Transition, len(part))
		for i, r := range part {
			f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
			ts[i] = jobs.FailAttempt(r, f, s.cfg.NodeID, res, reason, now, s.cfg.Rand)
			ts[i].Time = s.storeNow(ts[i].Time)
			ts[i].Notify = s.notifyTargets(r.Job)
		}
		results, berr := s.st.RunTransitionMany(ctx, ts)
		if berr != nil {
			return ended, berr
		}
		s.notifyWake()
		failed := make([]*jobs.Run, 0, len(results))
		for i, rr := range results {
			r := part[i]
			switch {
			case rr.Err == nil:
				ended++
				failed = append(failed, rr.Run)
				s.logRun(ctx, rr.Run, r.Status, "")
			case errors.Is(rr.Err, store.ErrFenced):
				s.logFenced(ctx, r, ts[i])
			case err == nil:
				err = fmt.Errorf("run %s: %w", r.ID, rr.Err)
			}
		}
		s.noteRunsEnded(failed...)
	}
	return ended, err
}

// syncBatch bounds the jobs whose results or cursors one read of
// syncJobs asks for, with the fires that make the missing cursors: read
// for 100,000 jobs at once, they were all in memory at once, with the
// statements' arguments, at the start's peak.
const syncBatch = 1000

// cursorRead is what syncJobs keeps of a cursor it read.
type cursorRead struct {
	last   int64 // Unix microseconds
	paused bool
}

func readOf(c *store.Cursor) cursorRead {
	return cursorRead{last: c.Last.UnixMicro(), paused: c.Paused}
}

// syncJobs reads the results of the jobs, syncs the expectations
// (syncExpectations) and reads the cursors of cron jobs (creating missing
// ones at now, so a new job does not catch up on the past), syncBatch jobs
// at a time, and makes the runs of one-off jobs.
func (s *Scheduler) syncJobs(ctx context.Context, now time.Time) error {
	defs := s.Jobs()
	var cron []string
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
		if d.Schedule != nil {
			cron = append(cron, d.Name)
		}
	}
	if err := s.readResults(ctx, names); err != nil {
		return err
	}
	if err := s.syncExpectations(ctx, now); err != nil {
		return err
	}
	cursors := make(map[string]cursorRead, len(cron))
	for start := 0; start < len(cron); start += syncBatch {
		if err := s.readCursors(ctx, cron[start:min(start+syncBatch, len(cron))], now, cursors); err != nil {
			return err
		}
	}
	s.mu.Lock()
	for _, j := range s.declared.cron {
		if c, ok := cursors[j.def.Name]; ok {
			j.hasCursor, j.paused = true, c.paused
			j.setLast(c.last)
			s.ahead.note(j, now)
		} else {
			j.hasCursor = false
		}
	}
	s.ticks.requeue(s.declared.cron)
	s.mu.Unlock()

	for _, d := range defs {
		if d.At.IsZero() {
			continue
		}
		nb, na := d.Window(jobs.TriggerOnce, d.At)
		r, err := s.st.RunInsert(ctx, store.RunInsertParams{
			Job: d.Name, Trigger: jobs.TriggerOnce, ScheduledAt: d.At, NotBefore: nb, NotAfter: na,
			Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, Node: s.cfg.NodeID, Now: s.storeNow(now),
		})
		switch {
		case errors.Is(err, store.ErrDuplicate):
			// Made by an earlier start: a one-off job fires once, ever.
		case err != nil:
			return fmt.Errorf("make the run of one-off job %q: %w", d.Name, err)
		default:
			s.logRun(ctx, r, "", "one-off run made")
		}
	}
	return nil
}

// readCursors reads the cursors of the named cron jobs into cursors, and
// makes those missing at now, fireBatch per transaction: a first start
// with 100,000 jobs made them one transaction each.
func (s *Scheduler) readCursors(ctx context.Context, names []string, now time.Time, cursors map[string]cursorRead) error {
	read, err := s.st.ScheduleCursors(ctx, names)
	if err != nil {
		return fmt.Errorf("read schedule cursors: %w", err)
	}
	var missing []store.FireParams
	for _, name := range names {
		if c := read[name]; c != nil {
			cursors[name] = readOf(c)
		} else {
			missing = append(missing, store.FireParams{Job: name, Cursor: now, Node: s.cfg.NodeID, Now: s.storeNow(now)})
		}
	}
	for start := 0; start < len(missing); start += fireBatch {
		batch := missing[start:min(start+fireBatch, len(missing))]
		results, err := s.st.ScheduleFireMany(ctx, batch)
		if err != nil {
			return fmt.Errorf("create schedule cursors: %w", err)
		}
		var lost []string
		for i, res := range results {
			switch {
			case !res.Advanced:
				lost = append(lost, batch[i].Job) // made meanwhile by another node
			case res.Cursor != nil:
				cursors[batch[i].Job] = readOf(res.Cursor)
			}
		}
		if len(lost) > 0 {
			cs, err := s.st.ScheduleCursors(ctx, lost)
			if err != nil {
				return fmt.Errorf("read schedule cursors: %w", err)
			}
			for _, name := range lost {
				if c := cs[name]; c != nil {
					cursors[name] = readOf(c)
				}
			}
		}
	}
	return nil
}

// Reload swaps in a new set of jobs. The caller validated them; attempts
// that are running go on with the definition they started with. A job
// with expect_success_within that the new set does not declare is still
// expected (expect.go) until Forget.
func (s *Scheduler) Reload(ctx context.Context, defs []*jobs.Definition) error {
	old := s.Jobs()
	now := s.clock.Now()
	withdraw := s.aheadJobs()
	if err := s.setJobs(defs); err != nil {
		return err
	}
	// The ticks fired ahead under the old definitions are taken back (the
	// tick may be gone from the new schedule, or the job with it) and fire
	// again under the new ones. No fire runs meanwhile.
	s.fireMu.Lock()
	err := s.withdraw(ctx, withdraw, now)
	if err == nil {
		err = s.syncJobs(ctx, now)
	}
	s.fireMu.Unlock()
	if err != nil {
		// Keep the old job set: nothing of the new one is half in force.
		_ = s.setJobs(old)
		return err
	}
	// The series of the jobs that the reload removed go with them.
	s.mu.Lock()
	s.perJob.retain(func(job string) bool { return s.declared.job(job) != nil })
	s.mu.Unlock()
	s.log.InfoContext(ctx, "jobs reloaded", "jobs", len(defs))
	s.Wake()
	return nil
}

// Wake makes the loop look for work now.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
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
	nr, err := s.st.RunTransition(ctx, t)
	if err == nil && len(t.Notify) > 0 {
		s.notifyWake()
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
