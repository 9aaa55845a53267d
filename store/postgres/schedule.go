package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// getCursor returns the job's cursor, or nil when it has none; lock takes
// its row lock until the transaction ends.
func getCursor(ctx context.Context, c *conn, job string, lock bool) (*store.Cursor, error) {
	q := `SELECT ` + rowscan.CursorColumns + ` FROM cursors WHERE job = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	cur, err := rowscan.Cursor[tstz](c.queryRow(ctx, q, job))
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
	rows, err := s.read().query(ctx, `SELECT `+rowscan.CursorColumns+` FROM cursors WHERE job = ANY($1::text[])`, jobNames)
	if err != nil {
		return nil, fail("schedule cursors", err)
	}
	cursors, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Cursor, error) { return rowscan.Cursor[tstz](row) })
	if err != nil {
		return nil, fail("schedule cursors", err)
	}
	for _, cur := range cursors {
		out[cur.Job] = cur
	}
	return out, nil
}

// ScheduleFire advances a job's cursor by compare-and-set and makes the runs
// of the ticks it covers, in one transaction; see store.FireParams. It is a
// batch of one: see fireRound.
func (s *Store) ScheduleFire(ctx context.Context, p store.FireParams) (*store.FireResult, error) {
	res, err := s.scheduleFires(ctx, "fire schedule "+p.Job, []store.FireParams{p})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// ScheduleFireMany applies many fires in one transaction, each as
// ScheduleFire would, in order; see store.Store.
func (s *Store) ScheduleFireMany(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	return s.scheduleFires(ctx, "fire schedules", ps)
}

func (s *Store) scheduleFires(ctx context.Context, op string, ps []store.FireParams) ([]*store.FireResult, error) {
	if len(ps) == 0 {
		return []*store.FireResult{}, nil
	}
	runs := make([][]store.RunInsertParams, len(ps))
	for i, p := range ps {
		var err error
		if runs[i], err = store.FireRuns(p); err != nil {
			return nil, err
		}
	}
	var results []*store.FireResult
	err := s.write(ctx, op, func(c *conn) error {
		items := make([]*fireItem, len(ps))
		results = make([]*store.FireResult, len(ps))
		for i, p := range ps {
			items[i] = &fireItem{p: p, runs: runs[i], res: &store.FireResult{}, inBatch: len(ps) > 1}
			results[i] = items[i].res
		}
		err := store.FireRounds(ps, func(from, to int) error { return fireRound(ctx, c, items[from:to]) })
		if err != nil {
			return err
		}
		return writeSkipped(ctx, c, ps, results)
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
	// inBatch: errors about the fire name its job.
	inBatch bool

	won         bool                    // the compare-and-set succeeded
	fresh       []store.RunInsertParams // the runs to make
	lastSkipped time.Time
}

func (it *fireItem) fail(err error) error {
	if it.inBatch {
		return fmt.Errorf("job %s: %w", it.p.Job, err)
	}
	return err
}

// The statements of a fire. Cursors are locked and made in the order of
// their jobs, and runs locked in the order of their ids, so that
// concurrent batches do not deadlock. (A batch that fires a job twice
// takes its locks in two rounds; should that meet another batch in a
// deadlock, write runs the transaction again.)
const (
	sqlLockCursors = `SELECT ` + rowscan.CursorColumns + ` FROM cursors WHERE job = ANY($1::text[]) ORDER BY job FOR UPDATE`
	// sqlMakeCursors: a concurrent maker waits for this transaction, then
	// finds the row and loses.
	sqlMakeCursors = `INSERT INTO cursors (job, last, updated_at)
		SELECT job, last, COALESCE(updated_at, now())
		FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS n(job, last, updated_at)
		ORDER BY job
		ON CONFLICT (job) DO NOTHING RETURNING job`
	sqlGetCursors  = `SELECT ` + rowscan.CursorColumns + ` FROM cursors WHERE job = ANY($1::text[])`
	sqlOccurrences = `SELECT o.job, o.scheduled_at FROM occurrences o
		JOIN unnest($1::text[], $2::timestamptz[]) AS k(job, scheduled_at)
			ON o.job = k.job AND o.scheduled_at = k.scheduled_at`
	sqlLockActiveRuns = `SELECT ` + runColumns + `, now() FROM runs
		WHERE job = ANY($1::text[]) AND status IN ` + sqlActive + ` AND ` + sqlNamedJobs + ` ORDER BY id FOR UPDATE`
)

var sqlAdvanceCursors = `UPDATE cursors SET last = u.last, skipped = cursors.skipped + u.skipped,
		last_skipped_at = GREATEST(cursors.last_skipped_at, u.last_skipped_at),
		updated_at = COALESCE(u.updated_at, now())
	FROM unnest($1::text[], $2::timestamptz[], $3::int8[], $4::timestamptz[], $5::timestamptz[])
		AS u(job, last, skipped, last_skipped_at, updated_at)
	WHERE cursors.job = u.job
	RETURNING ` + qualified("cursors", rowscan.CursorColumns)

// fireRound applies fires of distinct jobs, each as if alone, in at most
// three round trips:
//
//  1. The compare-and-set (lockCursors): the cursors the fires expect are
//     locked (FOR UPDATE), those they expect to make are made (a row just
//     inserted is locked too), so fires of one job from several nodes are
//     serialized and all but one find the cursor moved; then the
//     occurrences of their ticks are read. A paused cursor does not
//     advance either: the caller re-reads it and sees Paused.
//  2. For the fires whose overlap policy looks at active runs: those runs,
//     locked (applyOverlap).
//  3. The writes (writeFires): the replaced runs, the new runs with their
//     occurrences and events (a tick whose occurrence a concurrent
//     RunInsert has just made is a duplicate), and the cursors.
func fireRound(ctx context.Context, c *conn, items []*fireItem) error {
	found, err := lockCursors(ctx, c, items)
	if err != nil {
		return err
	}

	// The winners of the compare-and-set, and their ticks whose occurrence
	// is free; the others are duplicates.
	var overlapJobs []string
	for _, it := range items {
		p, res := it.p, it.res
		cur := found.cursors[p.Job]
		res.Cursor = cur
		switch {
		case p.Expect.IsZero() && !found.made[p.Job]:
			continue
		case !p.Expect.IsZero() && (cur == nil || cur.Last.UnixMicro() != p.Expect.UnixMicro() || cur.Paused):
			continue
		}
		it.won = true
		it.fresh, it.lastSkipped = store.FreshRuns(p, res, it.runs, found.taken)
		if len(it.fresh) > 0 && (p.Overlap == jobs.OverlapSkip || p.Overlap == jobs.OverlapReplace) {
			overlapJobs = append(overlapJobs, p.Job)
		}
	}

	var ch changes
	if len(overlapJobs) > 0 {
		if err := applyOverlap(ctx, c, items, overlapJobs, &ch); err != nil {
			return err
		}
	}
	return writeFires(ctx, c, items, &ch)
}

// cursorsFound is what the compare-and-set of a round found.
type cursorsFound struct {
	// cursors: the cursors of the round's jobs, locked when the fire
	// expects one; made: the jobs whose cursor this transaction made;
	// taken: the occurrences of the round's ticks that have a run.
	cursors map[string]*store.Cursor
	made    map[string]bool
	taken   map[store.Occurrence]bool
}

// lockCursors runs the compare-and-set of a round in one round trip.
func lockCursors(ctx context.Context, c *conn, items []*fireItem) (*cursorsFound, error) {
	var (
		lockJobs, makeJobs []string
		makeLast, makeNow  []pgtype.Timestamptz
		tickJobs           []string
		tickTimes          []time.Time
	)
	for _, it := range items {
		if it.p.Expect.IsZero() {
			makeJobs = append(makeJobs, it.p.Job)
			makeLast, makeNow = append(makeLast, tsArg(it.p.Cursor)), append(makeNow, tsArg(it.p.Now))
		} else {
			lockJobs = append(lockJobs, it.p.Job)
		}
		for _, r := range it.runs {
			if store.HasOccurrence(r.Trigger) {
				tickJobs, tickTimes = append(tickJobs, r.Job), append(tickTimes, r.ScheduledAt.UTC().Truncate(time.Microsecond))
			}
		}
	}
	found := &cursorsFound{cursors: map[string]*store.Cursor{}, made: map[string]bool{}, taken: map[store.Occurrence]bool{}}
	var b pgx.Batch
	if len(lockJobs) > 0 {
		b.Queue(sqlLockCursors, lockJobs).Query(collectCursors(found.cursors))
	}
	if len(makeJobs) > 0 {
		b.Queue(sqlMakeCursors, makeJobs, makeLast, makeNow).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var job string
				if err := rows.Scan(&job); err != nil {
					return err
				}
				found.made[job] = true
			}
			return rows.Err()
		})
		b.Queue(sqlGetCursors, makeJobs).Query(collectCursors(found.cursors))
	}
	if len(tickJobs) > 0 {
		b.Queue(sqlOccurrences, tickJobs, tickTimes).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k store.Occurrence
				var at time.Time
				if err := rows.Scan(&k.Job, &at); err != nil {
					return err
				}
				k.At = at.UnixMicro()
				found.taken[k] = true
			}
			return rows.Err()
		})
	}
	if err := c.send(ctx, &b); err != nil {
		return nil, err
	}
	return found, nil
}

// collectCursors returns a callback that reads cursors into by job.
func collectCursors(into map[string]*store.Cursor) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			cur, err := rowscan.Cursor[tstz](rows)
			if err != nil {
				return err
			}
			into[cur.Job] = cur
		}
		return rows.Err()
	}
}

// writeFires writes, in one round trip, ch (the runs that overlap replace
// cancelled), the winning fires' new runs, and their cursors; then it
// completes their results.
func writeFires(ctx context.Context, c *conn, items []*fireItem, ch *changes) error {
	var (
		b                    pgx.Batch
		newRuns              []newRun
		cursorJobs           []string
		last, skippedAt, now []pgtype.Timestamptz
		skipped              []int64
	)
	ch.queue(c, &b)
	for _, it := range items {
		if !it.won {
			continue
		}
		for _, r := range it.fresh {
			nr, err := newRunOf(r, it.p.Now)
			if err != nil {
				return it.fail(err)
			}
			newRuns = append(newRuns, nr)
		}
		cursorJobs, last, now = append(cursorJobs, it.p.Job), append(last, tsArg(it.p.Cursor)), append(now, tsArg(it.p.Now))
		skipped = append(skipped, int64(it.p.Skipped+it.res.SkippedOverlap))
		skippedAt = append(skippedAt, tsArg(it.lastSkipped))
	}
	created := make([]*jobs.Run, len(newRuns))
	queueInsertRuns(c, &b, newRuns, created)
	advanced := map[string]*store.Cursor{}
	if len(cursorJobs) > 0 {
		b.Queue(sqlAdvanceCursors, cursorJobs, last, skipped, skippedAt, now).Query(collectCursors(advanced))
	}
	if err := c.send(ctx, &b); err != nil {
		return err
	}

	for _, it := range items {
		if !it.won {
			continue
		}
		for range it.fresh {
			if run := created[0]; run != nil {
				it.res.Created = append(it.res.Created, run)
			} else { // made by a RunInsert since the occurrences were read
				it.res.Duplicates++
			}
			created = created[1:]
		}
		if it.res.Cursor = advanced[it.p.Job]; it.res.Cursor == nil {
			return fmt.Errorf("cursor of %s: %w", it.p.Job, store.ErrNotFound)
		}
		it.res.Advanced = true
	}
	return nil
}

// applyOverlap locks the active runs of jobs and applies the overlap
// policy of the winning fires of those jobs: skip makes nothing and counts
// the ticks as skipped; replace cancels the waiting runs (reason replaced)
// and asks the owners of running ones to stop them, in ch.
func applyOverlap(ctx context.Context, c *conn, items []*fireItem, jobNames []string, ch *changes) error {
	runs, now, err := scanRunsNow(c.query(ctx, sqlLockActiveRuns, jobNames))
	if err != nil {
		return err
	}
	active := map[string][]*jobs.Run{}
	byID := make(map[string]*jobs.Run, len(runs))
	for _, r := range runs {
		active[r.Job] = append(active[r.Job], r)
		byID[r.ID] = r
	}
	for _, it := range items {
		p, res := it.p, it.res
		act := active[p.Job]
		if !it.won || len(it.fresh) == 0 || len(act) == 0 {
			continue
		}
		at := now
		if !p.Now.IsZero() {
			at = p.Now.UTC().Truncate(time.Microsecond)
		}
		if store.Deferred(p, it.fresh, len(act), at) {
			it.won, res.Deferred = false, true
			continue
		}
		switch p.Overlap {
		case jobs.OverlapSkip:
			it.lastSkipped = store.SkipOverlap(res, it.fresh, it.lastSkipped)
			it.fresh = nil
		case jobs.OverlapReplace:
			store.SortByCreation(act)
			for _, r := range act {
				if r.Status == jobs.StatusRunning {
					res.Replaced = append(res.Replaced, ch.requestCancel(r, at))
					continue
				}
				replaced, err := ch.transition(byID, jobs.Cancel(r.ID, p.Node, jobs.ReasonReplaced, p.Now), now)
				if err != nil {
					return it.fail(err)
				}
				res.Replaced = append(res.Replaced, replaced)
			}
		}
	}
	return nil
}

// SchedulePause pauses or resumes a job's schedule. Resuming a paused
// cursor moves Last to now (or keeps a Last that is later still), so ticks
// that fell while paused never fire; a job without a cursor gets one at
// now. A cursor already in the asked state is left as it is. Pausing first
// withdraws the ticks fired ahead of now (the cursor is locked before the
// runs, as fires lock them).
func (s *Store) SchedulePause(ctx context.Context, job string, paused bool, now time.Time) (*store.Cursor, error) {
	if job == "" {
		return nil, errors.New("pause schedule: job name is empty")
	}
	var cur *store.Cursor
	err := s.write(ctx, "pause schedule "+job, func(c *conn) (err error) {
		if paused {
			if _, err := withdraw(ctx, c, []string{job}, now); err != nil {
				return err
			}
		}
		cur, err = rowscan.Cursor[tstz](c.queryRow(ctx, `INSERT INTO cursors (job, last, paused, updated_at)
				VALUES ($1, COALESCE($3::timestamptz, now()), $2, COALESCE($3::timestamptz, now()))
			ON CONFLICT (job) DO UPDATE SET
				last = CASE WHEN excluded.paused THEN cursors.last ELSE GREATEST(cursors.last, excluded.last) END,
				paused = excluded.paused,
				updated_at = CASE WHEN cursors.last > excluded.updated_at THEN cursors.updated_at ELSE excluded.updated_at END
			WHERE cursors.paused <> excluded.paused
			RETURNING `+rowscan.CursorColumns, job, paused, ts(now)))
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

// ScheduleWithdraw takes back the ticks of jobNames fired ahead of now; see
// store.Store.
func (s *Store) ScheduleWithdraw(ctx context.Context, jobNames []string, now time.Time) (map[string]*store.Cursor, int, error) {
	out := map[string]*store.Cursor{}
	if len(jobNames) == 0 {
		return out, 0, nil
	}
	var n int
	err := s.write(ctx, "withdraw ticks", func(c *conn) (err error) {
		clear(out)
		if n, err = withdraw(ctx, c, jobNames, now); err != nil {
			return err
		}
		rows, err := c.query(ctx, sqlGetCursors, jobNames)
		if err != nil {
			return err
		}
		return collectCursors(out)(rows)
	})
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// sqlWithdraw deletes the runs of the jobs $1 fired ahead of $2 (pending,
// never attempted, made by a schedule before their tick, tick and
// not_before later than $2) with their occurrences and events, and moves
// back to $2 the cursors later than it that were written before their
// tick (fired ahead), within store.MaxFireAhead of $2 ($3). A cursor or run
// later than $2 that was written at or after its tick, or later than
// that, is not one fired ahead: the clock was stepped back since, and it
// stays. A run that a claim has locked is deleted only if the claim
// did not start it: the delete waits for the claim and checks the row
// again.
const sqlWithdraw = `WITH at AS (SELECT COALESCE($2::timestamptz, now()) AS t),
	w AS (
		DELETE FROM runs USING at WHERE job = ANY($1::text[]) AND status = 'pending' AND attempt = 0
			AND trigger_kind = 'schedule' AND scheduled_at > at.t AND not_before > at.t AND created_at < scheduled_at
			AND scheduled_at <= at.t + $3::interval
		RETURNING id, job, scheduled_at),
	o AS (DELETE FROM occurrences o USING w WHERE o.job = w.job AND o.scheduled_at = w.scheduled_at AND o.run_id = w.id),
	e AS (DELETE FROM events e USING w WHERE e.run_id = w.id),
	c AS (UPDATE cursors SET last = at.t, updated_at = at.t FROM at
		WHERE job = ANY($1::text[]) AND last > at.t AND updated_at < last AND last <= at.t + $3::interval)
SELECT count(*) FROM w`

// withdraw runs sqlWithdraw inside a write transaction, after it locked the
// jobs' cursors (in job order, as fires lock them: a fire holds the cursor
// while it locks the job's active runs), and returns how many runs it
// deleted.
func withdraw(ctx context.Context, c *conn, jobNames []string, now time.Time) (int, error) {
	var n int
	var b pgx.Batch
	b.Queue(`SELECT job FROM cursors WHERE job = ANY($1::text[]) ORDER BY job FOR UPDATE`, jobNames).Exec(func(pgconn.CommandTag) error { return nil })
	b.Queue(sqlWithdraw, jobNames, ts(now), store.MaxFireAhead).QueryRow(func(row pgx.Row) error { return row.Scan(&n) })
	if err := c.send(ctx, &b); err != nil {
		return 0, err
	}
	return n, nil
}
