package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

const backfillColumns = `id, job, from_at, to_at, next_at, max_parallel, created, skipped, actor, node,
	created_at, updated_at, done_at`

func scanBackfill(row interface{ Scan(...any) error }) (*store.Backfill, error) {
	var b store.Backfill
	var from, to, created, updated int64
	var next, done sql.NullInt64
	err := row.Scan(&b.ID, &b.Job, &from, &to, &next, &b.MaxParallel, &b.Created, &b.Skipped, &b.Actor, &b.Node,
		&created, &updated, &done)
	if err != nil {
		return nil, err
	}
	b.From, b.To = time.UnixMicro(from).UTC(), time.UnixMicro(to).UTC()
	b.CreatedAt, b.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	b.Next, b.DoneAt = goTime(next), goTime(done)
	return &b, nil
}

// BackfillCreate records a backfill; see store.Backfills.
func (s *Store) BackfillCreate(ctx context.Context, p store.BackfillCreateParams) (*store.Backfill, error) {
	if err := checkBackfill(p); err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	at := now(p.Now)
	var b *store.Backfill
	err = s.write(ctx, "create backfill", func(c conn) error {
		var err error
		b, err = scanBackfill(c.queryRow(ctx, `INSERT INTO backfills (id, job, from_at, to_at, next_at, max_parallel,
			actor, node, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+backfillColumns,
			id.String(), p.Job, p.From.UnixMicro(), p.To.UnixMicro(), p.Next.UnixMicro(), p.MaxParallel, p.Actor, p.Node,
			at.UnixMicro(), at.UnixMicro()))
		return err
	})
	return b, err
}

// checkBackfill refuses a backfill that could make no sense.
func checkBackfill(p store.BackfillCreateParams) error {
	switch {
	case p.Job == "":
		return errors.New("create backfill: job name is empty")
	case p.From.IsZero() || p.To.IsZero() || p.To.Before(p.From):
		return fmt.Errorf("create backfill: range %s to %s is empty", p.From, p.To)
	case p.Next.Before(p.From) || p.Next.After(p.To):
		return fmt.Errorf("create backfill: first tick %s is outside %s to %s", p.Next, p.From, p.To)
	case p.MaxParallel < 0:
		return errors.New("create backfill: max parallel must not be negative")
	}
	return nil
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
	// here. (The names sent as a JSON array made SQLite build an index of
	// them at every call: most of an idle daemon's CPU with 10,000 jobs.)
	rows, err := s.read().query(ctx, `SELECT `+backfillColumns+` FROM backfills INDEXED BY backfills_active
		WHERE next_at IS NOT NULL ORDER BY created_at, id`)
	if err != nil {
		return nil, fail("active backfills", err)
	}
	defer rows.Close()
	named := store.NewNameIndex(jobNames)
	var out []*store.Backfill
	for rows.Next() {
		b, err := scanBackfill(rows)
		if err != nil {
			return nil, fail("active backfills", err)
		}
		if named.Has(b.Job) {
			out = append(out, b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fail("active backfills", err)
	}
	return out, nil
}

// BackfillAdvance makes the runs of a backfill's next ticks; see
// store.BackfillAdvanceParams.
func (s *Store) BackfillAdvance(ctx context.Context, p store.BackfillAdvanceParams) (*store.BackfillAdvanceResult, error) {
	for _, r := range p.Runs {
		if r.Trigger != jobs.TriggerBackfill {
			return nil, fmt.Errorf("advance backfill: a run of trigger %q", r.Trigger)
		}
	}
	var res *store.BackfillAdvanceResult
	err := s.write(ctx, "advance backfill", func(c conn) error {
		at := now(p.Now)
		b, err := scanBackfill(c.queryRow(ctx, `SELECT `+backfillColumns+` FROM backfills WHERE id = ?`, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("backfill %s: %w", p.ID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		res = &store.BackfillAdvanceResult{Backfill: b}
		if b.Done() || !b.Next.Equal(micro(p.Expect)) {
			return nil
		}
		for _, r := range p.Runs {
			if r.Job != b.Job || r.ScheduledAt.Before(b.From) || r.ScheduledAt.After(b.To) {
				return fmt.Errorf("a run of %s at %s is not in the backfill of %s from %s to %s", r.Job,
					r.ScheduledAt.UTC().Format(time.RFC3339), b.Job, b.From.Format(time.RFC3339), b.To.Format(time.RFC3339))
			}
		}
		var active int
		err = c.queryRow(ctx, `SELECT count(*) FROM runs WHERE job = ? AND status IN `+sqlActive+`
			AND trigger_kind = 'backfill' AND scheduled_at BETWEEN ? AND ?`,
			b.Job, b.From.UnixMicro(), b.To.UnixMicro()).Scan(&active)
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
				run, err := insertRun(ctx, c, r, at)
				if err == nil {
					taken[run.ScheduledAt.UnixMicro()] = true // a tick listed twice
				}
				return run, err
			})
		if err != nil {
			return err
		}
		if len(made) == 0 && skipped == 0 && next.Equal(b.Next) {
			res.Advanced = true // no room: nothing to write
			return nil
		}
		b, err = scanBackfill(c.queryRow(ctx, `UPDATE backfills SET next_at = ?, created = created + ?, skipped = skipped + ?,
			updated_at = ?, done_at = CASE WHEN ? IS NULL THEN ? END WHERE id = ? RETURNING `+backfillColumns,
			dbTime(next), len(made), skipped, at.UnixMicro(), dbTime(next), at.UnixMicro(), p.ID))
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

func occurrenceRuns(ctx context.Context, c conn, job string, from, to time.Time) (map[int64]string, error) {
	rows, err := c.query(ctx, `SELECT scheduled_at, run_id FROM occurrences WHERE job = ? AND scheduled_at BETWEEN ? AND ?`,
		job, from.UnixMicro(), to.UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var at int64
		var id string
		if err := rows.Scan(&at, &id); err != nil {
			return nil, err
		}
		out[at] = id
	}
	return out, rows.Err()
}
