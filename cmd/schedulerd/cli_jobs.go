package main

import (
	"context"
	"fmt"
	"io"
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
	fmt.Fprintln(tw, "JOB\tKIND\tSCHEDULE\tNEXT\tPAUSED\tLAST RUN\tSTATUS\tAT\tSKIPPED")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", j.Name, orDash(kind), sched, next, paused,
			orDash(j.LastRunID), status, when(j.LastRunAt), j.Skipped)
	}
	return tw.Flush()
}

// cmdForget ends the expectation (expect_success_within) that the cluster
// keeps of a job that no config declares any more.
func cmdForget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("forget")
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	job, err := oneArg(pos, "schedulerd forget JOB [--json]")
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	reply, err := c.Forget(ctx, job)
	if err != nil {
		return fmt.Errorf("forget %s: %w", job, err)
	}
	if *cf.json {
		return printJSON(stdout, reply)
	}
	fmt.Fprintf(stdout, "job %s forgotten: the cluster no longer expects it to succeed, and it is no longer overdue\n", job)
	return nil
}

// cmdPause stops a cron job's schedule, persistently; triggers still work.
func cmdPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "pause", args, stdout, stderr)
}

// cmdResume restarts a paused schedule from now.
func cmdResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseResume(ctx, "resume", args, stdout, stderr)
}

func pauseResume(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(cmd)
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	job, err := oneArg(pos, "schedulerd "+cmd+" JOB [--json]")
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	var reply *control.PauseReply
	if cmd == "pause" {
		reply, err = c.Pause(ctx, job)
	} else {
		reply, err = c.Resume(ctx, job)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", cmd, job, err)
	}
	if *cf.json {
		return printJSON(stdout, reply)
	}
	if reply.Paused {
		fmt.Fprintf(stdout, "job %s paused: its schedule does not fire until `schedulerd resume %s`; triggers still work\n", job, job)
	} else {
		fmt.Fprintf(stdout, "job %s resumed: it fires from its next tick on; ticks that fell while it was paused are not caught up\n", job)
	}
	return nil
}
