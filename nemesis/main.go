// Command nemesis runs a cluster of three schedulerd nodes on PostgreSQL
// (a primary and a synchronous standby) under faults for a while, then
// checks what the store and the processes say happened against the
// guarantees of docs/guarantees.md. `make nemesis DURATION=30m` runs it;
// docs/development.md says how, and what it does.
//
// The faults, one at a time and each healed before the next, are chosen
// by a generator whose seed is printed (-seed replays the choices): a node
// SIGKILLed and restarted, SIGSTOPped past the inactive threshold, cut off
// from PostgreSQL by its proxy; PostgreSQL restarted, or failed over to its
// standby (the old primary is then rebuilt as the new standby); the disk
// under a node's state directory full; the webhook receiver down or
// hanging; answers of PostgreSQL to a node lost, its connection closed
// after the server carried a statement out. Cron jobs fire every second or so, and a load of triggers comes
// through the nodes' sockets. Afterwards the trigger load stops, the cron
// jobs are paused, everything settles, the nodes stop, and the checker
// reads the store, the jobs' witness file and the receiver's log. The
// history goes to a file of JSON lines; the last line of the output is the
// summary:
//
//	nemesis: N faults (kill N, stop N, ...), N ticks, N runs, N violations
//
// It exits 1 on any violation, and 2 when the run itself could not be
// made (no PostgreSQL, a fault that could not be done). With -seeds it
// replays the seeds of a file (those that once failed), then a new one,
// each its own cluster for a share of -duration: make nemesis-ci, which
// make test runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	duration time.Duration
	seed     int64
	settle   time.Duration
	bin      string
	dir      string
	check    string
	kinds    string
	seeds    string
}

// allKinds is -kinds's default: every kind of fault.
var allKinds = strings.Join(faultKinds, ",")

// replay is the command that replays the run of o.
func (o options) replay() string {
	cmd := fmt.Sprintf("make nemesis SEED=%d DURATION=%s", o.seed, o.duration)
	if o.kinds != allKinds {
		cmd += " KINDS=" + o.kinds
	}
	return cmd
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nemesis", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.DurationVar(&o.duration, "duration", 3*time.Minute, "how long the faults and the load last")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the fault choices (0: a new one, printed)")
	fs.DurationVar(&o.settle, "settle", 3*time.Minute, "after the load, wait for every run to end and every notification to be delivered "+
		"until nothing has moved for this long (no run ended, no delivery)")
	fs.StringVar(&o.bin, "bin", "", "the schedulerd binary (default: go build ./cmd/schedulerd into the run's directory)")
	fs.StringVar(&o.dir, "dir", "", "the run's directory: logs, witness, history (default: a new one under $TMPDIR)")
	fs.StringVar(&o.check, "check", "", "check the history file of an earlier run again, and print its summary")
	fs.StringVar(&o.kinds, "kinds", allKinds, "the kinds of fault to pick from, separated by commas")
	fs.StringVar(&o.seeds, "seeds", "", "replay the seeds of this file (lines \"SEED [KINDS]\"), then a new seed (or -seed), "+
		"sharing -duration evenly; what make nemesis-ci runs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nemesis: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.check != "" {
		return recheck(o.check, stdout, stderr)
	}
	if o.duration <= 0 {
		fmt.Fprintln(stderr, "nemesis: -duration must be positive")
		return 2
	}
	if err := checkKinds(o.kinds); err != nil {
		fmt.Fprintf(stderr, "nemesis: -kinds: %v\n", err)
		return 2
	}
	if o.seeds != "" {
		return replaySeeds(ctx, o, stdout, stderr)
	}
	if o.seed == 0 {
		o.seed = newSeed()
	}
	code, _ := once(ctx, o, stdout, stderr)
	return code
}

// newSeed returns a seed for a new run.
func newSeed() int64 {
	return time.Now().UnixNano() & (1<<53 - 1)
}

// checkKinds checks a list of fault kinds separated by commas.
func checkKinds(kinds string) error {
	for _, k := range strings.Split(kinds, ",") {
		if !slices.Contains(faultKinds, k) {
			return fmt.Errorf("unknown kind %q (kinds: %s)", k, strings.Join(faultKinds, ", "))
		}
	}
	return nil
}

// once makes the run of o and checks it. It returns the exit code (0, 1
// with violations, 2 when the run could not be made) and the run's
// figures (nil when it could not be made).
func once(ctx context.Context, o options, stdout, stderr io.Writer) (int, *figures) {
	h, path, err := runCluster(ctx, o, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "nemesis: %v\n", err)
		fmt.Fprintf(stderr, "nemesis: seed %d (replay: %s)\n", o.seed, o.replay())
		return 2, nil
	}
	r := Check(h)
	h.Violations = r.Violations
	if err := h.WriteFile(path); err != nil {
		fmt.Fprintf(stderr, "nemesis: write the history: %v\n", err)
		return 2, nil
	}
	fmt.Fprintf(stdout, "nemesis: history in %s\n", path)
	f := summary(stdout, h, r)
	if len(r.Violations) > 0 {
		return 1, f
	}
	return 0, f
}

// recheck checks a history file again.
func recheck(path string, stdout, stderr io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "nemesis: %v\n", err)
		return 2
	}
	defer f.Close()
	h, err := ReadHistory(f)
	if err != nil {
		fmt.Fprintf(stderr, "nemesis: %s: %v\n", path, err)
		return 2
	}
	r := Check(h)
	_ = summary(stdout, h, r)
	if len(r.Violations) > 0 {
		return 1
	}
	return 0
}

// maxListed is how many violations of a kind the summary prints; the
// history holds them all.
const maxListed = 20

// figures are what the summary line of a run counts.
type figures struct {
	faults     map[string]int // by kind
	ticks      int
	runs       int
	violations int
}

// add adds the figures of another run.
func (f *figures) add(g *figures) {
	if f.faults == nil {
		f.faults = map[string]int{}
	}
	for k, n := range g.faults {
		f.faults[k] += n
	}
	f.ticks += g.ticks
	f.runs += g.runs
	f.violations += g.violations
}

// line is the summary line: "N faults (kill N, ...), N ticks, N runs, N
// violations".
func (f *figures) line() string {
	var fs []string
	n := 0
	for _, k := range faultKinds {
		fs = append(fs, fmt.Sprintf("%s %d", k, f.faults[k]))
		n += f.faults[k]
	}
	return fmt.Sprintf("%d faults (%s), %d ticks, %d runs, %d violations", n, strings.Join(fs, ", "), f.ticks, f.runs, f.violations)
}

// summary prints the violations, the figures, and the summary line, and
// returns the figures.
func summary(w io.Writer, h *History, r *Report) *figures {
	byKind := map[string]int{}
	for _, v := range r.Violations {
		byKind[v.Kind]++
		if byKind[v.Kind] <= maxListed {
			fmt.Fprintf(w, "VIOLATION %s: %s\n", v.Kind, v.Message)
		} else if byKind[v.Kind] == maxListed+1 {
			fmt.Fprintf(w, "VIOLATION %s: ... (all of them are in the history)\n", v.Kind)
		}
	}
	f := &figures{faults: map[string]int{}, ticks: r.Ticks, runs: len(h.Runs), violations: len(r.Violations)}
	for _, x := range h.Faults {
		f.faults[x.Kind]++
	}
	var unasked []string
	for _, k := range faultKinds {
		switch why, ok := h.Meta.NotDone[k]; {
		case why == notAsked:
			unasked = append(unasked, k)
		case ok:
			fmt.Fprintf(w, "nemesis: %s not done: %s\n", k, why)
		}
	}
	if len(unasked) > 0 {
		fmt.Fprintf(w, "nemesis: not asked for (-kinds): %s\n", strings.Join(unasked, ", "))
	}
	var acked, refused, failed int
	for _, t := range h.Triggers {
		switch t.Outcome {
		case outcomeOK:
			acked++
		case outcomeDuplicate:
			refused++
		default:
			failed++
		}
	}
	attempts := map[string]int{}
	for _, a := range h.Attempts {
		attempts[a.Status+"/"+a.Reason]++
	}
	status := map[string]int{}
	for _, run := range h.Runs {
		status[run.Status]++
	}
	fmt.Fprintf(w, "nemesis: seed %d, %s of faults and load from %s\n", h.Meta.Seed, time.Duration(h.Meta.Duration), h.Meta.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "nemesis: runs by status: %s\n", counts(status))
	fmt.Fprintf(w, "nemesis: attempts by status/reason: %s\n", counts(attempts))
	fmt.Fprintf(w, "nemesis: %d ticks of %d cron jobs checked, %d of them skipped as counted; %d triggers acknowledged, %d refused as duplicates, %d unanswered or refused otherwise\n",
		r.Ticks, countCron(h), r.Skipped, acked, refused, failed)
	fmt.Fprintf(w, "nemesis: %d executions witnessed, %d of them ran on past a later attempt's start within the bounds of fencing; %d notifications, %d deliveries taken\n",
		len(h.Execs), r.Fenced, len(h.Notifications), len(h.Deliveries))
	var vs []string
	for _, k := range violationKinds {
		vs = append(vs, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	fmt.Fprintf(w, "nemesis: violations: %s\n", strings.Join(vs, ", "))
	fmt.Fprintf(w, "nemesis: %s\n", f.line())
	return f
}

func countCron(h *History) int {
	n := 0
	for _, j := range h.Jobs {
		if j.Schedule != "" {
			n++
		}
	}
	return n
}

func counts(m map[string]int) string {
	var s []string
	for _, k := range sortedKeys(m) {
		s = append(s, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(s, ", ")
}
