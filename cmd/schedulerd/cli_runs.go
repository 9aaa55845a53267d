package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/jobs"
)

// cmdRuns lists runs, newest first, or with "show ID" prints one run with
// its attempts, their output, and its history.
func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("runs")
	cf := addClientFlags(fs, stderr)
	job := fs.String("job", "", "only runs of the job `J`")
	status := fs.String("status", "", "only runs in the status `S`: pending, running, retrying, completed, cancelled or dead_letter")
	limit := fs.Int("limit", 20, "at most `N` runs (1 to 10000)")
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
		return usageError{fmt.Errorf("usage: schedulerd runs [--job J] [--status S] [--limit N] [--json], or schedulerd runs show ID")}
	}
	q := control.RunsQuery{Job: *job, Limit: *limit}
	if *status != "" {
		st, err := jobs.ParseStatus(*status)
		if err != nil {
			return usageError{fmt.Errorf("runs: --status: %w", err)}
		}
		q.Status = st
	}
	if *limit < 1 || *limit > 10000 {
		return usageError{fmt.Errorf("runs: --limit must be between 1 and 10000")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	runs, err := c.Runs(ctx, q)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	if *cf.json {
		for _, r := range runs {
			if err := printJSON(stdout, r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tJOB\tSTATUS\tATTEMPT\tTRIGGER\tSCHEDULED\tSTARTED\tFINISHED\tNODE\tEXIT\tREASON")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Job, r.Status, r.Attempt, r.MaxAttempts,
			r.Trigger, when(r.ScheduledAt), when(r.StartedAt), when(r.FinishedAt), orDash(r.Node), exitCodeText(r.ExitCode), orDash(string(r.Reason)))
	}
	return tw.Flush()
}

// runDetail is `runs show --json`: the run's fields with its attempts and
// events.
type runDetail struct {
	control.Run
	Attempts []control.Attempt `json:"attempts"`
	Events   []control.Event   `json:"events"`
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
	if *cf.json {
		return printJSON(stdout, runDetail{Run: *run, Attempts: attempts, Events: events})
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
