package main

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// Violation is one broken promise that the checker found.
type Violation struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// The kinds of violation, in the order the summary lists them.
const (
	// A tick with two runs, or executed by two runs.
	vDuplicate = "duplicate"
	// Ticks of a cron job that have no run beyond those its cursor
	// counts as skipped (or more counted skipped than missing).
	vMissingTick = "missing-tick"
	// Two attempts of a run that overlapped: in the store, or as
	// processes beyond what fencing allows; an attempt executed twice.
	vOverlap = "overlap"
	// A trigger answered 2xx whose run the store does not have.
	vLostTrigger = "lost-trigger"
	// A notification of the store that the receiver never took.
	vUndelivered = "undelivered"
	// A run left pending, running or retrying.
	vNonTerminal = "non-terminal"
	// An execution that the store does not account for, or a completed
	// attempt that no process completed.
	vExecution = "execution"
	// An attempt started before its run's not_before or after its
	// not_after, or a run whose window is not the one asked for.
	vWindow = "window"
	// A dedup id with two active runs at once, or a trigger refused as a
	// duplicate while no active run had its id.
	vDedup = "dedup"
	// A delivery the store never wrote, or a bad signature.
	vNotification = "notification"
	// A node that exited without being asked to.
	vCrash = "crash"
)

var violationKinds = []string{vDuplicate, vMissingTick, vOverlap, vLostTrigger, vUndelivered, vNonTerminal,
	vExecution, vWindow, vDedup, vNotification, vCrash}

// Allowances of the checker, beyond the settings in Meta.
const (
	// fenceSlack is how much later than the documented bound a fenced
	// execution may end: the time to notice the fence, signal the
	// process group and for the witness to write its line, on a loaded
	// machine.
	fenceSlack = 2 * time.Second
	// storeSlack is the difference the store's clock readings of two
	// transactions may show against the order they committed in: now()
	// is the start of a transaction, not its commit.
	storeSlack = 100 * time.Millisecond
	// dedupSlack is storeSlack for the times of runs that share a dedup
	// id: a run's created_at is read when the trigger comes, and its
	// insert may wait that long for a connection on a loaded machine,
	// while the end of the run before commits. (The store keeps
	// one active run per dedup id with a unique index; this check sees
	// what it let through.)
	dedupSlack = time.Second
)

// Report is what the checker found, with the figures of the summary.
type Report struct {
	Violations []Violation
	// Ticks is how many ticks of the cron jobs were checked (each with a
	// run or counted skipped); Skipped how many of them were skipped.
	Ticks, Skipped int
	// Fenced is how many processes of an attempt ran on past the start
	// of a later attempt of their run within the bounds of fencing.
	Fenced int
}

// Count returns how many violations are of kind.
func (r *Report) Count(kind string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == kind {
			n++
		}
	}
	return n
}

type checker struct {
	h *History
	r Report

	runs     map[string]*Run
	attempts map[string][]Attempt // by run id, by number
	execs    map[string][]Exec    // by run id, by start
	triggers map[string]*Trigger  // acknowledged, by run id
	jobs     map[string]*JobSpec
}

// Check checks a history against the promises of docs/guarantees.md.
func Check(h *History) *Report {
	c := &checker{h: h, runs: map[string]*Run{}, attempts: map[string][]Attempt{}, execs: map[string][]Exec{},
		triggers: map[string]*Trigger{}, jobs: map[string]*JobSpec{}}
	for i := range h.Runs {
		c.runs[h.Runs[i].ID] = &h.Runs[i]
	}
	for _, a := range h.Attempts {
		c.attempts[a.RunID] = append(c.attempts[a.RunID], a)
	}
	for id := range c.attempts {
		slices.SortFunc(c.attempts[id], func(a, b Attempt) int { return a.Number - b.Number })
	}
	for _, e := range h.Execs {
		c.execs[e.RunID] = append(c.execs[e.RunID], e)
	}
	for id := range c.execs {
		slices.SortFunc(c.execs[id], func(a, b Exec) int { return a.Start.Compare(b.Start) })
	}
	for i := range h.Triggers {
		if t := &h.Triggers[i]; t.Outcome == outcomeOK {
			c.triggers[t.RunID] = t
		}
	}
	for i := range h.Jobs {
		c.jobs[h.Jobs[i].Name] = &h.Jobs[i]
	}
	c.duplicates()
	c.ticks()
	c.storeOverlaps()
	c.executions()
	c.triggersLost()
	c.notifications()
	c.terminal()
	c.windows()
	c.dedup()
	c.crashes()
	sort.SliceStable(c.r.Violations, func(i, j int) bool {
		return slices.Index(violationKinds, c.r.Violations[i].Kind) < slices.Index(violationKinds, c.r.Violations[j].Kind)
	})
	return &c.r
}

func (c *checker) fail(kind, format string, args ...any) {
	c.r.Violations = append(c.r.Violations, Violation{Kind: kind, Message: fmt.Sprintf(format, args...)})
}

func ts(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// duplicates: one run per job and tick in the store, and one run id per
// tick among the processes that ran.
func (c *checker) duplicates() {
	byTick := map[string][]string{}
	for _, r := range c.h.Runs {
		if r.Trigger == "schedule" {
			k := r.Job + " " + r.ScheduledAt.UTC().Format(time.RFC3339Nano)
			byTick[k] = append(byTick[k], r.ID)
		}
	}
	for _, k := range sortedKeys(byTick) {
		if ids := byTick[k]; len(ids) > 1 {
			c.fail(vDuplicate, "%s: %d runs in the store (%s)", k, len(ids), strings.Join(ids, ", "))
		}
	}
	execd := map[string]map[string]bool{}
	for _, e := range c.h.Execs {
		if r := c.runs[e.RunID]; e.Tick == "" || (r != nil && r.Trigger != "schedule") {
			continue
		}
		k := e.Job + " " + e.Tick
		if execd[k] == nil {
			execd[k] = map[string]bool{}
		}
		execd[k][e.RunID] = true
	}
	for _, k := range sortedKeys(execd) {
		if len(execd[k]) > 1 {
			c.fail(vDuplicate, "%s: executed by %d runs (%s)", k, len(execd[k]), strings.Join(sortedKeys(execd[k]), ", "))
		}
	}
}

// ticks: every tick of a cron job from its first run to its cursor has a
// run or is counted skipped on the cursor, and no more are counted skipped
// than have no run.
func (c *checker) ticks() {
	cursors := map[string]Cursor{}
	for _, cu := range c.h.Cursors {
		cursors[cu.Job] = cu
	}
	for _, j := range c.h.Jobs {
		if j.Schedule == "" {
			continue
		}
		loc, err := time.LoadLocation(cmp.Or(j.Timezone, "UTC"))
		if err != nil {
			c.fail(vMissingTick, "%s: timezone %q: %v", j.Name, j.Timezone, err)
			continue
		}
		sched, err := schedule.Parse(j.Schedule, loc)
		if err != nil {
			c.fail(vMissingTick, "%s: schedule %q: %v", j.Name, j.Schedule, err)
			continue
		}
		ran := map[int64]bool{}
		var first, last time.Time
		for _, r := range c.h.Runs {
			if r.Job != j.Name || r.Trigger != "schedule" {
				continue
			}
			ran[r.ScheduledAt.UnixNano()] = true
			if first.IsZero() || r.ScheduledAt.Before(first) {
				first = r.ScheduledAt
			}
			if r.ScheduledAt.After(last) {
				last = r.ScheduledAt
			}
		}
		cu, ok := cursors[j.Name]
		switch {
		case first.IsZero():
			c.fail(vMissingTick, "%s: no run of any tick", j.Name)
			continue
		case !ok:
			c.fail(vMissingTick, "%s: no cursor in the store", j.Name)
			continue
		}
		if cu.Last.After(last) {
			last = cu.Last
		}
		var missing []time.Time
		n := 0
		for t := first; !t.After(last); t = sched.Next(t) {
			n++
			if !ran[t.UnixNano()] {
				missing = append(missing, t)
			}
		}
		c.r.Ticks += n
		c.r.Skipped += len(missing)
		switch {
		case int64(len(missing)) > cu.Skipped:
			c.fail(vMissingTick, "%s: %d of its %d ticks from %s to %s have no run, and its cursor counts %d skipped; the first without a run: %s",
				j.Name, len(missing), n, ts(first), ts(last), cu.Skipped, tickList(missing))
		case int64(len(missing)) < cu.Skipped:
			c.fail(vMissingTick, "%s: its cursor counts %d ticks skipped, but only %d of its %d ticks from %s to %s have no run",
				j.Name, cu.Skipped, len(missing), n, ts(first), ts(last))
		}
	}
}

func tickList(ts []time.Time) string {
	var s []string
	for i, t := range ts {
		if i == 5 {
			s = append(s, "...")
			break
		}
		s = append(s, t.UTC().Format(time.RFC3339))
	}
	return strings.Join(s, ", ")
}

// storeOverlaps: the attempts of a run, as the store records them, follow
// one another.
func (c *checker) storeOverlaps() {
	for _, id := range sortedKeys(c.attempts) {
		as := c.attempts[id]
		for i := 1; i < len(as); i++ {
			a, b := as[i-1], as[i]
			if a.FinishedAt == nil {
				c.fail(vOverlap, "run %s: attempt %d has no end in the store, and attempt %d started at %s", id, a.Number, b.Number, ts(b.StartedAt))
				continue
			}
			if b.StartedAt.Before(a.FinishedAt.Add(-storeSlack)) {
				c.fail(vOverlap, "run %s: attempt %d started at %s in the store, before attempt %d ended at %s",
					id, b.Number, ts(b.StartedAt), a.Number, ts(*a.FinishedAt))
			}
		}
	}
}

// executions: every process that ran is an attempt the store records, on
// the node it records; no attempt ran twice; an attempt's process ended
// before the next attempt's started unless its node was cut off or frozen
// and fenced as documented (excuse); and every attempt the store calls
// completed had a process that exited 0.
func (c *checker) executions() {
	for _, id := range sortedKeys(c.execs) {
		es := c.execs[id]
		r := c.runs[id]
		if r == nil {
			c.fail(vExecution, "run %s (%s) was executed (attempt %d on %s at %s) but is not in the store", id, es[0].Job, es[0].Attempt, es[0].Node, ts(es[0].Start))
			continue
		}
		seen := map[int]Exec{}
		for _, e := range es {
			if prev, ok := seen[e.Attempt]; ok {
				c.fail(vOverlap, "run %s: attempt %d executed twice: on %s at %s and on %s at %s", id, e.Attempt, prev.Node, ts(prev.Start), e.Node, ts(e.Start))
				continue
			}
			seen[e.Attempt] = e
			a, ok := c.attempt(id, e.Attempt)
			switch {
			case !ok:
				c.fail(vExecution, "run %s: attempt %d executed on %s at %s, and the store has no such attempt", id, e.Attempt, e.Node, ts(e.Start))
			case a.Node != e.Node:
				c.fail(vExecution, "run %s: attempt %d executed on %s at %s, and the store says it was %s's", id, e.Attempt, e.Node, ts(e.Start), a.Node)
			}
		}
		for _, e := range es {
			end, ok := c.end(e)
			if !ok {
				c.fail(vExecution, "run %s: attempt %d on %s, started at %s, never ended: no end line, and its node was not killed", id, e.Attempt, e.Node, ts(e.Start))
				continue
			}
			// Every later attempt, also one that started before e did
			// (e is then a stale attempt started late).
			for _, f := range es {
				if f.Attempt <= e.Attempt || !f.Start.Before(end) {
					continue
				}
				if _, ok := c.excuse(e, end, f.Start); ok {
					c.r.Fenced++
					continue
				}
				c.fail(vOverlap, "run %s: attempt %d on %s ran from %s to %s, and attempt %d started on %s at %s",
					id, e.Attempt, e.Node, ts(e.Start), ts(end), f.Attempt, f.Node, ts(f.Start))
			}
		}
	}
	for _, id := range sortedKeys(c.attempts) {
		for _, a := range c.attempts[id] {
			if a.Status != "completed" {
				continue
			}
			if !slices.ContainsFunc(c.execs[id], func(e Exec) bool { return e.Attempt == a.Number && e.Code != nil && *e.Code == 0 }) {
				c.fail(vExecution, "run %s: attempt %d completed on %s in the store, and no process of it exited 0", id, a.Number, a.Node)
			}
		}
	}
}

func (c *checker) attempt(run string, n int) (Attempt, bool) {
	for _, a := range c.attempts[run] {
		if a.Number == n {
			return a, true
		}
	}
	return Attempt{}, false
}

// end returns when an execution ended: its end line, or else the first
// kill (or crash) of its node after it started, as a killed node's
// processes die with it (PR_SET_PDEATHSIG).
func (c *checker) end(e Exec) (time.Time, bool) {
	if e.End != nil {
		return *e.End, true
	}
	var end time.Time
	for _, f := range c.h.Faults {
		if f.Kind == "kill" && f.Node == e.Node && !f.Start.Before(e.Start) && (end.IsZero() || f.Start.Before(end)) {
			end = f.Start
		}
	}
	for _, x := range c.h.Exits {
		if x.Node == e.Node && !x.At.Before(e.Start) && (end.IsZero() || x.At.Before(end)) {
			end = x.At
		}
	}
	return end, !end.IsZero()
}

// excuse finds the fault that lets execution e, of an earlier attempt,
// run until end although a later attempt started at later: its node was
// frozen (stop) or cut off from the store (a partition, a restart or a
// failover of PostgreSQL) from before later, e started before the fault
// healed, and e ended within the bound docs/cluster.md#fencing gives. A
// node cut off fences itself once its heartbeat has failed for
// inactive_threshold - heartbeat_interval and stops its attempts
// (SIGTERM, SIGKILL after kill_grace); a frozen node stops them when it
// wakes and finds itself fenced, at its next heartbeat.
func (c *checker) excuse(e Exec, end, later time.Time) (Fault, bool) {
	grace := time.Duration(0)
	if j := c.jobs[e.Job]; j != nil {
		grace = time.Duration(j.KillGrace)
	}
	hb, inactive := time.Duration(c.h.Meta.Heartbeat), time.Duration(c.h.Meta.Inactive)
	for _, f := range c.h.Faults {
		if f.Start.After(later) || e.Start.After(f.End) {
			continue
		}
		var limit time.Time
		switch {
		case f.Kind == "stop" && f.Node == e.Node:
			limit = f.End.Add(hb + grace + fenceSlack)
		case f.Kind == "partition" && f.Node == e.Node, f.Kind == "pg-restart", f.Kind == "failover":
			limit = f.Start.Add(inactive + grace + fenceSlack)
		default:
			continue
		}
		if !end.After(limit) {
			return f, true
		}
	}
	return Fault{}, false
}

// triggersLost: every trigger answered 2xx has its run, of its job, with
// the dedup id and the not_after it asked for.
func (c *checker) triggersLost() {
	for _, t := range c.h.Triggers {
		if t.Outcome != outcomeOK {
			continue
		}
		r := c.runs[t.RunID]
		switch {
		case r == nil:
			c.fail(vLostTrigger, "trigger of %s through %s at %s was answered with run %q, which the store does not have", t.Job, t.Node, ts(t.Sent), t.RunID)
		case r.Job != t.Job || r.DedupID != t.DedupID:
			c.fail(vLostTrigger, "trigger of %s (dedup id %q) through %s at %s was answered with run %s, which is of %s (dedup id %q)",
				t.Job, t.DedupID, t.Node, ts(t.Sent), r.ID, r.Job, r.DedupID)
		case !sameTime(t.NotAfter, r.NotAfter):
			c.fail(vWindow, "run %s: not_after %s, and its trigger asked for %s", r.ID, timeOrNone(r.NotAfter), timeOrNone(t.NotAfter))
		}
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	d := a.Sub(*b)
	return d > -time.Millisecond && d < time.Millisecond
}

func timeOrNone(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return ts(*t)
}

// notifications: every notification the store holds was delivered, and
// the receiver took it (answered 200); the receiver took nothing the store
// did not write, and every body was signed.
func (c *checker) notifications() {
	took := map[string]bool{}
	for _, d := range c.h.Deliveries {
		took[d.ID] = true
	}
	known := map[string]bool{}
	for _, n := range c.h.Notifications {
		known[n.ID] = true
		switch {
		case n.State != "delivered":
			c.fail(vUndelivered, "notification %s (%s of %s, run %s) is %s after %d attempts: %s", n.ID, n.Event, n.Job, n.RunID, n.State, n.Attempts, n.LastError)
		case !took[n.ID]:
			c.fail(vUndelivered, "notification %s (%s of %s, run %s) is delivered in the store, and the receiver never took it", n.ID, n.Event, n.Job, n.RunID)
		}
	}
	bad := map[string]bool{}
	for _, d := range c.h.Deliveries {
		if !known[d.ID] && !bad[d.ID] {
			bad[d.ID] = true
			c.fail(vNotification, "the receiver took notification %s (%s of %s) at %s, which the store does not have", d.ID, d.Event, d.Job, ts(d.At))
		}
		if !d.SignatureOK {
			c.fail(vNotification, "notification %s (%s of %s) at %s: bad signature", d.ID, d.Event, d.Job, ts(d.At))
		}
	}
}

func terminal(status string) bool {
	return status == "completed" || status == "cancelled" || status == "dead_letter"
}

// terminal: every run ended.
func (c *checker) terminal() {
	for _, r := range c.h.Runs {
		if !terminal(r.Status) {
			c.fail(vNonTerminal, "run %s of %s (%s, made at %s) is %s", r.ID, r.Job, r.Trigger, ts(r.CreatedAt), r.Status)
		}
	}
}

// windows: no attempt starts, in the store or as a process, before the
// run's first not_before (the tick of a cron run, the not_before its
// trigger asked for), and none starts in the store after its not_after.
func (c *checker) windows() {
	for _, r := range c.h.Runs {
		var first time.Time
		switch {
		case r.Trigger == "schedule":
			first = r.ScheduledAt
		case c.triggers[r.ID] != nil && c.triggers[r.ID].NotBefore != nil:
			first = *c.triggers[r.ID].NotBefore
		}
		for _, a := range c.attempts[r.ID] {
			if a.StartedAt.Before(first.Truncate(time.Microsecond)) {
				c.fail(vWindow, "run %s of %s: attempt %d started at %s in the store, before its not_before %s", r.ID, r.Job, a.Number, ts(a.StartedAt), ts(first))
			}
			if r.NotAfter != nil && a.StartedAt.After(*r.NotAfter) {
				c.fail(vWindow, "run %s of %s: attempt %d started at %s in the store, after its not_after %s", r.ID, r.Job, a.Number, ts(a.StartedAt), ts(*r.NotAfter))
			}
		}
		for _, e := range c.execs[r.ID] {
			if e.Start.Before(first) {
				c.fail(vWindow, "run %s of %s: attempt %d's process started at %s, before its not_before %s", r.ID, r.Job, e.Attempt, ts(e.Start), ts(first))
			}
		}
	}
}

// dedup: the runs of a job that share a dedup id follow one another (each
// made once the one before was terminal), and a trigger refused as a
// duplicate met a run with its id that was active at the time.
func (c *checker) dedup() {
	byID := map[string][]*Run{}
	for i := range c.h.Runs {
		if r := &c.h.Runs[i]; r.DedupID != "" {
			byID[r.Job+" "+r.DedupID] = append(byID[r.Job+" "+r.DedupID], r)
		}
	}
	for _, k := range sortedKeys(byID) {
		rs := byID[k]
		slices.SortFunc(rs, func(a, b *Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
		for i := 1; i < len(rs); i++ {
			a, b := rs[i-1], rs[i]
			if a.FinishedAt == nil || b.CreatedAt.Before(a.FinishedAt.Add(-dedupSlack)) {
				c.fail(vDedup, "%s: run %s was made at %s while run %s (made at %s, ended %s) was active",
					k, b.ID, ts(b.CreatedAt), a.ID, ts(a.CreatedAt), timeOrNone(a.FinishedAt))
			}
		}
	}
	for _, t := range c.h.Triggers {
		if t.Outcome != outcomeDuplicate {
			continue
		}
		active := slices.ContainsFunc(byID[t.Job+" "+t.DedupID], func(r *Run) bool {
			return !r.CreatedAt.After(t.Answered.Add(dedupSlack)) && (r.FinishedAt == nil || !r.FinishedAt.Before(t.Sent.Add(-dedupSlack)))
		})
		if !active {
			c.fail(vDedup, "trigger of %s with dedup id %q through %s at %s was refused as a duplicate, and no run with that id was active then",
				t.Job, t.DedupID, t.Node, ts(t.Sent))
		}
	}
}

// crashes: no node exited on its own.
func (c *checker) crashes() {
	for _, x := range c.h.Exits {
		c.fail(vCrash, "%s exited at %s (%s): %s", x.Node, ts(x.At), x.Status, x.Log)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
