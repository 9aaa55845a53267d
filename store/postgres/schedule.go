package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// getCursor returns the job's cursor, or nil when it has none; lock takes
// its row lock until the transaction ends.
func getCursor(ctx context.Context, c *conn, job string, lock bool) (*store.Cursor, error) {
	q := `SELECT ` + cursorColumns + ` FROM cursors WHERE job = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	cur, err := scanCursor(c.queryRow(ctx, q, job))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return cur, err
}

// ScheduleCursors returns the cursors of the named jobs that have one.
func (s *Store) ScheduleCursors(ctx context.Context, jobNames []string) (map[string]*store.Cursor, error) {
	out := map[string]*store.Cursor{}
	if len(jobNames) == 0 {
		return out, nil
	}
	rows, err := s.read().query(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE job = ANY($1::text[])`, jobNames)
	if err != nil {
		return nil, fail("schedule cursors", err)
	}
	cursors, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Cursor, error) { return scanCursor(row) })
	if err != nil {
		return nil, fail("schedule cursors", err)
	}
	for _, cur := range cursors {
		out[cur.Job] = cur
	}
	return out, nil
}

// ScheduleFire advances a job's cursor by compare-and-set and makes the runs
// of the ticks it covers, in one transaction; see store.FireParams. The
// compare-and-set holds the cursor's row lock (FOR UPDATE, or the lock of
// the row it has just inserted when it makes the cursor), so fires of one
// job from several nodes are serialized and all but one find the cursor
// moved. A paused cursor does not advance either: the caller re-reads it
// and sees Paused.
func (s *Store) ScheduleFire(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	switch {
	case p.Job == "":
		return nil, errors.New("fire schedule: job name is empty")
	case p.Cursor.IsZero():
		return nil, fmt.Errorf("fire schedule %s: the new cursor is zero", p.Job)
	case !p.Expect.IsZero() && p.Cursor.Before(p.Expect):
		return nil, fmt.Errorf("fire schedule %s: the cursor would move back from %s to %s", p.Job,
			p.Expect.UTC().Format(time.RFC3339), p.Cursor.UTC().Format(time.RFC3339))
	}
	runs := make([]store.RunInsertParams, len(p.Runs))
	for i, r := range p.Runs {
		switch {
		case r.Job == "":
			r.Job = p.Job
		case r.Job != p.Job:
			return nil, fmt.Errorf("fire schedule %s: a run of job %s", p.Job, r.Job)
		}
		if r.Trigger == "" {
			r.Trigger = jobs.TriggerSchedule
		}
		if r.Node == "" {
			r.Node = p.Node
		}
		runs[i] = r
	}

	res := &store.FireResult{}
	err := s.write(ctx, "fire schedule "+p.Job, func(c *conn) error {
		*res = store.FireResult{}
		var cur *store.Cursor
		if p.Expect.IsZero() {
			// Make the cursor; a concurrent maker waits for this
			// transaction, then finds the row and loses.
			tag, err := c.exec(ctx, `INSERT INTO cursors (job, last, updated_at)
				VALUES ($1, $2, COALESCE($3::timestamptz, now())) ON CONFLICT (job) DO NOTHING`,
				p.Job, ts(p.Cursor), ts(p.Now))
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				res.Cursor, err = getCursor(ctx, c, p.Job, false)
				return err
			}
		} else {
			var err error
			if cur, err = getCursor(ctx, c, p.Job, true); err != nil {
				return err
			}
			res.Cursor = cur
			if cur == nil || cur.Last.UnixMicro() != p.Expect.UnixMicro() || cur.Paused {
				return nil
			}
		}

		// The ticks whose occurrence is free; the others are duplicates.
		var ticks []time.Time
		for _, r := range runs {
			if hasOccurrence(r.Trigger) {
				ticks = append(ticks, r.ScheduledAt.UTC().Truncate(time.Microsecond))
			}
		}
		taken := map[int64]bool{}
		if len(ticks) > 0 {
			rows, err := c.query(ctx, `SELECT scheduled_at FROM occurrences WHERE job = $1 AND scheduled_at = ANY($2::timestamptz[])`,
				p.Job, ticks)
			if err != nil {
				return err
			}
			have, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
			if err != nil {
				return err
			}
			for _, t := range have {
				taken[t.UnixMicro()] = true
			}
		}
		var fresh []store.RunInsertParams
		for _, r := range runs {
			if hasOccurrence(r.Trigger) {
				key := r.ScheduledAt.UnixMicro()
				if taken[key] {
					res.Duplicates++
					continue
				}
				taken[key] = true
			}
			fresh = append(fresh, r)
		}

		lastSkipped := p.LastSkipped
		if len(fresh) > 0 && (p.Overlap == jobs.OverlapSkip || p.Overlap == jobs.OverlapReplace) {
			active, err := scanRuns(c.query(ctx, `SELECT `+runColumns+` FROM runs
				WHERE job = $1 AND status IN `+sqlActive+` ORDER BY created_at, id FOR UPDATE`, p.Job))
			if err != nil {
				return err
			}
			switch {
			case len(active) == 0:
			case p.Overlap == jobs.OverlapSkip:
				res.SkippedOverlap = len(fresh)
				for _, r := range fresh {
					if r.ScheduledAt.After(lastSkipped) {
						lastSkipped = r.ScheduledAt
					}
				}
				fresh = nil
			default:
				for _, r := range active {
					replaced, err := cancelRun(ctx, c, r, p.Node, jobs.ReasonReplaced, p.Now)
					if err != nil {
						return err
					}
					res.Replaced = append(res.Replaced, replaced)
				}
			}
		}
		for _, r := range fresh {
			run, dup, err := insertRun(ctx, c, r, p.Now)
			if err != nil {
				return err
			}
			if dup { // made by a RunInsert since the check above
				res.Duplicates++
				continue
			}
			res.Created = append(res.Created, run)
		}

		var err error
		res.Cursor, err = scanCursor(c.queryRow(ctx, `UPDATE cursors SET last = $2, skipped = skipped + $3,
				last_skipped_at = GREATEST(last_skipped_at, $4::timestamptz), updated_at = COALESCE($5::timestamptz, now())
			WHERE job = $1 RETURNING `+cursorColumns,
			p.Job, ts(p.Cursor), int64(p.Skipped+res.SkippedOverlap), ts(lastSkipped), ts(p.Now)))
		if err != nil {
			return err
		}
		res.Advanced = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// SchedulePause pauses or resumes a job's schedule in one statement.
// Resuming a paused cursor moves Last to now (or keeps a Last that is later
// still), so ticks that fell while paused never fire; a job without a cursor
// gets one at now. A cursor already in the asked state is left as it is.
func (s *Store) SchedulePause(ctx context.Context, job string, paused bool, now time.Time) (*store.Cursor, error) {
	if job == "" {
		return nil, errors.New("pause schedule: job name is empty")
	}
	var cur *store.Cursor
	err := s.write(ctx, "pause schedule "+job, func(c *conn) (err error) {
		cur, err = scanCursor(c.queryRow(ctx, `INSERT INTO cursors (job, last, paused, updated_at)
				VALUES ($1, COALESCE($3::timestamptz, now()), $2, COALESCE($3::timestamptz, now()))
			ON CONFLICT (job) DO UPDATE SET
				last = CASE WHEN excluded.paused THEN cursors.last ELSE GREATEST(cursors.last, excluded.last) END,
				paused = excluded.paused, updated_at = excluded.updated_at
			WHERE cursors.paused <> excluded.paused
			RETURNING `+cursorColumns, job, paused, ts(now)))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err = getCursor(ctx, c, job, false)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return cur, nil
}
