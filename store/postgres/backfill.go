package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// lockBackfills is the space of the advisory locks of the advances of
// each job's backfills (with jobLockKey).
const lockBackfills = lockSpace + 2

const backfillColumns = `id, job, from_at, to_at, next_at, max_parallel, created, skipped, actor, node,
	created_at, updated_at, done_at`

func scanBackfill(row pgx.Row) (*store.Backfill, error) {
	var b store.Backfill
	var from, to, next, created, updated, done pgtype.Timestamptz
	var maxParallel int32
	err := row.Scan(&b.ID, &b.Job, &from, &to, &next, &maxParallel, &b.Created, &b.Skipped, &b.Actor, &b.Node,
		&created, &updated, &done)
	if err != nil {
		return nil, err
	}
	b.MaxParallel = int(maxParallel)
	b.From, b.To, b.Next = utcOf(from), utcOf(to), utcOf(next)
	b.CreatedAt, b.UpdatedAt, b.DoneAt = utcOf(created), utcOf(updated), utcOf(done)
	return &b, nil
}

// BackfillCreate records a backfill; see store.Backfills.
func (s *Store) BackfillCreate(ctx context.Context, p store.BackfillCreateParams) (*store.Backfill, error) {
	switch {
	case p.Job == "":
		return nil, errors.New("create backfill: job name is empty")
	case p.From.IsZero() || p.To.IsZero() || p.To.Before(p.From):
		return nil, fmt.Errorf("create backfill: range %s to %s is empty", p.From, p.To)
	case p.Next.Before(p.From) || p.Next.After(p.To):
		return nil, fmt.Errorf("create backfill: first tick %s is outside %s to %s", p.Next, p.From, p.To)
	case p.MaxParallel < 0:
		return nil, errors.New("create backfill: max parallel must not be negative")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	var b *store.Backfill
	err = s.writeOne(ctx, "create backfill", func(c *conn) error {
		var err error
		b, err = scanBackfill(c.queryRow(ctx, `INSERT INTO backfills (id, job, from_at, to_at, next_at, max_parallel,
			actor, node, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9::timestamptz, now()), COALESCE($9::timestamptz, now()))
			RETURNING `+backfillColumns,
			id.String(), p.Job, ts(p.From), ts(p.To), ts(p.Next), p.MaxParallel, cleanText(p.Actor), p.Node, ts(p.Now)))
		return err
	})
	return b, err
}

// BackfillsActive returns the unfinished backfills of the named jobs;
// see store.Backfills.
func (s *Store) BackfillsActive(ctx context.Context, jobNames []string) ([]*store.Backfill, error) {
	if len(jobNames) == 0 {
		return nil, nil
	}
	// The scheduling loop asks this every poll interval with every job it
	// declares, and there are few unfinished backfills: all of them are
	// read, from their partial index, and those of other jobs left out
	// here. (Encoding the names as an array at every call was most of an
	// idle daemon's CPU with 10,000 jobs.)
	rows, err := s.read().query(ctx, `SELECT `+backfillColumns+` FROM backfills
		WHERE next_at IS NOT NULL ORDER BY created_at, id`)
	if err != nil {
		return nil, fail("active backfills", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Backfill, error) { return scanBackfill(row) })
	if err != nil {
		return nil, fail("active backfills", err)
	}
	named := store.NewNameIndex(jobNames)
	out := all[:0]
	for _, b := range all {
		if named.Has(b.Job) {
			out = append(out, b)
		}
	}
	return out, nil
}

// BackfillAdvance makes the runs of a backfill's next ticks, under the
// lock of its row; see store.BackfillAdvanceParams.
func (s *Store) BackfillAdvance(ctx context.Context, p store.BackfillAdvanceParams) (*store.BackfillAdvanceResult, error) {
	for _, r := range p.Runs {
		if r.Trigger != jobs.TriggerBackfill {
			return nil, fmt.Errorf("advance backfill: a run of trigger %q", r.Trigger)
		}
	}
	var res *store.BackfillAdvanceResult
	err := s.write(ctx, "advance backfill", func(c *conn) error {
		// The advances of one job's backfills take turns (lockBackfills),
		// so that those of overlapping ranges count each other's runs.
		if len(p.Runs) > 0 {
			if _, err := c.exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockBackfills, jobLockKey(p.Runs[0].Job)); err != nil {
				return err
			}
		}
		b, err := scanBackfill(c.queryRow(ctx, `SELECT `+backfillColumns+` FROM backfills WHERE id = $1 FOR UPDATE`, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("backfill %s: %w", p.ID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		res = &store.BackfillAdvanceResult{Backfill: b}
		expect := p.Expect.UTC().Truncate(time.Microsecond)
		if b.Done() || !b.Next.Equal(expect) {
			return nil
		}
		for _, r := range p.Runs {
			if r.Job != b.Job || r.ScheduledAt.Before(b.From) || r.ScheduledAt.After(b.To) {
				return fmt.Errorf("a run of %s at %s is not in the backfill of %s from %s to %s", r.Job,
					r.ScheduledAt.UTC().Format(time.RFC3339), b.Job, b.From.Format(time.RFC3339), b.To.Format(time.RFC3339))
			}
		}
		var active int
		err = c.queryRow(ctx, `SELECT count(*) FROM runs WHERE job = $1 AND job <> '' AND status IN ('pending', 'running', 'retrying')
			AND trigger_kind = 'backfill' AND scheduled_at BETWEEN $2 AND $3`, b.Job, ts(b.From), ts(b.To)).Scan(&active)
		if err != nil {
			return err
		}
		taken := map[int64]bool{}
		if len(p.Runs) > 0 {
			occ, err := occurrenceRuns(ctx, c, b.Job, p.Runs[0].ScheduledAt, p.Runs[len(p.Runs)-1].ScheduledAt)
			if err != nil {
				return err
			}
			for k := range occ {
				taken[k] = true
			}
		}
		made, skipped, next, err := store.AdvanceBackfill(p, store.BackfillSlots(b.MaxParallel, active),
			func(t time.Time) bool { return taken[t.UnixMicro()] },
			func(r store.RunInsertParams) (*jobs.Run, error) {
				run, dup, err := insertRun(ctx, c, r, p.Now)
				if err != nil || dup {
					return nil, err
				}
				taken[run.ScheduledAt.UnixMicro()] = true // a tick listed twice
				return run, nil
			})
		if err != nil {
			return err
		}
		if len(made) == 0 && skipped == 0 && next.Equal(b.Next) {
			res.Advanced = true // no room: nothing to write
			return nil
		}
		b, err = scanBackfill(c.queryRow(ctx, `UPDATE backfills SET next_at = $2, created = created + $3, skipped = skipped + $4,
			updated_at = COALESCE($5::timestamptz, now()),
			done_at = CASE WHEN $2::timestamptz IS NULL THEN COALESCE($5::timestamptz, now()) END
			WHERE id = $1 RETURNING `+backfillColumns, p.ID, ts(next), len(made), skipped, ts(p.Now)))
		if err != nil {
			return err
		}
		res = &store.BackfillAdvanceResult{Advanced: true, Created: made, Skipped: skipped, Backfill: b}
		return nil
	})
	return res, err
}

// OccurrenceRuns returns the runs of the ticks of job from from to to; see
// store.Backfills.
func (s *Store) OccurrenceRuns(ctx context.Context, job string, from, to time.Time) (map[int64]string, error) {
	out, err := occurrenceRuns(ctx, s.read(), job, from, to)
	if err != nil {
		return nil, fail("occurrence runs", err)
	}
	return out, nil
}

func occurrenceRuns(ctx context.Context, c *conn, job string, from, to time.Time) (map[int64]string, error) {
	rows, err := c.query(ctx, `SELECT scheduled_at, run_id FROM occurrences WHERE job = $1 AND scheduled_at BETWEEN $2 AND $3`,
		job, ts(from), ts(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var at time.Time
		var id string
		if err := rows.Scan(&at, &id); err != nil {
			return nil, err
		}
		out[at.UnixMicro()] = id
	}
	return out, rows.Err()
}
