package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/control"
)

// cmdJobs lists the declared jobs with their schedule, next fire time,
// paused state, last run and skipped ticks, then the jobs that no config
// of this node declares but that the cluster still expects to succeed
// (expect_success_within), marked "not declared".
func cmdJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("jobs")
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("usage: schedulerd jobs [--json]")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	js, err := c.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if *cf.json {
		for _, j := range js {
			if err := printJSON(stdout, j); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tKIND\tSCHEDULE\tNEXT\tPAUSED\tLAST RUN\tSTATUS\tAT\tSKIPPED\tTHEN")
	for _, j := range js {
		sched := "-"
		kind := j.Kind
		switch j.Kind {
		case "cron":
			sched = j.Schedule
			if j.Timezone != "" {
				sched += " (" + j.Timezone + ")"
			}
		case "once":
			sched = "at " + when(j.At)
		case "trigger":
			sched = "on trigger"
		}
		paused := "no"
		if j.Paused {
			paused = "yes"
		}
		if !j.Declared {
			sched, paused = "not declared, expected within "+j.ExpectSuccessWithin, "-"
		}
		next := when(j.NextFire)
		if j.NextFire != nil && j.NextStart != nil && j.Kind == "cron" && j.NextStart.After(*j.NextFire) {
			next += " +" + j.NextStart.Sub(*j.NextFire).String() // the jitter's delay
		}
		status := orDash(string(j.LastRunStatus))
		if j.Overdue {
			status += " (OVERDUE)" // no run completed within expect_success_within
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.Name, orDash(kind), sched, next, paused,
			orDash(j.LastRunID), status, when(j.LastRunAt), j.Skipped, orDash(chainText(j.OnSuccess, j.OnFailure)))
	}
	return tw.Flush()
}

// chainText says what a job's runs make runs of: "ok:a,b fail:c", "" for
// nothing.
func chainText(onSuccess, onFailure []string) string {
	var parts []string
	if len(onSuccess) > 0 {
		parts = append(parts, "ok:"+strings.Join(onSuccess, ","))
	}
	if len(onFailure) > 0 {
		parts = append(parts, "fail:"+strings.Join(onFailure, ","))
	}
	return strings.Join(parts, " ")
}

// cmdForget ends the expectation (expect_success_within) that the cluster
// keeps of a job that no config declares any more.
func cmdForget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return actOnOne[*control.ForgetReply]{
		name: "forget", usage: "schedulerd forget JOB [--json]",
		call: (*control.Client).Forget,
		line: func(job string, _ *control.ForgetReply) string {
			return fmt.Sprintf("job %s forgotten: the cluster no longer expects it to succeed, and it is no longer overdue", job)
		},
	}.run(ctx, args, stdout, stderr)
}

// cmdPause stops a cron job's schedule, persistently; triggers still work.
func cmdPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return actOnOne[*control.PauseReply]{
		name: "pause", usage: "schedulerd pause JOB [--json]",
		call: (*control.Client).Pause,
		line: pausedLine,
	}.run(ctx, args, stdout, stderr)
}

// cmdResume restarts a paused schedule from now.
func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return actOnOne[*control.PauseReply]{
		name: "resume", usage: "schedulerd resume JOB [--json]",
		call: (*control.Client).Resume,
		line: pausedLine,
	}.run(ctx, args, stdout, stderr)
}

// pausedLine says what pause and resume did.
func pausedLine(job string, reply *control.PauseReply) string {
	if reply.Paused {
		return fmt.Sprintf("job %s paused: its schedule does not fire until `schedulerd resume %s`; triggers still work", job, job)
	}
	return fmt.Sprintf("job %s resumed: it fires from its next tick on; ticks that fell while it was paused are not caught up", job)
}
