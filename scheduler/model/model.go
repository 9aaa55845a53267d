package model

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// The leads of firing ahead, as docs/firing-ahead.md gives them: a tick's
// run is written FireLead before the tick and claimed ClaimLead before it.
const (
	FireLead  = 250 * time.Millisecond
	ClaimLead = 50 * time.Millisecond
)

// Settings are the [daemon] keys the model reads, with the config's
// meaning: a ShutdownGrace of 0 stops running attempts at once.
type Settings struct {
	Concurrency   int
	ShutdownGrace time.Duration
	// RetryRand is the value in [0, 1) that retry jitter draws: the
	// simulator gives the engine the same constant.
	RetryRand float64
}

// Kind is what an event of the timeline does.
type Kind int

const (
	Start   Kind = iota + 1 // the daemon starts with Jobs
	Stop                    // SIGTERM: shutdown_grace, then the attempts stop
	Kill                    // SIGKILL: nothing more is written
	Reload                  // the config is reloaded with Jobs
	Trigger                 // `schedulerd trigger Job`, naming the run Label
	Cancel                  // `schedulerd cancel` of the run Label names
	Pause                   // `schedulerd pause Job`
	Resume                  // `schedulerd resume Job`
)

func (k Kind) String() string {
	return [...]string{"?", "start", "stop", "kill", "reload", "trigger", "cancel", "pause", "resume"}[k]
}

// Event is one step of a timeline.
type Event struct {
	At   time.Time
	Kind Kind
	Jobs []*jobs.Definition // Start, Reload
	Job  string             // Trigger, Pause, Resume
	// Label names the run a Trigger makes, and the run a Cancel cancels
	// (a RunKey's String).
	Label               string
	DedupID             string    // Trigger
	NotBefore, NotAfter time.Time // Trigger; zero: now, and none
}

func (e Event) String() string {
	at := e.At.UTC().Format("2006-01-02T15:04:05.000000Z")
	switch e.Kind {
	case Start, Reload:
		names := make([]string, len(e.Jobs))
		for i, d := range e.Jobs {
			names[i] = d.Name
		}
		return fmt.Sprintf("%s %s [%s]", at, e.Kind, strings.Join(names, " "))
	case Trigger:
		s := fmt.Sprintf("%s trigger %s as %s", at, e.Job, e.Label)
		if e.DedupID != "" {
			s += " dedup=" + e.DedupID
		}
		if !e.NotBefore.IsZero() {
			s += " not_before=" + e.NotBefore.UTC().Format(time.RFC3339Nano)
		}
		if !e.NotAfter.IsZero() {
			s += " not_after=" + e.NotAfter.UTC().Format(time.RFC3339Nano)
		}
		return s
	case Cancel:
		return fmt.Sprintf("%s cancel %s", at, e.Label)
	case Pause, Resume:
		return fmt.Sprintf("%s %s %s", at, e.Kind, e.Job)
	}
	return fmt.Sprintf("%s %s", at, e.Kind)
}

// RunKey names a run independently of its id: a cron run by its job and
// tick, a one-off run by its job and at time, a triggered run by the
// label of its trigger.
type RunKey struct {
	Job     string
	Trigger jobs.Trigger
	At      time.Time // schedule and once
	Label   string    // manual
}

func (k RunKey) String() string {
	if k.Trigger == jobs.TriggerManual {
		return k.Job + "!" + k.Label
	}
	return k.Job + "@" + k.At.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// Outcome says how attempt number attempt (from 1) of the run key ends:
// after d, successfully or not. The simulator's handlers behave so.
type Outcome func(key RunKey, attempt int) (d time.Duration, ok bool)

// Run is a run as the model says it must be at the end.
type Run struct {
	Key      RunKey
	Status   jobs.Status
	Reason   jobs.Reason
	Attempts int
	// Starts are the start times of the attempts, in order: the claim's
	// time, or the tick for a run claimed ahead.
	Starts []time.Time
	// NotBefore and NotAfter are the run's window when it was made.
	NotBefore, NotAfter time.Time
	DedupID             string
}

// Result is what the model says of a timeline.
type Result struct {
	// Runs by RunKey.String().
	Runs map[string]*Run
	// Skipped counts, by job, the ticks skipped (missed and not caught up,
	// or skipped by overlap).
	Skipped map[string]int
	// Refused are the triggers, cancels, pauses and resumes that were
	// refused, by the event's index in the timeline, with why.
	Refused map[int]string
	// Ambiguous lists the instants whose outcome the documented rules
	// leave to chance; a timeline with any is not compared.
	Ambiguous []string
	// Down is whether the daemon is down at the end (after Stop or Kill).
	Down bool
	// Trace lists what the model did, an instant a line, for reading a
	// failure beside the engine's log.
	Trace []string
}

// run is a run in the model's state.
type run struct {
	key              RunKey
	created          time.Time
	seq              int
	nb, na           time.Time // the current window (nb moves on retry)
	firstNB, firstNA time.Time
	status           jobs.Status
	reason           jobs.Reason
	attempt          int
	retry            jobs.RetryPolicy
	dedup            string
	starts           []time.Time
	aheadTick        time.Time // a tick's run fired ahead: its tick
	// The running attempt: its start (a run claimed ahead starts at its
	// tick), its end and whether it succeeds, its timeout (zero: none).
	start, end, timeoutAt time.Time
	ok                    bool
	owner                 int // the incarnation that runs it
}

func (r *run) active() bool { return !r.status.Terminal() }
func (r *run) waiting() bool {
	return r.status == jobs.StatusPending || r.status == jobs.StatusRetrying
}

// cursor is a cron job's cursor: its newest handled tick, and whether it
// is paused.
type cursor struct {
	last   time.Time
	paused bool
	// ahead is the tick fired ahead (the cursor is at it) until it comes.
	// deferred is a tick whose fire ahead met an active run of a skip or
	// replace job: it is not fired ahead, and is judged at its time, as
	// a due tick; the cursor stays where it was.
	ahead    time.Time
	deferred time.Time
	// claimLooked: the claim ahead of the tick at ahead has been tried.
	claimLooked bool
}

// state is the model's state.
type state struct {
	set     Settings
	outcome Outcome
	now     time.Time
	// up: the daemon runs; stopping: it is in its shutdown grace, until
	// graceEnd; incarnation counts the starts.
	up, stopping bool
	graceEnd     time.Time
	incarnation  int
	defs         map[string]*jobs.Definition
	cursors      map[string]*cursor
	skipped      map[string]int
	runs         []*run
	byKey        map[string]*run
	seq          int
	res          *Result
	// endedAtLimit are the jobs of the attempts that ended at now while
	// their job was at its limit: the engine frees the slot at once and
	// the job's limit only once the result is written, so which run the
	// slot goes to is left to chance when runs compete for it.
	endedAtLimit map[string]bool
	endedAt      time.Time
}

// Simulate runs the timeline (events in time order, the first a Start) and
// then lets the time run to end with no more events.
func Simulate(set Settings, events []Event, outcome Outcome, end time.Time) *Result {
	st := &state{set: set, outcome: outcome, defs: map[string]*jobs.Definition{}, cursors: map[string]*cursor{},
		skipped: map[string]int{}, byKey: map[string]*run{},
		res: &Result{Runs: map[string]*Run{}, Skipped: map[string]int{}, Refused: map[int]string{}}}
	if set.Concurrency <= 0 {
		panic("model: concurrency must be set")
	}
	for i := 0; ; {
		next := st.nextInstant()
		var ev *Event
		if i < len(events) && (next.IsZero() || !events[i].At.After(next)) {
			ev = &events[i]
			if !next.IsZero() && events[i].At.Equal(next) {
				st.ambiguous(next, "event %s at an instant of the engine's", events[i].Kind)
			}
			next = events[i].At
		}
		if next.IsZero() || next.After(end) {
			break
		}
		st.now = next
		st.engine()
		if ev != nil && ev.Kind != Start {
			st.checkLead(*ev)
		}
		if ev != nil {
			st.apply(i, *ev)
			i++
			st.engine()
		}
	}
	st.now = end
	for _, r := range st.runs {
		st.res.Runs[r.key.String()] = &Run{Key: r.key, Status: r.status, Reason: r.reason, Attempts: r.attempt,
			Starts: r.starts, NotBefore: r.firstNB, NotAfter: r.firstNA, DedupID: r.dedup}
	}
	for k, v := range st.skipped {
		st.res.Skipped[k] = v
	}
	st.res.Down = !st.up && !st.stopping
	return st.res
}

func (st *state) trace(format string, args ...any) {
	st.res.Trace = append(st.res.Trace, st.now.UTC().Format("15:04:05.000000")+" "+fmt.Sprintf(format, args...))
}

func (st *state) ambiguous(t time.Time, format string, args ...any) {
	st.res.Ambiguous = append(st.res.Ambiguous, t.UTC().Format("15:04:05.000000")+": "+fmt.Sprintf(format, args...))
}

// checkLead notes as ambiguous an event that comes while a tick is
// fired ahead and not yet reached (docs/firing-ahead.md, taking a run
// back): the model does not follow what a pause, reload, stop, kill or
// cancel does in that moment; firing-ahead's own tests do.
func (st *state) checkLead(ev Event) {
	if !st.up {
		return
	}
	for _, name := range sortedKeys(st.cursors) {
		d, c := st.defs[name], st.cursors[name]
		if d == nil || d.Schedule == nil || c.paused {
			continue
		}
		t := c.ahead
		if t.IsZero() {
			t = d.Schedule.Next(c.last)
		}
		if !t.IsZero() && !t.Add(-FireLead).After(st.now) && t.After(st.now) {
			st.ambiguous(st.now, "event %s inside the fire lead of job %s's tick", ev.Kind, name)
		}
	}
}

// nextInstant is the next instant after now at which the engine has
// something to do; zero when it has nothing (down, or idle forever).
func (st *state) nextInstant() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(st.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !st.up && !st.stopping {
		return time.Time{}
	}
	if st.stopping {
		consider(st.graceEnd)
	}
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.owner == st.incarnation {
			consider(r.start)
			consider(r.end)
			consider(r.timeoutAt)
		}
		if st.up && r.waiting() {
			if st.defs[r.key.Job] != nil {
				consider(r.nb)
			}
			consider(r.na)
		}
	}
	if st.up {
		for name, c := range st.cursors {
			d := st.defs[name]
			if d == nil || d.Schedule == nil || c.paused {
				continue
			}
			if !c.ahead.IsZero() {
				consider(c.ahead.Add(-ClaimLead))
				consider(c.ahead)
				continue
			}
			if t := d.Schedule.Next(c.last); !t.IsZero() {
				if !t.Equal(c.deferred) {
					consider(t.Add(-FireLead))
				}
				consider(t)
			}
		}
	}
	return next
}

// engine does what the engine does at now: attempts end, ticks fire, runs
// are claimed and expire, until nothing changes.
func (st *state) engine() {
	if !st.up && !st.stopping {
		return
	}
	st.attemptsAt()
	if st.stopping && !st.now.Before(st.graceEnd) {
		st.endGrace()
	}
	if !st.up {
		return
	}
	for {
		changed := st.fire()
		changed = st.claimAhead() || changed
		changed = st.claim() || changed
		changed = st.expire() || changed
		if !changed {
			return
		}
	}
}

// attemptsAt ends the attempts whose handler returns or whose timeout
// comes at now, and starts those claimed ahead whose tick has come.
func (st *state) attemptsAt() {
	var ending []*run
	for _, r := range st.runs {
		if r.status != jobs.StatusRunning || r.owner != st.incarnation {
			continue
		}
		if r.start.Equal(st.now) {
			st.begin(r)
		}
		if r.start.After(st.now) {
			continue
		}
		if r.end.Equal(st.now) || r.timeoutAt.Equal(st.now) {
			ending = append(ending, r)
		}
	}
	if len(ending) > 0 {
		st.decisionsAt("an attempt ends")
		st.endedAtLimit, st.endedAt = map[string]bool{}, st.now
		for _, r := range ending {
			if d := st.defs[r.key.Job]; d != nil && limit(d) > 0 && st.runningOf(r.key.Job) >= limit(d) {
				st.endedAtLimit[r.key.Job] = true
			}
		}
	}
	for _, r := range ending {
		switch {
		case !r.timeoutAt.IsZero() && !r.timeoutAt.After(r.end):
			if r.timeoutAt.Equal(r.end) {
				st.ambiguous(st.now, "run %s ends at its timeout", r.key)
			}
			st.failAttempt(r, jobs.ReasonTimeout)
		case r.ok:
			r.status, r.reason = jobs.StatusCompleted, jobs.ReasonSucceeded
			st.trace("run %s completed", r.key)
		default:
			st.failAttempt(r, jobs.ReasonFailed)
		}
	}
}

// decisionsAt notes as ambiguous an instant where an attempt ends (what)
// and the engine also decides something that the end could change: a
// tick, a run due or past its window, a start.
func (st *state) decisionsAt(what string) {
	if !st.up {
		return
	}
	for name, c := range st.cursors {
		d := st.defs[name]
		if d == nil || d.Schedule == nil || c.paused {
			continue
		}
		t := d.Schedule.Next(c.last)
		if !c.ahead.IsZero() {
			t = c.ahead
		}
		if t.Equal(st.now) || t.Add(-FireLead).Equal(st.now) || t.Add(-ClaimLead).Equal(st.now) {
			st.ambiguous(st.now, "%s at a tick's instant of job %s", what, name)
		}
	}
	for _, r := range st.runs {
		if r.waiting() && (r.nb.Equal(st.now) || r.na.Equal(st.now)) {
			st.ambiguous(st.now, "%s as run %s becomes due or expires", what, r.key)
		}
		if r.status == jobs.StatusRunning && r.start.Equal(st.now) {
			st.ambiguous(st.now, "%s as run %s starts", what, r.key)
		}
	}
}

// begin starts the attempt of a claimed run: its handler runs from now.
func (st *state) begin(r *run) {
	d, ok := st.outcome(r.key, r.attempt)
	r.end, r.ok = st.now.Add(d), ok
	r.timeoutAt = time.Time{}
	if def := st.defs[r.key.Job]; def != nil && def.Timeout > 0 {
		r.timeoutAt = st.now.Add(def.Timeout)
	}
}

// failAttempt ends r's attempt as failed for reason, through the retry
// flow (docs/configuration.md, retry and windows): dead letter after the
// last attempt; else the next attempt after the backoff, not before the
// run's not_before; expired when that is not before its not_after.
func (st *state) failAttempt(r *run, reason jobs.Reason) {
	defer func() {
		st.trace("run %s attempt %d failed (%s): %s, not_before %s", r.key, r.attempt, reason, r.status, r.nb.UTC().Format("15:04:05.000000"))
	}()
	r.reason = reason
	if r.attempt >= max(r.retry.MaxAttempts, 1) {
		r.status = jobs.StatusDeadLetter
		return
	}
	next := st.now.Add(backoff(r.retry, r.attempt, st.set.RetryRand))
	if next.Before(r.nb) {
		next = r.nb
	}
	if !r.na.IsZero() && !next.Before(r.na) {
		r.status, r.reason = jobs.StatusCancelled, jobs.ReasonExpired
		return
	}
	r.status, r.nb = jobs.StatusRetrying, next
}

// backoff is the wait after failed attempt number attempt: fixed waits
// initial_delay; exponential doubles it per failed attempt, capped at
// max_delay (0: no cap); with jitter it is drawn from [d/2, d].
func backoff(p jobs.RetryPolicy, attempt int, rnd float64) time.Duration {
	d := p.InitialDelay
	if p.Backoff == jobs.BackoffExponential {
		for i := 1; i < attempt; i++ {
			if p.MaxDelay > 0 && d >= p.MaxDelay {
				break
			}
			d *= 2
		}
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	if p.Jitter && d > 0 {
		half := d / 2
		d = half + time.Duration(rnd*float64(d-half))
	}
	return d
}

// endGrace stops, at the end of shutdown_grace, the attempts still
// running (reason shutdown, through the retry flow); the daemon is down.
func (st *state) endGrace() {
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.owner == st.incarnation {
			st.failAttempt(r, jobs.ReasonShutdown)
		}
	}
	st.stopping = false
}

// apply applies the event ev (the i-th of the timeline) at now.
func (st *state) apply(i int, ev Event) {
	refuse := func(why string) { st.res.Refused[i] = why; st.trace("event #%d refused: %s", i, why) }
	st.trace("event #%d: %s", i, ev)
	if !st.up && ev.Kind != Start {
		switch ev.Kind {
		case Trigger, Cancel, Pause, Resume, Reload:
			refuse("the daemon is not running")
			return
		}
	}
	switch ev.Kind {
	case Start:
		if st.up || st.stopping {
			panic("model: start of a running daemon")
		}
		st.incarnation++
		st.up = true
		// What the previous process kept in memory is gone: the ticks it
		// fired ahead are cursors in the store, and those it deferred
		// were never written.
		for _, c := range st.cursors {
			if !c.ahead.After(st.now) {
				c.ahead, c.claimLooked = time.Time{}, false
			}
			c.deferred = time.Time{}
		}
		// The attempts the previous process left running were interrupted.
		for _, r := range st.runs {
			if r.status == jobs.StatusRunning {
				st.failAttempt(r, jobs.ReasonInterrupted)
			}
		}
		st.load(ev.Jobs)
	case Reload:
		st.load(ev.Jobs)
	case Stop:
		st.up = false
		st.stopping = true
		st.graceEnd = st.now.Add(st.set.ShutdownGrace)
		if st.set.ShutdownGrace <= 0 {
			st.endGrace()
		}
	case Kill:
		st.up, st.stopping = false, false
	case Trigger:
		st.trigger(ev, refuse)
	case Cancel:
		r := st.byKey[ev.Label]
		switch {
		case r == nil:
			refuse("no such run")
		case !r.active():
			refuse("run is " + string(r.status))
		default:
			r.status, r.reason = jobs.StatusCancelled, jobs.ReasonCancelled
		}
	case Pause, Resume:
		d := st.defs[ev.Job]
		c := st.cursors[ev.Job]
		if d == nil || d.Schedule == nil || c == nil {
			refuse("not a declared cron job")
			return
		}
		if ev.Kind == Pause {
			c.paused = true
			return
		}
		if c.paused {
			c.paused = false
			if c.last.Before(st.now) {
				c.last = st.now
			}
		}
	}
}

// load makes defs the declared jobs (at a start or reload): a cron job
// without a cursor gets one at now (it does not catch up on the past); a
// one-off job whose run at its at time does not exist gets it.
func (st *state) load(defs []*jobs.Definition) {
	st.defs = map[string]*jobs.Definition{}
	for _, d := range defs {
		st.defs[d.Name] = d
		if d.Schedule != nil && st.cursors[d.Name] == nil {
			st.cursors[d.Name] = &cursor{last: st.now}
		}
	}
	for _, d := range defs {
		if d.At.IsZero() {
			continue
		}
		key := RunKey{Job: d.Name, Trigger: jobs.TriggerOnce, At: d.At}
		if st.byKey[key.String()] != nil {
			continue
		}
		nb, na := d.At, d.NotAfter
		if nb.Before(d.NotBefore) {
			nb = d.NotBefore
		}
		st.newRun(key, d, nb, na, "")
	}
}

// trigger makes a manual run (docs: schedulerd trigger): its window is
// the asked one (now, and none, by default) within the job's life; a
// window that cannot open, or whose not_after has passed, is refused, and
// so is a dedup id that a non-terminal run of the job has.
func (st *state) trigger(ev Event, refuse func(string)) {
	d := st.defs[ev.Job]
	if d == nil {
		refuse("unknown job")
		return
	}
	nb, na := ev.NotBefore, ev.NotAfter
	if nb.IsZero() {
		nb = st.now
	}
	if !d.NotBefore.IsZero() && nb.Before(d.NotBefore) {
		nb = d.NotBefore
	}
	if !d.NotAfter.IsZero() && (na.IsZero() || d.NotAfter.Before(na)) {
		na = d.NotAfter
	}
	if !na.IsZero() && (!na.After(nb) || !na.After(st.now)) {
		refuse("window")
		return
	}
	if ev.DedupID != "" {
		for _, r := range st.runs {
			if r.key.Job == ev.Job && r.dedup == ev.DedupID && r.active() {
				refuse("duplicate dedup id")
				return
			}
		}
	}
	st.newRun(RunKey{Job: ev.Job, Trigger: jobs.TriggerManual, Label: ev.Label}, d, nb, na, ev.DedupID)
}

func (st *state) newRun(key RunKey, d *jobs.Definition, nb, na time.Time, dedup string) *run {
	st.seq++
	r := &run{key: key, created: st.now, seq: st.seq, nb: nb, na: na, firstNB: nb, firstNA: na,
		status: jobs.StatusPending, retry: d.Retry, dedup: dedup}
	st.runs = append(st.runs, r)
	st.byKey[key.String()] = r
	st.trace("run %s made: not_before %s not_after %s", key, nb.UTC().Format("15:04:05.000000"), na.UTC().Format("15:04:05.000000"))
	return r
}

// inLife reports whether the tick t of d is part of the job's life: not
// before its not_before, and with a start before its not_after.
func inLife(d *jobs.Definition, t time.Time) bool {
	if !d.NotBefore.IsZero() && t.Before(d.NotBefore) {
		return false
	}
	return d.NotAfter.IsZero() || tickStart(d, t).Before(d.NotAfter)
}

// tickStart is when the run of d's tick t may start: t, delayed by the
// job's jitter (docs/configuration.md, Jitter).
func tickStart(d *jobs.Definition, t time.Time) time.Time {
	if d.Jitter <= 0 || d.Schedule == nil {
		return t
	}
	bound := d.Jitter
	if next := d.Schedule.Next(t); !next.IsZero() && next.Sub(t) < bound {
		bound = next.Sub(t)
	}
	return t.Add(jitterDelay(d.Name, t, bound))
}

// jitterDelay is the documented pure function: the first 8 bytes of the
// SHA-256 of the name, a 0 byte and the tick as 8 bytes of big-endian Unix
// microseconds, read as a big-endian unsigned integer u, give
// floor(u × b / 2^64) milliseconds, b being the bound in whole
// milliseconds.
func jitterDelay(name string, tick time.Time, bound time.Duration) time.Duration {
	b := int64(bound / time.Millisecond)
	if b <= 0 {
		return 0
	}
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(tick.UnixMicro()))
	h.Write(ts[:])
	u := new(big.Int).SetBytes(h.Sum(nil)[:8])
	u.Mul(u, big.NewInt(b))
	u.Rsh(u, 64)
	return time.Duration(u.Int64()) * time.Millisecond
}

// window is the start window of the run of d's tick t: from its start
// (tickStart, never before the job's not_before) to the job's not_after,
// tightened to t + start_deadline.
func window(d *jobs.Definition, t time.Time) (nb, na time.Time) {
	nb, na = tickStart(d, t), d.NotAfter
	if !d.NotBefore.IsZero() && nb.Before(d.NotBefore) {
		nb = d.NotBefore
	}
	if d.StartDeadline > 0 {
		if dl := t.Add(d.StartDeadline); na.IsZero() || dl.Before(na) {
			na = dl
		}
	}
	return nb, na
}

// activeRuns returns the active runs of a job. A waiting run whose
// not_after has come is not active: it is expired.
func (st *state) activeRuns(job string) []*run {
	var out []*run
	for _, r := range st.runs {
		if r.key.Job == job && r.active() {
			out = append(out, r)
		}
	}
	return out
}

// fire fires, for every declared cron job, the ticks that are due and
// the tick due within FireLead, and reports whether it did anything.
func (st *state) fire() bool {
	changed := false
	for _, name := range sortedKeys(st.cursors) {
		d, c := st.defs[name], st.cursors[name]
		if d == nil || d.Schedule == nil || c.paused {
			continue
		}
		if !c.ahead.IsZero() {
			if c.ahead.After(st.now) {
				continue
			}
			// The tick fired ahead has come.
			c.ahead, c.claimLooked = time.Time{}, false
		}
		if !c.deferred.IsZero() && !c.deferred.After(st.now) {
			c.deferred = time.Time{} // due now
		}
		var due []time.Time
		for t := d.Schedule.Next(c.last); !t.IsZero() && !t.After(st.now); t = d.Schedule.Next(t) {
			due = append(due, t)
		}
		if len(due) > 0 {
			st.fireTicks(d, c, due)
			changed = true
			continue
		}
		next := d.Schedule.Next(c.last)
		if next.IsZero() || next.After(st.now.Add(FireLead)) || next.Equal(c.deferred) {
			continue
		}
		// Ahead of its tick (docs/firing-ahead.md): a skip or replace job
		// with an active run has its tick judged at its time.
		if inLife(d, next) && (d.Overlap == jobs.OverlapSkip || d.Overlap == jobs.OverlapReplace) && len(st.activeRuns(name)) > 0 {
			c.deferred = next
			continue
		}
		c.ahead, c.last, changed = next, next, true
		if !inLife(d, next) {
			continue
		}
		nb, na := window(d, next)
		r := st.newRun(RunKey{Job: name, Trigger: jobs.TriggerSchedule, At: next}, d, nb, na, "")
		r.aheadTick = next
	}
	return changed
}

// fireTicks handles the due ticks of a cron job (docs/guarantees.md 2,
// docs/configuration.md catchup and overlap): a tick late by at most
// misfire_grace is simply late; one missed for longer follows catchup,
// unless older than catchup_window (skipped); ticks outside the job's
// life are neither fired nor counted. The ticks that fire are then judged
// one after another against the job's active runs by its overlap policy.
func (st *state) fireTicks(d *jobs.Definition, c *cursor, due []time.Time) {
	var missed, onTime []time.Time
	skipped := 0
	for _, t := range due {
		late := st.now.Sub(t)
		switch {
		case !inLife(d, t):
		case late <= d.MisfireGrace:
			onTime = append(onTime, t)
		case late > d.CatchupWindow:
			skipped++
		default:
			missed = append(missed, t)
		}
	}
	keep := 0
	switch d.Catchup {
	case jobs.CatchupAll:
		keep = max(d.CatchupMax, 1)
	case jobs.CatchupLatest:
		keep = 1
		if len(onTime) > 0 {
			keep = 0
		}
	}
	if len(missed) > keep {
		skipped += len(missed) - keep
		missed = missed[len(missed)-keep:]
	}
	fire := append(missed, onTime...)
	c.last = due[len(due)-1]
	active := st.activeRuns(d.Name)
	switch d.Overlap {
	case jobs.OverlapSkip:
		if len(active) > 0 {
			skipped += len(fire)
			fire = nil
		} else if len(fire) > 1 {
			skipped += len(fire) - 1
			fire = fire[:1]
		}
	case jobs.OverlapReplace:
		if len(fire) > 0 {
			for _, r := range active {
				r.status, r.reason = jobs.StatusCancelled, jobs.ReasonReplaced
			}
			skipped += len(fire) - 1
			fire = fire[len(fire)-1:]
		}
	}
	st.skipped[d.Name] += skipped
	if skipped > 0 {
		st.trace("job %s: %d ticks skipped", d.Name, skipped)
	}
	for _, t := range fire {
		nb, na := window(d, t)
		st.newRun(RunKey{Job: d.Name, Trigger: jobs.TriggerSchedule, At: t}, d, nb, na, "")
	}
}

// limit is how many runs of d may run at once: max_concurrency, and 1 for
// any overlap policy but allow.
func limit(d *jobs.Definition) int {
	l := d.MaxConcurrency
	if d.Overlap != jobs.OverlapAllow && (l == 0 || l > 1) {
		l = 1
	}
	return l
}

func (st *state) free() int {
	n := 0
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.owner == st.incarnation {
			n++
		}
	}
	return st.set.Concurrency - n
}

func (st *state) runningOf(job string) int {
	n := 0
	for _, r := range st.runs {
		if r.status == jobs.StatusRunning && r.key.Job == job {
			n++
		}
	}
	return n
}

// claimAhead claims, ClaimLead before a tick fired ahead, the runs of the
// jobs whose tick it is (docs/firing-ahead.md): only when the free slots
// take the whole round; their attempts start at the tick.
func (st *state) claimAhead() bool {
	byTick := map[int64][]string{} // by the tick's Unix microseconds
	for _, name := range sortedKeys(st.cursors) {
		c := st.cursors[name]
		if c.ahead.IsZero() || c.claimLooked || c.paused || st.defs[name] == nil {
			continue
		}
		if c.ahead.Add(-ClaimLead).After(st.now) || !c.ahead.After(st.now) {
			continue
		}
		byTick[c.ahead.UnixMicro()] = append(byTick[c.ahead.UnixMicro()], name)
	}
	if len(byTick) == 0 {
		return false
	}
	changed := false
	free := st.free()
	for _, at := range sortedKeys64(byTick) {
		tick := time.UnixMicro(at).UTC()
		names := byTick[at]
		for _, name := range names {
			st.cursors[name].claimLooked = true
		}
		st.trace("claim ahead round %s: %v, %d free", tick.UTC().Format("15:04:05.000"), names, free)
		if len(names) > free {
			continue
		}
		n := st.claimAt(tick, min(len(names), free), names)
		free -= n
		changed = changed || n > 0
	}
	return changed
}

// claim starts the due runs of declared jobs up to the free slots.
func (st *state) claim() bool {
	return st.claimAt(st.now, st.free(), nil) > 0
}

// claimAt claims, at the time at (now, or a tick claimed ahead), up to
// most due runs of the declared jobs (of only, when set), in the order of
// their not_before, then of their making, within each job's limit, and
// returns how many it claimed. A run past its not_after is not due.
func (st *state) claimAt(at time.Time, most int, only []string) int {
	if most <= 0 || !st.up {
		return 0
	}
	var cands []*run
	for _, r := range st.runs {
		d := st.defs[r.key.Job]
		if d == nil || !r.waiting() || r.nb.After(at) || (!r.na.IsZero() && !r.na.After(at)) {
			continue
		}
		if only != nil && !slices.Contains(only, r.key.Job) {
			continue
		}
		cands = append(cands, r)
	}
	slices.SortFunc(cands, func(a, b *run) int {
		if c := a.nb.Compare(b.nb); c != 0 {
			return c
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	if st.endedAt.Equal(st.now) && len(st.endedAtLimit) > 0 && len(cands) > most {
		for _, r := range cands {
			if st.endedAtLimit[r.key.Job] {
				st.ambiguous(st.now, "an attempt of %s ends at its limit while %d runs compete for %d slots", r.key.Job, len(cands), most)
				break
			}
		}
	}
	var claimed []*run
	for _, r := range cands {
		d := st.defs[r.key.Job]
		full := len(claimed) >= most
		jobFull := limit(d) > 0 && st.runningOf(r.key.Job) >= limit(d)
		if full || jobFull {
			// A run that the order does not tell from one claimed: which of
			// the two the engine takes is left to chance.
			for _, c := range claimed {
				if c.nb.Equal(r.nb) && c.created.Equal(r.created) && (!jobFull || c.key.Job == r.key.Job) {
					st.ambiguous(st.now, "runs %s and %s tie for a slot", c.key, r.key)
				}
			}
			continue
		}
		r.status = jobs.StatusRunning
		r.attempt++
		r.owner = st.incarnation
		r.start = at
		r.starts = append(r.starts, at)
		if at.Equal(st.now) {
			st.begin(r)
		} else {
			r.end, r.timeoutAt = time.Time{}, time.Time{}
		}
		claimed = append(claimed, r)
		st.trace("run %s claimed: attempt %d starts %s", r.key, r.attempt, at.UTC().Format("15:04:05.000000"))
	}
	return len(claimed)
}

// expire cancels (reason expired) the waiting runs whose not_after has
// come, of declared jobs or not.
func (st *state) expire() bool {
	changed := false
	for _, r := range st.runs {
		if r.waiting() && !r.na.IsZero() && !r.na.After(st.now) {
			r.status, r.reason = jobs.StatusCancelled, jobs.ReasonExpired
			changed = true
			st.trace("run %s expired", r.key)
		}
	}
	return changed
}

func sortedKeys64[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
