package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// getCursor returns the job's cursor, or nil when it has none.
func getCursor(ctx context.Context, c conn, job string) (*store.Cursor, error) {
	cur, err := scanCursor(c.queryRow(ctx, sqlGetCursor, job))
	if errors.Is(err, sql.ErrNoRows) {
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
	// One JSON parameter, not one per job: SQLite bounds the variables of a
	// statement (32,766), and a config may declare 100,000 jobs.
	rows, err := s.read().query(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE job IN (SELECT value FROM json_each(?))`,
		jsonStrings(jobNames))
	if err != nil {
		return nil, fail("schedule cursors", err)
	}
	defer rows.Close()
	for rows.Next() {
		cur, err := scanCursor(rows)
		if err != nil {
			return nil, fail("schedule cursors", err)
		}
		out[cur.Job] = cur
	}
	if err := rows.Err(); err != nil {
		return nil, fail("schedule cursors", err)
	}
	return out, nil
}

// ScheduleFire advances a job's cursor by compare-and-set and makes the runs
// of the ticks it covers, in one transaction; see store.FireParams. A paused
// cursor does not advance either: the caller re-reads it and sees Paused.
// It is a batch of one.
func (s *Store) ScheduleFire(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	results, err := s.scheduleFires(ctx, "fire schedule "+p.Job, []store.FireParams{p})
	if err != nil {
		return nil, err
	}
	return results[0], nil
}

// ScheduleFireMany applies many fires in one transaction, each as
// ScheduleFire would, in order; see store.Store.
func (s *Store) ScheduleFireMany(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	return s.scheduleFires(ctx, "fire schedules", ps)
}

func (s *Store) scheduleFires(ctx context.Context, op string, ps []store.FireParams) ([]*store.FireResult, error) {
	results := make([]*store.FireResult, len(ps))
	if len(ps) == 0 {
		return results, nil
	}
	runs := make([][]store.RunInsertParams, len(ps))
	for i, p := range ps {
		var err error
		if runs[i], err = store.FireRuns(p); err != nil {
			return nil, err
		}
	}
	err := s.write(ctx, op, func(c conn) error {
		// A job fired twice sees its first fire: the second starts a new
		// round of fireAll.
		for start := 0; start < len(ps); {
			end, seen := start, map[string]bool{}
			for end < len(ps) && !seen[ps[end].Job] {
				seen[ps[end].Job] = true
				end++
			}
			if err := fireAll(ctx, c, ps[start:end], runs[start:end], results[start:end]); err != nil {
				return err
			}
			start = end
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// fireAll is the one code path of fires, inside a write transaction, for
// fires of distinct jobs: the compare-and-set of each cursor, the
// occurrences, the overlap policy, the runs and the new cursors. The
// cursors, the taken occurrences and the active runs are read once for all
// of them, and the runs, their occurrences and events, and the cursors are
// written in chunks of rows.
func fireAll(ctx context.Context, c conn, ps []store.FireParams, runs [][]store.RunInsertParams, results []*store.FireResult) error {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Job
	}
	cursors := map[string]*store.Cursor{}
	rows, err := c.query(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE job IN (SELECT value FROM json_each(?))`,
		jsonStrings(names))
	if err != nil {
		return err
	}
	for rows.Next() {
		cur, err := scanCursor(rows)
		if err != nil {
			rows.Close()
			return err
		}
		cursors[cur.Job] = cur
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	// The occurrences of the ticks that have a run already.
	type occurrence struct {
		job string
		at  int64
	}
	var ticks []occurrence
	for i := range ps {
		for _, r := range runs[i] {
			if hasOccurrence(r.Trigger) {
				ticks = append(ticks, occurrence{r.Job, r.ScheduledAt.UnixMicro()})
			}
		}
	}
	taken := map[occurrence]bool{}
	err = chunkedQuery(ctx, c, sqlTakenOccurrences, 2, len(ticks), func(i int) []any {
		return []any{ticks[i].job, ticks[i].at}
	}, func(row scanner) error {
		var k occurrence
		if err := row.Scan(&k.job, &k.at); err != nil {
			return err
		}
		taken[k] = true
		return nil
	})
	if err != nil {
		return err
	}

	// The compare-and-set of each cursor, and the fresh ticks of the winners.
	type item struct {
		i           int
		fresh       []store.RunInsertParams
		lastSkipped time.Time
	}
	var won []*item
	var overlapJobs []string
	for i, p := range ps {
		cur := cursors[p.Job]
		results[i] = &store.FireResult{Cursor: cur}
		switch {
		case cur == nil && !p.Expect.IsZero(),
			cur != nil && (p.Expect.IsZero() || cur.Last.UnixMicro() != p.Expect.UnixMicro()),
			cur != nil && cur.Paused:
			continue
		}
		it := &item{i: i, lastSkipped: p.LastSkipped}
		seen := map[int64]bool{}
		for _, r := range runs[i] {
			if hasOccurrence(r.Trigger) {
				key := r.ScheduledAt.UnixMicro()
				if taken[occurrence{r.Job, key}] || seen[key] {
					results[i].Duplicates++
					continue
				}
				seen[key] = true
			}
			it.fresh = append(it.fresh, r)
		}
		if len(it.fresh) > 0 && (p.Overlap == jobs.OverlapSkip || p.Overlap == jobs.OverlapReplace) {
			overlapJobs = append(overlapJobs, p.Job)
		}
		won = append(won, it)
	}

	// The overlap policies, on the active runs of their jobs.
	active := map[string][]*jobs.Run{}
	if len(overlapJobs) > 0 {
		all, err := scanRuns(c.query(ctx, `SELECT `+runColumns+` FROM runs INDEXED BY runs_job_active
			WHERE job IN (SELECT value FROM json_each(?)) AND status IN `+sqlActive, jsonStrings(overlapJobs)))
		if err != nil {
			return err
		}
		for _, r := range all {
			active[r.Job] = append(active[r.Job], r)
		}
	}
	var (
		made   []*jobs.Run
		retry  []string
		nodeOf []string
	)
	kept := won[:0]
	for _, it := range won {
		p, res := ps[it.i], results[it.i]
		at := now(p.Now)
		if store.Deferred(p, it.fresh, len(active[p.Job]), at) {
			res.Deferred = true
			continue
		}
		kept = append(kept, it)
		if runs := active[p.Job]; len(runs) > 0 && len(it.fresh) > 0 {
			switch p.Overlap {
			case jobs.OverlapSkip:
				it.lastSkipped = store.SkipOverlap(res, it.fresh, it.lastSkipped)
				it.fresh = nil
			case jobs.OverlapReplace:
				store.SortByCreation(runs)
				for _, r := range runs {
					replaced, err := cancelRun(ctx, c, r, p.Node, jobs.ReasonReplaced, at)
					if err != nil {
						return fmt.Errorf("job %s: %w", p.Job, err)
					}
					res.Replaced = append(res.Replaced, replaced)
				}
			}
		}
		for _, r := range it.fresh {
			run, rt, err := newRun(r, at)
			if err != nil {
				return fmt.Errorf("job %s: %w", p.Job, err)
			}
			if run.DedupID != "" { // not from a schedule; checked one by one
				if err := writeRun(ctx, c, run, rt, r.Node); err != nil {
					return fmt.Errorf("job %s: %w", p.Job, err)
				}
			} else {
				made, retry, nodeOf = append(made, run), append(retry, rt), append(nodeOf, r.Node)
			}
			res.Created = append(res.Created, run)
		}
	}

	won = kept

	// The writes: occurrences, runs, events, cursors.
	var occ []*jobs.Run
	for _, r := range made {
		if hasOccurrence(r.Trigger) {
			occ = append(occ, r)
		}
	}
	err = chunked(ctx, c, sqlInsertOccurrences, 4, len(occ), func(i int) []any {
		r := occ[i]
		return []any{r.Job, r.ScheduledAt.UnixMicro(), r.ID, string(r.Trigger)}
	}, nil)
	if err != nil {
		return err
	}
	err = chunked(ctx, c, sqlInsertRuns, 13, len(made), func(i int) []any {
		r := made[i]
		return []any{r.ID, r.Job, r.MaxAttempts, string(r.Trigger), r.ScheduledAt.UnixMicro(), r.NotBefore.UnixMicro(),
			dbTime(r.NotAfter), r.CreatedAt.UnixMicro(), r.CreatedAt.UnixMicro(), nullString(r.DedupID),
			nullString(r.RerunOf), r.Payload, retry[i]}
	}, nil)
	if err != nil {
		return err
	}
	err = chunked(ctx, c, changeSQL.events, 8, len(made), func(i int) []any {
		r := made[i]
		return []any{r.ID, r.CreatedAt.UnixMicro(), nodeOf[i], 0, nil, string(jobs.StatusPending), string(jobs.ReasonCreated), ""}
	}, nil)
	if err != nil {
		return err
	}
	for _, it := range won {
		p, res := ps[it.i], results[it.i]
		skipped := int64(p.Skipped + res.SkippedOverlap)
		if cur := cursors[p.Job]; cur != nil {
			skipped += cur.Skipped
			if cur.LastSkippedAt.After(it.lastSkipped) {
				it.lastSkipped = cur.LastSkippedAt
			}
		}
		at := now(p.Now)
		res.Cursor = &store.Cursor{Job: p.Job, Last: micro(p.Cursor), Skipped: skipped, LastSkippedAt: micro(it.lastSkipped), UpdatedAt: at}
		res.Advanced = true
	}
	return chunked(ctx, c, sqlAdvanceCursors, 5, len(won), func(i int) []any {
		cur := results[won[i].i].Cursor
		return []any{cur.Job, cur.Last.UnixMicro(), cur.Skipped, dbTime(cur.LastSkippedAt), cur.UpdatedAt.UnixMicro()}
	}, nil)
}

// The chunked statements of fireAll.
var (
	sqlTakenOccurrences = chunkStatements(2, func(values string) string {
		return `SELECT o.job, o.scheduled_at FROM (VALUES ` + values + `) AS v
			JOIN occurrences o ON o.job = v.column1 AND o.scheduled_at = v.column2`
	})
	sqlInsertOccurrences = chunkStatements(4, func(values string) string {
		return `INSERT INTO occurrences (job, scheduled_at, run_id, kind)
			SELECT column1, column2, column3, column4 FROM (VALUES ` + values + `) WHERE column1 IS NOT NULL`
	})
	sqlInsertRuns = chunkStatements(13, func(values string) string {
		return `INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind,
			scheduled_at, not_before, not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry_json)
			SELECT column1, column2, 'pending', 0, column3, column4, column5, column6, column7, column8, column9,
				column10, column11, column12, column13
			FROM (VALUES ` + values + `) WHERE column1 IS NOT NULL`
	})
	sqlAdvanceCursors = chunkStatements(5, func(values string) string {
		return `INSERT INTO cursors (job, last, paused, skipped, last_skipped_at, updated_at)
			SELECT column1, column2, 0, column3, column4, column5 FROM (VALUES ` + values + `) WHERE column1 IS NOT NULL
			ON CONFLICT (job) DO UPDATE SET last = excluded.last, skipped = excluded.skipped,
				last_skipped_at = excluded.last_skipped_at, updated_at = excluded.updated_at`
	})
)

// sqlGetCursor reads one job's cursor.
const sqlGetCursor = `SELECT ` + cursorColumns + ` FROM cursors WHERE job = ?`

// SchedulePause pauses or resumes a job's schedule. Resuming a paused
// cursor moves Last to now, so ticks that fell while paused never fire; a job
// without a cursor gets one at now.
func (s *Store) SchedulePause(ctx context.Context, job string, paused bool, at time.Time) (*store.Cursor, error) {
	if job == "" {
		return nil, errors.New("pause schedule: job name is empty")
	}
	at = now(at)
	var cur *store.Cursor
	err := s.write(ctx, "pause schedule "+job, func(c conn) (err error) {
		if cur, err = getCursor(ctx, c, job); err != nil {
			return err
		}
		last := at
		switch {
		case cur == nil:
		case cur.Paused == paused:
			return nil
		case paused:
			// The ticks fired ahead are taken back: the job was paused
			// before their time.
			if _, err := withdraw(ctx, c, []string{job}, at); err != nil {
				return err
			}
			if !cur.Last.After(at) {
				last = cur.Last
			}
		case cur.Last.After(at):
			last = cur.Last
		}
		cur, err = scanCursor(c.queryRow(ctx, `INSERT INTO cursors (job, last, paused, skipped, updated_at)
			VALUES (?, ?, ?, 0, ?)
			ON CONFLICT (job) DO UPDATE SET last = excluded.last, paused = excluded.paused, updated_at = excluded.updated_at
			RETURNING `+cursorColumns, job, last.UnixMicro(), paused, at.UnixMicro()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return cur, nil
}

// ScheduleWithdraw takes back the ticks of jobNames fired ahead of now; see
// store.Store.
func (s *Store) ScheduleWithdraw(ctx context.Context, jobNames []string, at time.Time) (map[string]*store.Cursor, int, error) {
	out := map[string]*store.Cursor{}
	if len(jobNames) == 0 {
		return out, 0, nil
	}
	at = now(at)
	var n int
	err := s.write(ctx, "withdraw ticks", func(c conn) (err error) {
		if n, err = withdraw(ctx, c, jobNames, at); err != nil {
			return err
		}
		rows, err := c.query(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE job IN (SELECT value FROM json_each(?))`,
			jsonStrings(jobNames))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			cur, err := scanCursor(rows)
			if err != nil {
				return err
			}
			out[cur.Job] = cur
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// withdraw deletes the runs of jobNames fired ahead of at (pending, never
// attempted, made by a schedule, tick and not_before later than at) with
// their occurrences and events, and moves cursors later than at back to
// at, inside a write transaction. It returns how many runs it deleted.
func withdraw(ctx context.Context, c conn, jobNames []string, at time.Time) (int, error) {
	names, us := jsonStrings(jobNames), at.UnixMicro()
	ids, err := queryStrings(ctx, c, `SELECT id FROM runs INDEXED BY runs_job_active
		WHERE job IN (SELECT value FROM json_each(?)) AND status IN `+sqlActive+` AND status = 'pending' AND attempt = 0
			AND trigger_kind = 'schedule' AND scheduled_at > ? AND not_before > ?`, names, us, us)
	if err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		list := jsonStrings(ids)
		for _, q := range []string{
			`DELETE FROM occurrences WHERE rowid IN (SELECT o.rowid FROM runs r
				JOIN occurrences o ON o.job = r.job AND o.scheduled_at = r.scheduled_at AND o.run_id = r.id
				WHERE r.id IN (SELECT value FROM json_each(?)))`,
			`DELETE FROM events WHERE run_id IN (SELECT value FROM json_each(?))`,
			`DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))`,
		} {
			if _, err := c.exec(ctx, q, list); err != nil {
				return 0, err
			}
		}
	}
	_, err = c.exec(ctx, `UPDATE cursors SET last = ?, updated_at = ?
		WHERE job IN (SELECT value FROM json_each(?)) AND last > ?`, us, us, names, us)
	return len(ids), err
}
