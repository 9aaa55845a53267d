package model

import (
	"fmt"
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
	// Jump steps the wall clock by Delta at At (the time before the
	// step), as an operator's `date -s` or NTP at boot does.
	Jump
)

func (k Kind) String() string {
	return [...]string{"?", "start", "stop", "kill", "reload", "trigger", "cancel", "pause", "resume", "jump"}[k]
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
	DedupID             string        // Trigger
	NotBefore, NotAfter time.Time     // Trigger; zero: now, and none
	Delta               time.Duration // Jump
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
	case Jump:
		return fmt.Sprintf("%s jump %+v", at, e.Delta)
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
			if r.end.IsZero() {
				consider(r.start) // claimed ahead: it begins at its tick
			}
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
