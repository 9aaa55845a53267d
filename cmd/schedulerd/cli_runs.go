package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// cmdRuns lists runs, newest first, a page at a time; or with --stats
// summarises them; or with "show ID" prints one run with its attempts,
// their output, and its history.
func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("runs")
	cf := addClientFlags(fs, stderr)
	job := fs.String("job", "", "only runs of the job `J`")
	status := fs.String("status", "", "only runs in the status `S`: pending, running, retrying, completed, cancelled or dead_letter")
	since := fs.String("since", "", "only runs made at `T` or later: RFC 3339, a date (2026-05-01, UTC) or a duration before now (7d, 36h)")
	until := fs.String("until", "", "only runs made before `T`, as --since")
	before := fs.String("before", "", "only runs listed after the run `ID`: the next page of a listing whose last run it was")
	limit := fs.Int("limit", 20, "at most `N` runs (1 to 10000)")
	stats := fs.Bool("stats", false, "instead of the runs, how many ended how, the success ratio and the p50, p95 and longest duration of the completed ones")
	raw := fs.Bool("raw", false, "print output, payload and messages as stored, terminal control characters and all (runs show)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && pos[0] == "show" {
		id, err := oneArg(pos[1:], "schedulerd runs show ID [--json] [--raw]")
		if err != nil {
			return err
		}
		return showRun(ctx, cf, id, *raw, stdout)
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("usage: schedulerd runs [--job J] [--status S] [--since T] [--until T] [--before ID] [--limit N] [--json], " +
			"schedulerd runs [--job J] [--since T] [--until T] --stats [--json], or schedulerd runs show ID")}
	}
	now := time.Now()
	q := control.RunsQuery{Job: *job, Before: *before, Limit: *limit}
	for _, b := range []struct {
		name, value string
		to          *time.Time
	}{{"since", *since, &q.Since}, {"until", *until, &q.Until}} {
		if b.value == "" {
			continue
		}
		t, err := control.ParsePast(b.value, now)
		if err != nil {
			return usageError{fmt.Errorf("runs: --%s: %w", b.name, err)}
		}
		*b.to = t
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return usageError{fmt.Errorf("runs: --since (%s) must be before --until (%s)", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))}
	}
	if *stats {
		for _, name := range []string{"status", "before", "limit"} {
			if flagGiven(fs, name) {
				return usageError{fmt.Errorf("runs: --stats counts every run of the job and range, whatever its status, on no page: drop --%s", name)}
			}
		}
		return runStats(ctx, cf, control.RunStatsQuery{Job: q.Job, Since: q.Since, Until: q.Until}, stdout)
	}
	if *status != "" {
		st, err := jobs.ParseStatus(*status)
		if err != nil {
			return usageError{fmt.Errorf("runs: --status: %w", err)}
		}
		q.Status = st
	}
	if *limit < 1 || *limit > store.MaxListLimit {
		return usageError{fmt.Errorf("runs: --limit must be between 1 and %d", store.MaxListLimit)}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	page, err := c.RunsPage(ctx, q)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	if *cf.json {
		for _, r := range page.Runs {
			if err := printJSON(stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tJOB\tSTATUS\tATTEMPT\tTRIGGER\tSCHEDULED\tSTARTED\tFINISHED\tNODE\tEXIT\tREASON")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Job, r.Status, r.Attempt, r.MaxAttempts,
			r.Trigger, when(r.ScheduledAt), when(r.StartedAt), when(r.FinishedAt), orDash(r.Node), exitCodeText(r.ExitCode), orDash(string(r.Reason)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(stderr, "more runs follow: add --before %s\n", page.Next)
	}
	return nil
}

// runStats prints the stats of the runs of q: a table of the runs by
// outcome, the success ratio and the durations, or with --json the
// API's RunStats.
func runStats(ctx context.Context, cf *clientFlags, q control.RunStatsQuery, stdout io.Writer) error {
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.RunStats(ctx, q)
	if err != nil {
		return fmt.Errorf("runs --stats: %w", err)
	}
	if *cf.json {
		return printJSON(stdout, st)
	}
	what := "runs of all jobs"
	if st.Job != "" {
		what = "runs of " + st.Job
	}
	switch {
	case st.Since != nil && st.Until != nil:
		what += fmt.Sprintf(" made from %s to before %s", when(st.Since), when(st.Until))
	case st.Since != nil:
		what += " made since " + when(st.Since)
	case st.Until != nil:
		what += " made before " + when(st.Until)
	}
	fmt.Fprintf(stdout, "%s: %d\n", what, st.Runs)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, row := range []struct {
		name string
		n    int64
	}{{"completed", st.Completed}, {"dead_letter", st.DeadLetter}, {"expired", st.Expired}, {"cancelled", st.Cancelled},
		{"retrying", st.Retrying}, {"running", st.Running}, {"pending", st.Pending}} {
		fmt.Fprintf(tw, "  %s\t%d\n", row.name, row.n)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.SuccessRatio == nil {
		fmt.Fprintln(stdout, "success ratio: - (no run completed, dead-lettered or expired)")
	} else {
		fmt.Fprintf(stdout, "success ratio: %.1f%% (%d completed of %d that completed, dead-lettered or expired)\n",
			100**st.SuccessRatio, st.Completed, st.Completed+st.DeadLetter+st.Expired)
	}
	if st.P50Seconds == nil {
		fmt.Fprintln(stdout, "duration: - (no run completed)")
	} else {
		fmt.Fprintf(stdout, "duration of the completed: p50 %s, p95 %s, max %s\n",
			secondsText(*st.P50Seconds), secondsText(*st.P95Seconds), secondsText(*st.MaxSeconds))
	}
	return nil
}

// secondsText writes a duration in seconds as Go does, to the millisecond
// under a minute and to the second above.
func secondsText(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Minute {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// runDetail is `runs show --json`: the run's fields with its attempts and
// events.
type runDetail struct {
	control.Run
	Attempts []control.Attempt `json:"attempts"`
	Events   []control.Event   `json:"events"`
	// Children are the runs the run's end made (its chain).
	Children []control.Run `json:"children"`
}

// showRun prints one run, its attempts with their output, and its events.
// Text that a job or a caller chose is escaped (escapeText) unless raw.
func showRun(ctx context.Context, cf *clientFlags, id string, raw bool, stdout io.Writer) error {
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := c.Run(ctx, id)
	if err != nil {
		return fmt.Errorf("runs show %s: %w", id, err)
	}
	attempts, err := c.Attempts(ctx, id)
	if err != nil {
		return fmt.Errorf("runs show %s: %w", id, err)
	}
	events, err := c.Events(ctx, id)
	if err != nil {
		return fmt.Errorf("runs show %s: %w", id, err)
	}
	children, err := c.Children(ctx, id)
	if err != nil {
		return fmt.Errorf("runs show %s: %w", id, err)
	}
	if *cf.json {
		return printJSON(stdout, runDetail{Run: *run, Attempts: attempts, Events: events, Children: children})
	}
	line := func(s string) string { return s }
	text := line
	if !raw {
		line = func(s string) string { return escapeText(s, false) }
		text = func(s string) string { return escapeText(s, true) }
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	status := string(run.Status)
	if run.Reason != "" {
		status += " (" + string(run.Reason) + ")"
	}
	if run.CancelRequested && run.Status == jobs.StatusRunning {
		status += ", cancel requested"
	}
	rows := [][2]string{
		{"run", run.ID}, {"job", run.Job}, {"status", status},
		{"attempt", fmt.Sprintf("%d of %d", run.Attempt, run.MaxAttempts)}, {"trigger", string(run.Trigger)},
		{"scheduled at", when(run.ScheduledAt)}, {"not before", when(run.NotBefore)}, {"not after", when(run.NotAfter)},
		{"created at", when(run.CreatedAt)}, {"started at", when(run.StartedAt)}, {"finished at", when(run.FinishedAt)},
		{"node", orDash(run.Node)}, {"exit code", exitCodeText(run.ExitCode)}, {"error", orDash(line(run.Error))},
		{"dedup id", orDash(line(run.DedupID))}, {"rerun of", orDash(run.RerunOf)}, {"payload", orDash(line(run.Payload))},
		{"made by", orDash(line(run.Actor))},
	}
	if run.ParentRunID != "" {
		rows = append(rows, [2]string{"parent run", run.ParentRunID})
	}
	for _, k := range children {
		rows = append(rows, [2]string{"child run", fmt.Sprintf("%s %s %s", k.ID, k.Job, k.Status)})
	}
	if run.CancelledBy != "" {
		rows = append(rows, [2]string{"cancelled by", line(run.CancelledBy)})
	}
	if run.Progress > 0 || run.ProgressMessage != "" {
		rows = append(rows, [2]string{"progress", strings.TrimSpace(fmt.Sprintf("%d%% %s", run.Progress, line(run.ProgressMessage)))})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, a := range attempts {
		fmt.Fprintf(stdout, "\nattempt %d on %s: %s", a.Number, orDash(a.Node), a.Status)
		if a.Reason != "" {
			fmt.Fprintf(stdout, " (%s)", a.Reason)
		}
		fmt.Fprintf(stdout, ", exit code %s, started %s, finished %s\n", exitCodeText(a.ExitCode), when(a.StartedAt), when(a.FinishedAt))
		if a.Error != "" {
			fmt.Fprintf(stdout, "  error: %s\n", line(a.Error))
		}
		trunc := ""
		if a.Truncated {
			trunc = ", truncated: head and tail kept"
		}
		fmt.Fprintf(stdout, "  output (%d bytes%s):\n", a.OutputBytes, trunc)
		for _, l := range strings.Split(strings.TrimSuffix(text(a.Output), "\n"), "\n") {
			if a.Output != "" {
				fmt.Fprintf(stdout, "  | %s\n", l)
			}
		}
	}
	fmt.Fprintln(stdout, "\nevents:")
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tNODE\tATTEMPT\tFROM\tTO\tREASON\tACTOR\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", when(e.Time), orDash(e.Node), e.Attempt, orDash(string(e.From)), e.To,
			orDash(string(e.Reason)), orDash(line(e.Actor)), orDash(line(e.Message)))
	}
	return tw.Flush()
}
