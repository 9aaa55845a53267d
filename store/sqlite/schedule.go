package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// getCursor returns the job's cursor, or nil when it has none.
func getCursor(ctx context.Context, c conn, job string) (*store.Cursor, error) {
	cur, err := rowscan.Cursor[micros](c.queryRow(ctx, sqlGetCursor, job))
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
	rows, err := s.read().query(ctx, `SELECT `+rowscan.CursorColumns+` FROM cursors WHERE job IN (SELECT value FROM json_each(?))`,
		jsonStrings(jobNames))
	if err := collectCursors(rows, err, out); err != nil {
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
		items := make([]*fireItem, len(ps))
		for i, p := range ps {
			items[i] = &fireItem{p: p, runs: runs[i], res: &store.FireResult{}}
			results[i] = items[i].res
		}
		err := store.FireRounds(ps, func(from, to int) error { return fireRound(ctx, c, items[from:to]) })
		if err != nil {
			return err
		}
		at := now(time.Time{})
		for i, p := range ps {
			if p.Notify == nil {
				continue
			}
			ns, err := store.SkippedNotifications(p, results[i], now(cmpTime(p.Now, at)))
			if err != nil {
				return err
			}
			if err := insertNotifications(ctx, c, ns); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// fireItem is one fire of a batch, with what its round found and decided.
type fireItem struct {
	p    store.FireParams
	runs []store.RunInsertParams
	res  *store.FireResult

	won         bool                    // the compare-and-set succeeded, and the fire is not deferred
	fresh       []store.RunInsertParams // the runs to make
	lastSkipped time.Time
}

// fireRound is the one code path of fires, inside a write transaction, for
// fires of distinct jobs, each as if alone. What it reads, it reads once
// for all of them, and what it writes it writes in chunks of rows:
//
//  1. The compare-and-set: the cursors of the round's jobs and the
//     occurrences of their ticks that have a run are read (readCursors);
//     a fire wins when the cursor is the one it expects (none, when it
//     expects none) and is not paused, and the ticks of a winner whose
//     occurrence is free are fresh, the others duplicates.
//  2. For the winners whose overlap policy looks at active runs, those
//     runs (activeRuns); a fire ahead of time that meets one is deferred,
//     and the others apply their policy (applyOverlap).
//  3. The new runs of the winners (makeRuns), then the writes
//     (writeFires): the runs with their occurrences and events, and the
//     cursors.
func fireRound(ctx context.Context, c conn, items []*fireItem) error {
	found, err := readCursors(ctx, c, items)
	if err != nil {
		return err
	}

	var overlapJobs []string
	for _, it := range items {
		p, res := it.p, it.res
		cur := found.cursors[p.Job]
		res.Cursor = cur
		switch {
		case cur == nil && !p.Expect.IsZero(),
			cur != nil && (p.Expect.IsZero() || cur.Last.UnixMicro() != p.Expect.UnixMicro()),
			cur != nil && cur.Paused:
			continue
		}
		it.won = true
		it.fresh, it.lastSkipped = store.FreshRuns(p, res, it.runs, found.taken)
		if len(it.fresh) > 0 && (p.Overlap == jobs.OverlapSkip || p.Overlap == jobs.OverlapReplace) {
			overlapJobs = append(overlapJobs, p.Job)
		}
	}

	active, err := activeRuns(ctx, c, overlapJobs)
	if err != nil {
		return err
	}
	var made madeRuns
	for _, it := range items {
		if !it.won {
			continue
		}
		at := now(it.p.Now)
		if store.Deferred(it.p, it.fresh, len(active[it.p.Job]), at) {
			it.won, it.res.Deferred = false, true
			continue
		}
		if err := applyOverlap(ctx, c, it, active[it.p.Job], at); err != nil {
			return err
		}
		if err := makeRuns(ctx, c, it, at, &made); err != nil {
			return err
		}
	}
	return writeFires(ctx, c, items, found.cursors, &made)
}

// cursorsFound is what the compare-and-set of a round reads: the cursors
// of its jobs, and the occurrences of its ticks that have a run.
type cursorsFound struct {
	cursors map[string]*store.Cursor
	taken   map[store.Occurrence]bool
}

// readCursors reads the cursors of the round's jobs and the occurrences
// of their ticks that have a run.
func readCursors(ctx context.Context, c conn, items []*fireItem) (*cursorsFound, error) {
	found := &cursorsFound{cursors: map[string]*store.Cursor{}, taken: map[store.Occurrence]bool{}}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.p.Job
	}
	rows, err := c.query(ctx, `SELECT `+rowscan.CursorColumns+` FROM cursors WHERE job IN (SELECT value FROM json_each(?))`,
		jsonStrings(names))
	if err := collectCursors(rows, err, found.cursors); err != nil {
		return nil, err
	}

	var ticks []store.Occurrence
	for _, it := range items {
		for _, r := range it.runs {
			if store.HasOccurrence(r.Trigger) {
				ticks = append(ticks, store.Occurrence{Job: r.Job, At: r.ScheduledAt.UnixMicro()})
			}
		}
	}
	err = chunkedQuery(ctx, c, sqlTakenOccurrences, 2, len(ticks), func(i int) []any {
		return []any{ticks[i].Job, ticks[i].At}
	}, func(row rowscan.Scanner) error {
		var k store.Occurrence
		if err := row.Scan(&k.Job, &k.At); err != nil {
			return err
		}
		found.taken[k] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// activeRuns reads the active runs of jobNames, by job.
func activeRuns(ctx context.Context, c conn, jobNames []string) (map[string][]*jobs.Run, error) {
	active := map[string][]*jobs.Run{}
	if len(jobNames) == 0 {
		return active, nil
	}
	all, err := scanRuns(c.query(ctx, `SELECT `+runColumns+` FROM runs INDEXED BY runs_job_active
		WHERE job IN (SELECT value FROM json_each(?)) AND status IN `+sqlActive, jsonStrings(jobNames)))
	if err != nil {
		return nil, err
	}
	for _, r := range all {
		active[r.Job] = append(active[r.Job], r)
	}
	return active, nil
}

// applyOverlap applies the overlap policy of a winning fire whose job has
// the active runs act: skip makes nothing and counts the fresh ticks as
// skipped; replace cancels the waiting runs (reason replaced) and asks the
// owners of running ones to stop them.
func applyOverlap(ctx context.Context, c conn, it *fireItem, act []*jobs.Run, at time.Time) error {
	if len(act) == 0 || len(it.fresh) == 0 {
		return nil
	}
	p, res := it.p, it.res
	switch p.Overlap {
	case jobs.OverlapSkip:
		it.lastSkipped = store.SkipOverlap(res, it.fresh, it.lastSkipped)
		it.fresh = nil
	case jobs.OverlapReplace:
		store.SortByCreation(act)
		for _, r := range act {
			replaced, err := cancelRun(ctx, c, r, store.RunCancelParams{Node: p.Node}, jobs.ReasonReplaced, at)
			if err != nil {
				return fmt.Errorf("job %s: %w", p.Job, err)
			}
			res.Replaced = append(res.Replaced, replaced)
		}
	}
	return nil
}

// madeRuns are the new runs of a round that writeFires writes together,
// each with its stored retry policy and the node that made it (for its
// event).
type madeRuns struct {
	runs   []*jobs.Run
	retry  []string
	nodeOf []string
}

// makeRuns makes the fresh runs of a winning fire at at. A run with a
// dedup id (not from a schedule) is written at once, one by one, as
// RunInsert writes it; the others go to made.
func makeRuns(ctx context.Context, c conn, it *fireItem, at time.Time, made *madeRuns) error {
	for _, r := range it.fresh {
		run, rt, err := newRun(r, at)
		if err != nil {
			return fmt.Errorf("job %s: %w", it.p.Job, err)
		}
		if run.DedupID != "" {
			if err := writeRun(ctx, c, run, rt, r.Node); err != nil {
				return fmt.Errorf("job %s: %w", it.p.Job, err)
			}
		} else {
			made.runs, made.retry, made.nodeOf = append(made.runs, run), append(made.retry, rt), append(made.nodeOf, r.Node)
		}
		it.res.Created = append(it.res.Created, run)
	}
	return nil
}

// writeFires writes the runs in made with their occurrences and events,
// and the cursors of the winning fires, given the cursors the round found;
// then it completes their results.
func writeFires(ctx context.Context, c conn, items []*fireItem, found map[string]*store.Cursor, made *madeRuns) error {
	var occ []*jobs.Run
	for _, r := range made.runs {
		if store.HasOccurrence(r.Trigger) {
			occ = append(occ, r)
		}
	}
	err := chunked(ctx, c, sqlInsertOccurrences, 4, len(occ), func(i int) []any {
		r := occ[i]
		return []any{r.Job, r.ScheduledAt.UnixMicro(), r.ID, store.OccurrenceKind(r.Trigger)}
	}, nil)
	if err != nil {
		return err
	}
	err = chunked(ctx, c, sqlInsertRuns, 13, len(made.runs), func(i int) []any {
		r := made.runs[i]
		return []any{r.ID, r.Job, r.MaxAttempts, string(r.Trigger), r.ScheduledAt.UnixMicro(), r.NotBefore.UnixMicro(),
			dbTime(r.NotAfter), r.CreatedAt.UnixMicro(), r.CreatedAt.UnixMicro(), nullString(r.DedupID),
			nullString(r.RerunOf), r.Payload, made.retry[i]}
	}, nil)
	if err != nil {
		return err
	}
	err = chunked(ctx, c, changeSQL.events, 9, len(made.runs), func(i int) []any {
		r := made.runs[i]
		return []any{r.ID, r.CreatedAt.UnixMicro(), made.nodeOf[i], 0, nil, string(jobs.StatusPending), string(jobs.ReasonCreated), "", ""}
	}, nil)
	if err != nil {
		return err
	}

	var won []*fireItem
	for _, it := range items {
		if !it.won {
			continue
		}
		p, res := it.p, it.res
		skipped := int64(p.Skipped + res.SkippedOverlap)
		if cur := found[p.Job]; cur != nil {
			skipped += cur.Skipped
			if cur.LastSkippedAt.After(it.lastSkipped) {
				it.lastSkipped = cur.LastSkippedAt
			}
		}
		at := now(p.Now)
		res.Cursor = &store.Cursor{Job: p.Job, Last: micro(p.Cursor), Skipped: skipped, LastSkippedAt: micro(it.lastSkipped), UpdatedAt: at}
		res.Advanced = true
		won = append(won, it)
	}
	return chunked(ctx, c, sqlAdvanceCursors, 5, len(won), func(i int) []any {
		cur := won[i].res.Cursor
		return []any{cur.Job, cur.Last.UnixMicro(), cur.Skipped, dbTime(cur.LastSkippedAt), cur.UpdatedAt.UnixMicro()}
	}, nil)
}

// The chunked statements of fireRound.
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
const sqlGetCursor = `SELECT ` + rowscan.CursorColumns + ` FROM cursors WHERE job = ?`

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
			// before their time. A cursor still later than at was not
			// fired ahead (the clock was stepped back): it stays.
			if _, err := withdraw(ctx, c, []string{job}, at); err != nil {
				return err
			}
			if cur, err = getCursor(ctx, c, job); err != nil {
				return err
			}
			last = cur.Last
		case cur.Last.After(at):
			last = cur.Last
		}
		cur, err = rowscan.Cursor[micros](c.queryRow(ctx, `INSERT INTO cursors (job, last, paused, skipped, updated_at)
			VALUES (?, ?, ?, 0, ?)
			ON CONFLICT (job) DO UPDATE SET last = excluded.last, paused = excluded.paused,
				updated_at = CASE WHEN cursors.last > excluded.updated_at THEN cursors.updated_at ELSE excluded.updated_at END
			RETURNING `+rowscan.CursorColumns, job, last.UnixMicro(), paused, at.UnixMicro()))
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
		rows, err := c.query(ctx, `SELECT `+rowscan.CursorColumns+` FROM cursors WHERE job IN (SELECT value FROM json_each(?))`,
			jsonStrings(jobNames))
		return collectCursors(rows, err, out)
	})
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// withdraw deletes the runs of jobNames fired ahead of at (pending, never
// attempted, made by a schedule before their tick, tick and not_before
// later than at) with their occurrences and events, and moves back to at
// the cursors later than at that were written before their tick (fired
// ahead) within store.MaxFireAhead of at, inside a write transaction. It
// returns how many runs it deleted. A cursor or run later than at that was
// written at or after its tick, or later than that, is not one fired
// ahead: the clock was stepped back since, and it stays.
func withdraw(ctx context.Context, c conn, jobNames []string, at time.Time) (int, error) {
	names, us, horizon := jsonStrings(jobNames), at.UnixMicro(), at.Add(store.MaxFireAhead).UnixMicro()
	ids, err := queryStrings(ctx, c, `SELECT id FROM runs INDEXED BY runs_job_active
		WHERE job IN (SELECT value FROM json_each(?)) AND status IN `+sqlActive+` AND status = 'pending' AND attempt = 0
			AND trigger_kind = 'schedule' AND scheduled_at > ? AND not_before > ? AND created_at < scheduled_at
			AND scheduled_at <= ?`, names, us, us, horizon)
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
		WHERE job IN (SELECT value FROM json_each(?)) AND last > ? AND updated_at < last AND last <= ?`, us, us, names, us, horizon)
	return len(ids), err
}

// cmpTime returns t, or else when t is zero.
func cmpTime(t, orElse time.Time) time.Time {
	if t.IsZero() {
		return orElse
	}
	return t
}
