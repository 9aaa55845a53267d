package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

const backfillUsage = "schedulerd backfill JOB --from T --to T [--dry-run] [--max-parallel N] [--yes] [--json]"

// cmdBackfill makes runs of a cron job's past ticks that have none, or
// lists them with --dry-run.
func cmdBackfill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		from, to    *string
		dryRun, yes *bool
		maxParallel *int
		req         control.BackfillRequest
	)
	return actOnOne[*control.BackfillReply]{
		name: "backfill", usage: backfillUsage,
		flags: func(fs *flag.FlagSet) {
			from = fs.String("from", "", "the first tick `T`, included: RFC 3339, or a date (2026-11-01) in the job's time zone, its start")
			to = fs.String("to", "", "the last tick `T`, included: RFC 3339, or a date in the job's time zone, its end; not in the future")
			dryRun = fs.Bool("dry-run", false, "list the ticks, and the runs they have, and make nothing")
			maxParallel = fs.Int("max-parallel", 1, "at most `N` runs of the backfill active at once")
			yes = fs.Bool("yes", false, "backfill more than 10,000 ticks")
		},
		check: func() error {
			switch {
			case *from == "" || *to == "":
				return usageError{fmt.Errorf("backfill: --from and --to are required\nusage: %s", backfillUsage)}
			case *maxParallel < 1:
				return usageError{fmt.Errorf("backfill: --max-parallel: want at least 1, got %d", *maxParallel)}
			}
			req = control.BackfillRequest{From: *from, To: *to, DryRun: *dryRun, MaxParallel: *maxParallel, Yes: *yes}
			return nil
		},
		call: func(c *control.Client, ctx context.Context, job string) (*control.BackfillReply, error) {
			return c.Backfill(ctx, job, req)
		},
		line: func(_ string, r *control.BackfillReply) string { return backfillText(r) },
	}.run(ctx, args, stdout, stderr)
}

// backfillText says what a backfill found and did; for a dry run, a line
// per tick besides.
func backfillText(r *control.BackfillReply) string {
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	var b strings.Builder
	fmt.Fprintf(&b, "backfill of %s from %s to %s, both included (%s): %d ticks, %d with a run already",
		r.Job, r.From.In(loc).Format(time.RFC3339Nano), r.To.In(loc).Format(time.RFC3339Nano), r.TimeZone, r.Ticks, r.Taken)
	if r.DryRun {
		for _, t := range r.List {
			run := "no run: would be made"
			if t.RunID != "" {
				run = "has run " + t.RunID
			}
			fmt.Fprintf(&b, "\n%s  %s", t.At.In(loc).Format(time.RFC3339), run)
		}
		if len(r.List) < r.Ticks {
			fmt.Fprintf(&b, "\n... and %d ticks more", r.Ticks-len(r.List))
		}
		b.WriteString("\ndry run: nothing made")
		return b.String()
	}
	bf := r.Backfill
	switch {
	case bf == nil && r.Ticks == 0:
		b.WriteString("\nno tick to backfill")
	case bf == nil:
		b.WriteString("\nevery tick has a run: nothing to backfill")
	case bf.Done:
		fmt.Fprintf(&b, "\nbackfill %s done: runs made: %d", bf.ID, bf.Created)
	default:
		fmt.Fprintf(&b, "\nbackfill %s started: runs made so far: %d, at most %d active at once; next tick %s",
			bf.ID, bf.Created, bf.MaxParallel, bf.Next.In(loc).Format(time.RFC3339))
	}
	return b.String()
}
