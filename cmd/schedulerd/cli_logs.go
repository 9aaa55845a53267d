package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/internal/termtext"
	"github.com/schedulerd/schedulerd/jobs"
)

// logsPoll is how often `logs -f JOB` asks for the job's runs while it
// waits for the next one to start.
const logsPoll = time.Second

// logsRuns is how many of a job's newest runs `logs JOB` reads.
const logsRuns = 20

// cmdLogs prints the output of a run, or of a job's newest run that has
// started; with -f it follows the running attempt's output as it is
// written, then the run's next attempts, and for a job its next runs,
// each after a header line, until interrupted.
func cmdLogs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("logs")
	cf := addClientFlags(fs, stderr)
	follow := fs.Bool("f", false, "follow: print the output as it is written, then that of the run's next attempts "+
		"(of a job, of its next runs too), each after a header line, until interrupted")
	raw := fs.Bool("raw", false, "print the output as written, terminal control characters and all")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	arg, err := oneArg(pos, "schedulerd logs [-f] [--raw] RUN|JOB")
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	l := &logsCmd{c: c, follow: *follow, raw: *raw, json: *cf.json, out: &lineEnd{w: stdout}, stderr: stderr}
	err = l.target(ctx, arg)
	if *follow && ctx.Err() != nil {
		return nil // interrupted: how a follow ends
	}
	if err != nil {
		return fmt.Errorf("logs %s: %w", arg, err)
	}
	return nil
}

// logsCmd is one `schedulerd logs`.
type logsCmd struct {
	c                 *control.Client
	follow, raw, json bool
	out               *lineEnd
	stderr            io.Writer
}

// lineEnd passes writes on and remembers whether the last byte ended a
// line, so that a header never starts within a line of output.
type lineEnd struct {
	w       io.Writer
	midLine bool
}

func (l *lineEnd) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.midLine = p[len(p)-1] != '\n'
	}
	return l.w.Write(p)
}

// target prints the output of run arg, or else of job arg.
func (l *logsCmd) target(ctx context.Context, arg string) error {
	run, err := l.c.Run(ctx, arg)
	switch {
	case err == nil:
		return l.run(ctx, run)
	case !errors.Is(err, control.ErrUnknownRun):
		return err
	}
	return l.job(ctx, arg)
}

// job prints the output of the job's newest run that has started; with
// -f, then that of each run that starts after it.
func (l *logsCmd) job(ctx context.Context, job string) error {
	runs, err := l.c.Runs(ctx, control.RunsQuery{Job: job, Limit: logsRuns})
	if err != nil {
		return err
	}
	var since time.Time
	done := map[string]bool{}
	if cur := newestStarted(runs); cur != nil {
		if err := l.run(ctx, cur); err != nil || !l.follow {
			return err
		}
		done[cur.ID], since = true, control.Time(cur.StartedAt)
	} else {
		js, err := l.c.Jobs(ctx)
		if err != nil {
			return err
		}
		if len(runs) == 0 && !slices.ContainsFunc(js, func(j control.JobInfo) bool { return j.Name == job }) {
			if _, perr := uuid.Parse(job); perr == nil {
				return control.Mark(fmt.Errorf("unknown run %q", job), control.ErrUnknownRun)
			}
			return control.Mark(fmt.Errorf("no job is called %q, and no run has that id", job), control.ErrUnknownJob)
		}
		if !l.follow {
			return fmt.Errorf("job %s has no run that has started yet; with -f, logs waits for its first", job)
		}
		fmt.Fprintf(l.stderr, "schedulerd: job %s has no run that has started yet: waiting for its first\n", escapeText(job, false))
	}
	for {
		if next := nextStarted(runs, done, since); next != nil {
			if err := l.run(ctx, next); err != nil {
				return err
			}
			done[next.ID] = true
			if t := control.Time(next.StartedAt); t.After(since) {
				since = t
			}
		} else if err := sleepCtx(ctx, logsPoll); err != nil {
			return err
		}
		if runs, err = l.c.Runs(ctx, control.RunsQuery{Job: job, Limit: logsRuns}); err != nil {
			return err
		}
		// A run followed that is no longer among the newest will not
		// come back among them.
		for id := range done {
			if !slices.ContainsFunc(runs, func(r control.Run) bool { return r.ID == id }) {
				delete(done, id)
			}
		}
	}
}

// newestStarted is the run of runs that started last, or nil.
func newestStarted(runs []control.Run) *control.Run {
	var out *control.Run
	for i := range runs {
		r := &runs[i]
		if r.Attempt > 0 && r.StartedAt != nil && (out == nil || r.StartedAt.After(*out.StartedAt)) {
			out = r
		}
	}
	return out
}

// nextStarted is the run of runs that started first at since or after,
// of those not done, or nil.
func nextStarted(runs []control.Run, done map[string]bool, since time.Time) *control.Run {
	var out *control.Run
	for i := range runs {
		r := &runs[i]
		if r.Attempt == 0 || r.StartedAt == nil || done[r.ID] || r.StartedAt.Before(since) {
			continue
		}
		if out == nil || r.StartedAt.Before(*out.StartedAt) {
			out = r
		}
	}
	return out
}

// sleepCtx waits for d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// run prints the output of the run's current attempt; with -f, as it is
// written, then that of each next attempt, until the run has finished.
func (l *logsCmd) run(ctx context.Context, run *control.Run) error {
	var err error
	if run.Attempt == 0 {
		if !l.follow {
			fmt.Fprintf(l.stderr, "schedulerd: %s: no attempt has started yet; with -f, logs waits for it\n", escapeText(describe(run), false))
			return nil
		}
		l.status(run, "waiting for its first attempt")
		if run, err = l.nextAttempt(ctx, run, 0); err != nil || run.Attempt == 0 {
			return err
		}
	}
	for n := run.Attempt; ; n++ {
		if err := l.attempt(ctx, run, n); err != nil || !l.follow {
			return err
		}
		if run, err = l.nextAttempt(ctx, run, n); err != nil || run.Attempt <= n {
			return err
		}
	}
}

// nextAttempt waits for the run to make an attempt after attempt n, or to
// finish, saying each state it moves through after attempt n.
func (l *logsCmd) nextAttempt(ctx context.Context, run *control.Run, n int) (*control.Run, error) {
	var err error
	// The attempt's output has ended; its end is being written.
	for n > 0 && run.Attempt == n && run.Status == jobs.StatusRunning {
		if run, err = l.c.WaitRun(ctx, run.ID, run.Status, time.Minute); err != nil {
			return nil, err
		}
	}
	if n > 0 && run.Attempt > n {
		// Attempt n ended and the next began before logs saw the run in
		// between: its end is in the run's history.
		l.attemptEnd(ctx, run, n)
	}
	for run.Attempt == n {
		if n > 0 || run.Status.Terminal() {
			l.status(run, "")
		}
		if run.Status.Terminal() {
			break
		}
		seen := run.Status
		for run.Attempt == n && run.Status == seen {
			if run, err = l.c.WaitRun(ctx, run.ID, seen, time.Minute); err != nil {
				return nil, err
			}
		}
	}
	return run, nil
}

// attempt prints the output of attempt n of the run; with -f, after a
// header, as it is written until the attempt ends.
func (l *logsCmd) attempt(ctx context.Context, run *control.Run, n int) error {
	var w io.Writer = l.out
	var esc *termtext.Writer
	var pieces *jsonPieces
	switch {
	case l.json:
		pieces = &jsonPieces{w: l.out, run: run.ID, attempt: n}
		w = pieces
	case !l.raw:
		esc = termtext.NewWriter(l.out)
		w = esc
	}
	_, err := l.c.Output(ctx, run.ID, control.OutputParams{Attempt: n, Follow: l.follow}, func(info control.OutputInfo) {
		l.attemptHeader(run, info)
	}, w)
	switch {
	case esc != nil:
		err = cmp.Or(err, esc.Flush())
	case pieces != nil:
		err = cmp.Or(err, pieces.flush())
	}
	return err
}

// logsLine is a line of `logs --json`: "attempt" begins the output of
// an attempt (state says where it comes from: live, stored, elsewhere),
// "output" is a piece of it as it was written, "run" is the state of the
// run after an attempt (with -f).
type logsLine struct {
	Type     string              `json:"type"`
	Run      string              `json:"run"`
	Job      string              `json:"job,omitempty"`
	Attempt  int                 `json:"attempt"`
	Node     string              `json:"node,omitempty"`
	State    control.OutputState `json:"state,omitempty"`
	Output   *string             `json:"output,omitempty"`
	Status   jobs.Status         `json:"status,omitempty"`
	Reason   jobs.Reason         `json:"reason,omitempty"`
	ExitCode *int                `json:"exit_code,omitempty"`
	Error    string              `json:"error,omitempty"`
}

// attemptHeader says whose output follows: with -f a header line, and
// when the attempt runs on another node, that its output comes when it
// ends.
func (l *logsCmd) attemptHeader(run *control.Run, info control.OutputInfo) {
	if l.json {
		_ = printJSON(l.out, logsLine{Type: "attempt", Run: run.ID, Job: run.Job, Attempt: info.Attempt, Node: info.Node, State: info.State})
		return
	}
	elsewhere := info.State == control.OutputElsewhere
	switch {
	case l.follow:
		h := fmt.Sprintf("run %s of %s, attempt %d of %d, on %s", run.ID, run.Job, info.Attempt, run.MaxAttempts, orDash(info.Node))
		if elsewhere {
			h += " (another node: its output comes when the attempt ends)"
		}
		l.header(h)
	case elsewhere:
		fmt.Fprintf(l.stderr, "schedulerd: run %s of %s: attempt %d runs on node %s, whose output is seen here when it ends; with -f, logs waits for it\n",
			escapeText(run.ID, false), escapeText(run.Job, false), info.Attempt, escapeText(info.Node, false))
	}
}

// status says, with -f, the run's state after an attempt (and what logs
// does next, when note is set).
func (l *logsCmd) status(run *control.Run, note string) {
	if l.json {
		_ = printJSON(l.out, logsLine{Type: "run", Run: run.ID, Job: run.Job, Attempt: run.Attempt, Status: run.Status,
			Reason: run.Reason, ExitCode: run.ExitCode, Error: run.Error})
		return
	}
	h := describe(run)
	if note != "" {
		h += "; " + note
	}
	l.header(h)
}

// attemptEnd says, with -f, how attempt n of the run ended, from the
// event of its end: for an attempt whose end logs did not see in the run.
func (l *logsCmd) attemptEnd(ctx context.Context, run *control.Run, n int) {
	es, err := l.c.Events(ctx, run.ID)
	if err != nil {
		return // the next attempt's header follows; its end is not worth failing for
	}
	for _, e := range es {
		if e.Attempt != n || e.From != jobs.StatusRunning {
			continue
		}
		if l.json {
			_ = printJSON(l.out, logsLine{Type: "run", Run: run.ID, Job: run.Job, Attempt: n, Status: e.To, Reason: e.Reason, Error: e.Message})
			return
		}
		h := fmt.Sprintf("run %s of %s: attempt %d of %d ended, %s", run.ID, run.Job, n, run.MaxAttempts, e.To)
		if e.Reason != "" {
			h += " (" + string(e.Reason) + ")"
		}
		if e.Message != "" {
			h += ": " + e.Message
		}
		l.header(h)
		return
	}
}

// header writes a header line, on a line of its own.
func (l *logsCmd) header(text string) {
	if l.out.midLine {
		fmt.Fprintln(l.out)
	}
	fmt.Fprintf(l.out, "==> %s <==\n", escapeText(text, false))
}

// jsonPieces writes output as it comes as lines of `logs --json`, each
// piece whole characters (JSON strings are UTF-8).
type jsonPieces struct {
	w       io.Writer
	run     string
	attempt int
	held    []byte
}

func (j *jsonPieces) Write(p []byte) (int, error) {
	n := len(p)
	if len(j.held) > 0 {
		p = append(j.held, p...)
		j.held = nil
	}
	cut := termtext.Complete(p)
	if cut < len(p) {
		j.held = append([]byte(nil), p[cut:]...)
	}
	if err := j.piece(p[:cut]); err != nil {
		return 0, err
	}
	return n, nil
}

func (j *jsonPieces) flush() error {
	held := j.held
	j.held = nil
	return j.piece(held)
}

func (j *jsonPieces) piece(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	s := string(p)
	return printJSON(j.w, logsLine{Type: "output", Run: j.run, Attempt: j.attempt, Output: &s})
}
