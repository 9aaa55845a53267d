package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

var (
	// ErrNotFound: no such run, node or cursor.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: the occurrence or the dedup id already has a run.
	ErrDuplicate = errors.New("duplicate")
	// ErrFenced: a write about an attempt that is no longer the run's
	// current attempt of that incarnation (the run was recovered, finished,
	// or retried elsewhere). The write changed nothing.
	ErrFenced = errors.New("stale attempt: fenced")
	// ErrLocked: another live process holds the store (SQLite) or the node id.
	ErrLocked = errors.New("in use by another process")
)

// Store is what the engine and the control socket need from persistence.
// Every time parameter named Now may be zero: the store then uses its own
// clock (the database's, for PostgreSQL). Tests pin it.
type Store interface {
	// Close releases the store.
	Close() error
	// Ping checks that the store answers, with one cheap read through the
	// connections the other methods use. It is bounded by ctx only: the
	// caller (the health check) gives it a short deadline.
	Ping(ctx context.Context) error

	// NodeRegister records a new incarnation of a node by compare-and-set:
	// it writes only when the stored row's incarnation is p.Replace (no row
	// at all when Replace is empty) and then returns the row it replaced.
	// Otherwise it writes nothing and returns the stored row with a
	// *NodeHeldError (ErrLocked), so the caller can judge whether that
	// incarnation is alive before it asks again with Replace set to it.
	NodeRegister(ctx context.Context, p NodeRegisterParams) (prev *Node, err error)
	// NodeDelete removes a node's row if it still belongs to
	// p.Incarnation (a *NodeFencedError otherwise, ErrNotFound when there
	// is none).
	NodeDelete(ctx context.Context, p NodeDeleteParams) error
	// NodeMarkLost marks a silent node lost before its runs are recovered,
	// by compare-and-set on its incarnation and on the heartbeat it was
	// judged silent by: the row's incarnation becomes
	// LostIncarnation(p.Incarnation), which it returns, so the node's later
	// heartbeats are refused (ErrFenced) and a node that wakes up cannot
	// start what is being taken from it. A *NodeFencedError when the node
	// heartbeated since or the row belongs to another incarnation;
	// ErrNotFound when the row is gone.
	NodeMarkLost(ctx context.Context, p NodeMarkLostParams) (string, error)
	// NodeHeartbeat refreshes the node's heartbeat; a *NodeFencedError when
	// the row now belongs to another incarnation, ErrNotFound when it was
	// pruned.
	NodeHeartbeat(ctx context.Context, p NodeHeartbeatParams) error
	// NodesList returns every registered node; Node.Jobs is read only
	// withJobs (a node may declare 100,000 jobs, and the check for
	// silent nodes, every heartbeat, does not need them).
	NodesList(ctx context.Context, withJobs bool) ([]*Node, error)

	// ScheduleCursors returns the cursors of the named jobs that have one.
	ScheduleCursors(ctx context.Context, jobNames []string) (map[string]*Cursor, error)
	// ScheduleFire advances a job's cursor by compare-and-set and makes the
	// runs of the ticks it covers, in one transaction. See FireParams.
	ScheduleFire(ctx context.Context, p FireParams) (*FireResult, error)
	// ScheduleFireMany applies many FireParams (of different jobs) in one
	// transaction, each exactly as ScheduleFire would: results in order.
	// An error fails the whole batch; a lost compare-and-set is not an
	// error (Advanced false).
	ScheduleFireMany(ctx context.Context, ps []FireParams) ([]*FireResult, error)
	// SchedulePause pauses or resumes a job's schedule. Resuming moves the
	// cursor to now when it is earlier: ticks that fell while paused are
	// not caught up. Pausing withdraws the runs fired ahead of their tick,
	// as ScheduleWithdraw does, in the same transaction, and leaves the
	// cursor as that leaves it.
	SchedulePause(ctx context.Context, job string, paused bool, now time.Time) (*Cursor, error)
	// ScheduleWithdraw takes back the ticks of the named jobs that were
	// fired ahead of their time, in one transaction: each run made by a
	// schedule before its tick that is still pending and never attempted,
	// whose tick and not_before are later than now, is deleted with its
	// occurrence and its events (no attempt of it ever started, so the
	// tick may fire again, once: the cursor's compare-and-set still rules),
	// and a cursor later than now that was written before its tick moves
	// back to now; both only within MaxFireAhead of now. A run or cursor
	// later than now that was written at or after its tick, or later than
	// that, was not fired ahead (the clock was stepped back since): it
	// stays, and no tick fires twice. It returns the cursors of
	// the jobs that have one and how many runs it deleted.
	ScheduleWithdraw(ctx context.Context, jobNames []string, now time.Time) (map[string]*Cursor, int, error)

	// RunInsert makes a run (one-off, manual or rerun). ErrDuplicate when
	// its occurrence exists or a non-terminal run of the job has its dedup id.
	RunInsert(ctx context.Context, p RunInsertParams) (*jobs.Run, error)
	// RunInsertMany makes many runs in one transaction, all or none (a bulk
	// enqueue). ErrDuplicate, and nothing made, when any of them would be.
	RunInsertMany(ctx context.Context, ps []RunInsertParams) ([]*jobs.Run, error)
	// RunsClaim atomically starts up to Limit due runs of the declared jobs,
	// respecting each job's cluster-wide concurrency limit: the attempt
	// number grows by one and the attempt is owned by Node/Incarnation.
	RunsClaim(ctx context.Context, p ClaimParams) ([]*jobs.Run, error)
	// RunTransition applies a change of status built by the jobs package:
	// it checks the fence, jobs.ValidateTransition and t.From, writes the
	// run, ends the attempt when it leaves running, and records the event.
	// A run that is running can only be changed with a fence.
	RunTransition(ctx context.Context, t jobs.Transition) (*jobs.Run, error)
	// RunTransitionMany applies many transitions in one transaction, each
	// exactly as RunTransition would, in order: a fenced or invalid one
	// gets its error in its result and writes nothing, and the others go
	// on. The returned error is for the batch as a whole (nothing written).
	RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]TransitionResult, error)
	// RunsExpire cancels (reason expired) every pending or retrying run whose
	// not_after has passed, and returns them.
	RunsExpire(ctx context.Context, p RunsExpireParams) ([]*jobs.Run, error)
	// RunCancel cancels a pending or retrying run at once; for a running
	// run it sets CancelRequested, and the owning node stops the attempt.
	// jobs.ErrInvalidTransition for a finished run. Either way it records
	// p.Actor as the run's CancelledBy, and a pending or retrying run's
	// cancel event carries it.
	RunCancel(ctx context.Context, p RunCancelParams) (*jobs.Run, error)
	// RunsCancelRequested returns the ids of running runs of this
	// incarnation that have CancelRequested set.
	RunsCancelRequested(ctx context.Context, incarnation string) ([]string, error)
	// RunProgress records progress of a running attempt (fenced).
	RunProgress(ctx context.Context, f jobs.Fence, percent int, message string) error
	// RunsRunning returns the running runs whose attempt belongs to node
	// (any incarnation).
	RunsRunning(ctx context.Context, node string) ([]*jobs.Run, error)
	// RunsNextDue returns the earliest not_before later than after (any,
	// when after is zero) of the pending and retrying runs of the named
	// jobs; zero when there is none. The loop asks it when it will next
	// have a run to claim: a run already due that waits for its job's
	// limit must not hide one that becomes due later. The loop asks this
	// often: jobNames may come in any order, and sorted costs least (see
	// NameIndex).
	RunsNextDue(ctx context.Context, jobNames []string, after time.Time) (time.Time, error)
	// RunsPrune deletes finished runs (with their events and attempts) that
	// finished before the given time, and returns how many.
	RunsPrune(ctx context.Context, before time.Time) (int, error)

	// RunGet returns one run; ErrNotFound when there is none.
	RunGet(ctx context.Context, id string) (*jobs.Run, error)
	// RunsList returns runs, newest first (RunFilter).
	RunsList(ctx context.Context, f RunFilter) ([]*jobs.Run, error)
	// RunsStats summarises the runs of f, in one statement that reads
	// them all (RunStats): its cost grows with the runs made in f's
	// range, not with a page of them.
	RunsStats(ctx context.Context, f RunStatsFilter) (*RunStats, error)
	// RunEvents returns a run's history, oldest first. The creation event
	// carries the run's Actor, the event of a transition its Actor, and the
	// end of an attempt that a cancel request stopped (reason cancelled)
	// the run's CancelledBy.
	RunEvents(ctx context.Context, id string) ([]*jobs.Event, error)
	// RunAttempts returns a run's attempts, oldest first, with their output.
	RunAttempts(ctx context.Context, id string) ([]*jobs.Attempt, error)
	// RunAttemptsClipped returns attempts of a run as RunAttempts does,
	// oldest first, with a bounded part of their output (AttemptsParams):
	// for the pages and replies that must not hold every attempt's
	// whole output at once. ErrNotFound when there is no such run; none
	// when the run has no attempt of p.Number.
	RunAttemptsClipped(ctx context.Context, p AttemptsParams) ([]*ClippedAttempt, error)
	// RunChildren returns the runs that the end of run id made (its
	// chain: jobs.Run.ParentRunID is id), oldest first; none when there
	// are none or no such run.
	RunChildren(ctx context.Context, id string) ([]*jobs.Run, error)
	// JobsLastRun returns the newest run of each named job that has one.
	JobsLastRun(ctx context.Context, jobNames []string) (map[string]*jobs.Run, error)
	// RunsCount counts the runs of each status but completed, in one
	// statement: every such status has an entry, zero included. Completed
	// runs, most of the history, are not counted; the others are counted
	// in indexes that hold them alone, so the count costs what they
	// number, not what the history does.
	RunsCount(ctx context.Context) (map[jobs.Status]int64, error)

	// JobsResults returns the last success and the last failure of each
	// named job whose run ever ended completed or dead_letter (see
	// JobResult).
	JobsResults(ctx context.Context, jobNames []string) (map[string]JobResult, error)
	// ResultFeed is the feed that tells this process of the results of
	// runs that end on any node, once they are committed.
	ResultFeed() *ResultFeed

	Notifications
	Expectations
	Backfills
}

// lostPrefix starts the incarnation of a node row marked lost.
const lostPrefix = "lost:"

// LostIncarnation is the incarnation NodeMarkLost gives the row of a node
// whose incarnation was inc.
func LostIncarnation(inc string) string { return lostPrefix + inc }

// LostFrom returns the incarnation that a row marked lost had, and whether
// inc is such a mark.
func LostFrom(inc string) (string, bool) { return strings.CutPrefix(inc, lostPrefix) }

// NodeHeldError is NodeRegister's refusal: node ID's row is not the
// incarnation the registration was to replace. Held is the row found, nil
// when there is none. It wraps ErrLocked.
type NodeHeldError struct {
	ID   string
	Held *Node
}

func (e *NodeHeldError) Error() string {
	var inc, host string
	pid := 0
	if e.Held != nil {
		inc, host, pid = e.Held.Incarnation, e.Held.Host, e.Held.PID
	}
	return fmt.Sprintf("%v: node id %s is held by incarnation %q (host %s, pid %d)", ErrLocked, e.ID, inc, host, pid)
}

func (e *NodeHeldError) Unwrap() error { return ErrLocked }

// NodeFencedError is the refusal of a write of node ID's row that holds
// only while the row belongs to Incarnation and, when HeartbeatAt is set
// (NodeMarkLost), still has that heartbeat. Found and FoundHeartbeatAt are
// the row's. It wraps ErrFenced.
type NodeFencedError struct {
	ID               string
	Incarnation      string
	HeartbeatAt      time.Time
	Found            string
	FoundHeartbeatAt time.Time
}

func (e *NodeFencedError) Error() string {
	if e.Found != e.Incarnation || e.HeartbeatAt.IsZero() {
		return fmt.Sprintf("%v: node %s belongs to incarnation %s, not %s", ErrFenced, e.ID, e.Found, e.Incarnation)
	}
	return fmt.Sprintf("%v: node %s heartbeated at %s, after %s", ErrFenced, e.ID,
		e.FoundHeartbeatAt.UTC().Format(time.RFC3339Nano), e.HeartbeatAt.UTC().Format(time.RFC3339Nano))
}

func (e *NodeFencedError) Unwrap() error { return ErrFenced }

// Node is a registered daemon process.
type Node struct {
	ID          string
	Incarnation string
	Host        string
	PID         int
	Version     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Jobs        []string
	// Age is how long ago the heartbeat was, by the store's clock.
	Age time.Duration
}

// NodeRegisterParams describes a starting incarnation.
type NodeRegisterParams struct {
	ID          string
	Incarnation string
	Host        string
	PID         int
	Version     string
	Jobs        []string
	// Replace is the incarnation the caller found and decided to take
	// over; empty to register only when the node id has no row.
	Replace string
	Now     time.Time
}

// NodeDeleteParams names the node row to delete and the incarnation it
// must still belong to.
type NodeDeleteParams struct {
	ID          string
	Incarnation string
}

// NodeMarkLostParams names a silent node: its row, the incarnation and the
// heartbeat it was judged silent by.
type NodeMarkLostParams struct {
	ID          string
	Incarnation string
	HeartbeatAt time.Time
}

// NodeHeartbeatParams is a heartbeat of a node's incarnation.
type NodeHeartbeatParams struct {
	ID          string
	Incarnation string
	Now         time.Time
}

// MaxFireAhead bounds how far ahead of its tick the engine fires a tick
// (its fire lead, and the extra lead of a large round). A withdrawal
// takes back only ticks within it: a run or cursor later than that is not
// one fired ahead and unreached, but one the clock was stepped back from.
const MaxFireAhead = 15 * time.Second

// Cursor is the durable schedule state of a cron job.
type Cursor struct {
	Job string
	// Last is the newest tick handled (fired or skipped). The next tick is
	// the schedule's first fire time after it.
	Last          time.Time
	Paused        bool
	Skipped       int64     // ticks skipped since the cursor was made
	LastSkippedAt time.Time // newest skipped tick
	UpdatedAt     time.Time
}

// FireParams advances a cursor and makes the runs of the ticks it covers.
type FireParams struct {
	Job string
	// Expect is the cursor's Last as the caller read it; zero when the
	// caller saw no cursor (it is then created). When the stored cursor
	// differs, nothing is written and FireResult.Advanced is false.
	Expect time.Time
	// Cursor is the new Last: the newest tick handled.
	Cursor time.Time
	// Runs are the runs to make, one per fired tick (ScheduledAt is the
	// tick, the occurrence key). A tick whose occurrence exists is counted in
	// Duplicates and makes nothing.
	Runs []RunInsertParams
	// Skipped ticks (missed beyond misfire_grace and not caught up), counted
	// on the cursor; LastSkipped is the newest of them.
	Skipped     int
	LastSkipped time.Time
	// Overlap decides what happens when the job has an active run:
	// skip: the runs are not made and count as skipped; replace: the active
	// runs are cancelled (reason replaced; a running one gets CancelRequested)
	// and the new run is made; allow and queue: the runs are made. Of
	// several ticks of one fire, skip makes the oldest and replace the
	// newest, and the others count as skipped (OneTickAtATime).
	// A fire ahead of time (every run's tick later than Now) of a skip or
	// replace job that has an active run is deferred: nothing is written
	// and FireResult.Deferred is set, so that the policy is applied at the
	// tick, to the runs active then. A fire that makes the cursor (Expect
	// zero) is never deferred.
	Overlap jobs.Overlap
	Node    string
	Now     time.Time
	// Notify are the job's notifiers: those that take skipped hear, in
	// the fire's transaction, of the ticks it skipped (Skipped and those
	// skipped by overlap). Nil: no one.
	Notify []jobs.NotifyTarget
}

// FireResult says what ScheduleFire did.
type FireResult struct {
	Advanced bool
	// Deferred: the fire was ahead of time and met an active run of a skip
	// or replace job (see FireParams.Overlap); nothing was written.
	Deferred       bool
	Created        []*jobs.Run
	Duplicates     int
	SkippedOverlap int
	// Replaced are the runs that overlap=replace cancelled or asked to stop.
	Replaced []*jobs.Run
	Cursor   *Cursor
}

// RunInsertParams describes a run to make.
type RunInsertParams struct {
	Job              string
	Trigger          jobs.Trigger
	ScheduledAt      time.Time
	NotBefore        time.Time
	NotAfter         time.Time // zero: none
	Retry            jobs.RetryPolicy
	NoRetryExitCodes []int
	DedupID          string
	RerunOf          string
	Payload          string
	Node             string // who made it, for the event
	Actor            string // who asked for it (jobs.Run.Actor); empty: the engine
	Now              time.Time
	// ParentRunID is the run whose end made this one, for a run of a
	// chain (Trigger jobs.TriggerChain) and only for it; the store keeps
	// one run per parent run and job (ErrDuplicate).
	ParentRunID string
}

// RunsExpireParams asks to expire the runs past their not_after, on
// behalf of Node (for the events).
type RunsExpireParams struct {
	Node string
	Now  time.Time
	// Notify, when set, returns the notifiers of a job, which each
	// expiry's transition carries (see jobs.Transition.Notify).
	Notify func(job string) []jobs.NotifyTarget
	// Chain, when set, returns the chain of a job, which each expiry's
	// transition carries (see jobs.Transition.Chain).
	Chain func(job string) *jobs.Chain
}

// ChainOf returns the chain of job, or nil.
func (p RunsExpireParams) ChainOf(job string) *jobs.Chain {
	if p.Chain == nil {
		return nil
	}
	return p.Chain(job)
}

// Targets returns the notifiers of job, or nil.
func (p RunsExpireParams) Targets(job string) []jobs.NotifyTarget {
	if p.Notify == nil {
		return nil
	}
	return p.Notify(job)
}

// RunCancelParams asks to cancel run ID, on behalf of Node (for the
// event) and Actor (jobs.Run.CancelledBy), with Reason (empty: cancelled).
type RunCancelParams struct {
	ID     string
	Node   string
	Actor  string
	Reason jobs.Reason
	Now    time.Time
}

// ClaimParams asks for due runs.
type ClaimParams struct {
	Node        string
	Incarnation string
	// Jobs are the jobs the node declares, each with its concurrency
	// limit in the cluster. Runs of other jobs are never claimed.
	Jobs  JobLimits
	Limit int
	Now   time.Time
	// Due says that the caller knows runs to be due (the runs of ticks it
	// fired ahead, whose time has come): a store may then skip the read
	// with which it answers, without its write lock, the polls that find
	// nothing, and, when Jobs are few, claim straight from their own due
	// runs.
	Due bool
}

// JobLimits are the jobs a node declares, by name, each with its
// concurrency limit in the cluster (0: none): the jobs whose runs a claim
// may take. They are the names, sorted, and a limit at the same place in
// a slice beside them: a node may declare 100,000 jobs, and a map of them
// cost 40 bytes a job. A JobLimits is read only.
type JobLimits struct {
	names   []string
	limits  []int32
	limited bool // some limit is above 0
}

// NewJobLimits returns the jobs of m with their limits.
func NewJobLimits(m map[string]int) JobLimits {
	names := slices.Sorted(maps.Keys(m))
	limits := make([]int32, len(names))
	for i, name := range names {
		limits[i] = int32(min(max(m[name], 0), math.MaxInt32))
	}
	return JobLimitsOf(names, limits)
}

// JobLimitsOf returns the jobs named names, which must be sorted and
// distinct, each with the limit at the same place in limits (0: none). It
// keeps both slices, which must not change.
func JobLimitsOf(names []string, limits []int32) JobLimits {
	return JobLimits{names: names, limits: limits, limited: slices.ContainsFunc(limits, func(l int32) bool { return l > 0 })}
}

// Len is the number of jobs.
func (l JobLimits) Len() int { return len(l.names) }

// Names returns the names of the jobs, sorted; the caller must not change
// them.
func (l JobLimits) Names() []string { return l.names }

// Limit returns job's limit (0: none), and whether job is one of the jobs.
func (l JobLimits) Limit(job string) (int, bool) {
	i, ok := slices.BinarySearch(l.names, job)
	if !ok {
		return 0, false
	}
	return int(l.limits[i]), true
}

// Limited reports whether some job has a limit.
func (l JobLimits) Limited() bool { return l.limited }

// Only returns the jobs that are both among l and named in names (in any
// order, repeats allowed).
func (l JobLimits) Only(names []string) JobLimits {
	sorted := slices.Compact(slices.Sorted(slices.Values(names)))
	var out JobLimits
	for _, name := range sorted {
		if limit, ok := l.Limit(name); ok {
			out.names, out.limits = append(out.names, name), append(out.limits, int32(limit))
			out.limited = out.limited || limit > 0
		}
	}
	return out
}

// TransitionResult is the outcome of one transition of a batch.
type TransitionResult struct {
	Run *jobs.Run // the run after the change; nil when Err is set
	Err error     // ErrFenced, ErrNotFound, jobs.ErrInvalidTransition, ...
}

// AttemptsParams selects attempts of a run for RunAttemptsClipped, and
// how much of their output is read.
type AttemptsParams struct {
	RunID string
	// Number selects the attempt of that number alone; 0 selects all.
	Number int
	// Newest keeps the newest Newest attempts of those selected; 0 all.
	Newest int
	// Keep bounds the output read of each attempt: an output stored of
	// more than 2*Keep bytes is read as its first Keep bytes (Output) and
	// its last Keep (Tail). 0 reads each output whole.
	Keep int
}

// ClippedAttempt is an attempt with the part of its stored output that
// RunAttemptsClipped read.
type ClippedAttempt struct {
	jobs.Attempt
	// Tail is the end of an output read in two parts, after a gap of
	// StoredBytes - len(Output) - len(Tail) bytes not read; "" for an
	// output read whole, in Output.
	Tail string
	// StoredBytes is the length of the output stored (OutputBytes is
	// what the attempt wrote, of which the store keeps a head and a
	// tail).
	StoredBytes int64
}

// RunFilter selects runs for RunsList. A listing is ordered by when the
// runs were made, newest first (created_at, then id), and pages through
// that order by a cursor: Before, the last run of the page before.
type RunFilter struct {
	Job    string
	Status jobs.Status
	// Since and Until bound when the runs were made: at Since or later,
	// and before Until. Zero: no bound.
	Since, Until time.Time
	// Before is the id of a run: only the runs that come after it in the
	// listing's order (made before it, or at the same instant with a
	// smaller id) are listed. ErrNotFound when there is no such run.
	Before string
	Limit  int // 0: 100; at most MaxListLimit+1
}

// MaxListLimit is the most runs a caller may ask a page of a listing for.
// A listing of a page of n runs reads n+1, to tell whether a page follows,
// so a store lists MaxListLimit+1 runs at most.
const MaxListLimit = 10000

// ListLimit is how many runs a listing with f returns at most: Limit, 100
// when it is not set, and never more than MaxListLimit+1.
func (f RunFilter) ListLimit() int {
	if f.Limit <= 0 {
		return 100
	}
	return min(f.Limit, MaxListLimit+1)
}

// ConcurrentWriter is implemented by stores that run write transactions
// side by side (PostgreSQL). Only on them does the engine claim the runs
// of one fire of a burst while it writes the next fire: on a store whose
// writes take turns (SQLite), the claim could wait behind the fire it
// should precede.
type ConcurrentWriter interface {
	ConcurrentWrites()
}

// Notifier is implemented by stores that can tell an idle node that new
// work may be due (PostgreSQL LISTEN/NOTIFY). The engine wakes on each
// value and still polls at a bounded interval, so a lost notification only
// delays work.
type Notifier interface {
	// Wakeups returns a channel that receives a value, coalesced, after
	// runs were made or became due again in the store by any process.
	Wakeups() <-chan struct{}
}

// DueScan is how many of the first due runs of all jobs together, in start
// order, a claim of limit runs reads (the runs_due index) before it falls
// back to reading the due runs of each declared job. The first due runs
// are those of declared jobs with room nearly always; a claim reads past
// the others (runs of jobs another node declares, of jobs at their
// concurrency limit) only this far, so a backlog it cannot take never
// makes it slow, and reading each job's own runs is left for that case.
func DueScan(limit int) int { return 4*limit + 64 }

// NameIndex tells whether a job is one of a list of names, for
// RunsNextDue, which asks it of each of the first waiting runs: by binary
// search, so that a list of 100,000 names costs a few comparisons a job
// when it is sorted, as the engine passes it. A search that hits is right
// in any order; the first that misses sorts a copy of a list that is not
// sorted, and searches again.
type NameIndex struct {
	names  []string
	sorted bool
}

// NewNameIndex returns an index of names; it keeps names, and does not
// change it.
func NewNameIndex(names []string) *NameIndex { return &NameIndex{names: names} }

// Has reports whether job is one of the names.
func (x *NameIndex) Has(job string) bool {
	if _, ok := slices.BinarySearch(x.names, job); ok || x.sorted {
		return ok
	}
	if !slices.IsSorted(x.names) {
		x.names = slices.Sorted(slices.Values(x.names))
	}
	x.sorted = true
	_, ok := slices.BinarySearch(x.names, job)
	return ok
}

// NewRunCounts returns the counts of RunsCount before any run is counted:
// zero for each status but completed.
func NewRunCounts() map[jobs.Status]int64 {
	out := make(map[jobs.Status]int64, len(jobs.Statuses)-1)
	for _, st := range jobs.Statuses {
		if st != jobs.StatusCompleted {
			out[st] = 0
		}
	}
	return out
}
