package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// syncBatch bounds the jobs whose results or cursors one read of
// syncJobs asks for, with the fires that make the missing cursors: read
// for 100,000 jobs at once, they were all in memory at once, with the
// statements' arguments, at the start's peak.
const syncBatch = 1000

// cursorRead is what syncJobs keeps of a cursor it read.
type cursorRead struct {
	last   int64 // Unix microseconds
	paused bool
}

func readOf(c *store.Cursor) cursorRead {
	return cursorRead{last: c.Last.UnixMicro(), paused: c.Paused}
}

// syncJobs reads the results of the jobs, syncs the expectations
// (syncExpectations) and reads the cursors of cron jobs (creating missing
// ones at now, so a new job does not catch up on the past), syncBatch jobs
// at a time, and makes the runs of one-off jobs.
func (s *Scheduler) syncJobs(ctx context.Context, now time.Time) error {
	defs := s.Jobs()
	var cron []string
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
		if d.Schedule != nil {
			cron = append(cron, d.Name)
		}
	}
	if err := s.readResults(ctx, names); err != nil {
		return err
	}
	if err := s.syncExpectations(ctx, now); err != nil {
		return err
	}
	cursors := make(map[string]cursorRead, len(cron))
	for start := 0; start < len(cron); start += syncBatch {
		if err := s.readCursors(ctx, cron[start:min(start+syncBatch, len(cron))], now, cursors); err != nil {
			return err
		}
	}
	s.mu.Lock()
	for _, j := range s.declared.cron {
		if c, ok := cursors[j.def.Name]; ok {
			j.hasCursor, j.paused = true, c.paused
			j.setLast(c.last)
			s.ahead.note(j, now)
		} else {
			j.hasCursor = false
		}
	}
	s.ticks.requeue(s.declared.cron)
	s.mu.Unlock()

	for _, d := range defs {
		if d.At.IsZero() {
			continue
		}
		nb, na := d.Window(jobs.TriggerOnce, d.At)
		r, err := s.st.RunInsert(ctx, store.RunInsertParams{
			Job: d.Name, Trigger: jobs.TriggerOnce, ScheduledAt: d.At, NotBefore: nb, NotAfter: na,
			Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, Node: s.cfg.NodeID, Now: s.storeNow(now),
		})
		switch {
		case errors.Is(err, store.ErrDuplicate):
			// Made by an earlier start: a one-off job fires once, ever.
		case err != nil:
			return fmt.Errorf("make the run of one-off job %q: %w", d.Name, err)
		default:
			s.logRun(ctx, r, "", "one-off run made")
		}
	}
	return nil
}

// readCursors reads the cursors of the named cron jobs into cursors, and
// makes those missing at now, fireBatch per transaction: a first start
// with 100,000 jobs made them one transaction each.
func (s *Scheduler) readCursors(ctx context.Context, names []string, now time.Time, cursors map[string]cursorRead) error {
	read, err := s.st.ScheduleCursors(ctx, names)
	if err != nil {
		return fmt.Errorf("read schedule cursors: %w", err)
	}
	var missing []store.FireParams
	for _, name := range names {
		if c := read[name]; c != nil {
			cursors[name] = readOf(c)
		} else {
			missing = append(missing, store.FireParams{Job: name, Cursor: now, Node: s.cfg.NodeID, Now: s.storeNow(now)})
		}
	}
	for start := 0; start < len(missing); start += fireBatch {
		batch := missing[start:min(start+fireBatch, len(missing))]
		results, err := s.st.ScheduleFireMany(ctx, batch)
		if err != nil {
			return fmt.Errorf("create schedule cursors: %w", err)
		}
		var lost []string
		for i, res := range results {
			switch {
			case !res.Advanced:
				lost = append(lost, batch[i].Job) // made meanwhile by another node
			case res.Cursor != nil:
				cursors[batch[i].Job] = readOf(res.Cursor)
			}
		}
		if len(lost) > 0 {
			cs, err := s.st.ScheduleCursors(ctx, lost)
			if err != nil {
				return fmt.Errorf("read schedule cursors: %w", err)
			}
			for _, name := range lost {
				if c := cs[name]; c != nil {
					cursors[name] = readOf(c)
				}
			}
		}
	}
	return nil
}
