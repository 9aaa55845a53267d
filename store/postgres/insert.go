package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// firstTime returns the first non-zero time, or zero.
func firstTime(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// RunInsert makes a run (one-off, manual or rerun).
func (s *Store) RunInsert(ctx context.Context, p store.RunInsertParams) (*jobs.Run, error) {
	var run *jobs.Run
	err := s.write(ctx, "insert run", func(c *conn) (err error) {
		var dup bool
		run, dup, err = insertRun(ctx, c, p, p.Now)
		if err == nil && dup && p.ParentRunID != "" {
			err = store.ChainDuplicate(p, "")
		} else if err == nil && dup {
			var other string
			err = c.queryRow(ctx, `SELECT run_id FROM occurrences WHERE job = $1 AND scheduled_at = $2`,
				p.Job, ts(p.ScheduledAt)).Scan(&other)
			if err == nil {
				err = fmt.Errorf("%w: job %s at %s already has run %s",
					store.ErrDuplicate, p.Job, p.ScheduledAt.UTC().Format(time.RFC3339Nano), other)
			}
		}
		return err
	})
	return run, err
}

// RunInsertMany makes many runs in one transaction, all or none: a statement
// per insertBatch runs (sqlInsertRuns), all sent in one round trip.
func (s *Store) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]*jobs.Run, error) {
	rs := make([]newRun, len(ps))
	for i, p := range ps {
		if p.Trigger == jobs.TriggerChain || p.ParentRunID != "" {
			return nil, errors.New("insert runs: a run of a chain is made by its parent's end, not in bulk")
		}
		r, err := newRunOf(p, p.Now)
		if err != nil {
			return nil, fmt.Errorf("insert runs: %w", err)
		}
		rs[i] = r
	}
	made := make([]*jobs.Run, len(rs))
	err := s.write(ctx, "insert runs", func(c *conn) error {
		clear(made)
		var b pgx.Batch
		for start := 0; start < len(rs); start += insertBatch {
			end := min(start+insertBatch, len(rs))
			queueInsertRuns(c, &b, rs[start:end], made[start:end])
		}
		if err := c.send(ctx, &b); err != nil {
			return err
		}
		for i, run := range made {
			if run == nil {
				p := ps[i]
				return fmt.Errorf("%w: job %s at %s already has a run", store.ErrDuplicate, p.Job, p.ScheduledAt.UTC().Format(time.RFC3339Nano))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return made, nil
}

// writeChains makes the runs of the chains of the transitions ts whose
// results are results (store.ChainRuns), in their transaction. A run of a
// chain that its parent made already is not made again (ON CONFLICT on
// runs_parent): the parent's end is written once, and the index holds in
// any case.
func writeChains(ctx context.Context, c *conn, ts []jobs.Transition, results []store.TransitionResult) error {
	for i, t := range ts {
		if t.Chain.Empty() || results[i].Err != nil {
			continue
		}
		for _, p := range store.ChainRuns(t, results[i].Run) {
			if _, _, err := insertRun(ctx, c, p, p.Now); err != nil {
				return fmt.Errorf("chain of run %s: job %s: %w", results[i].Run.ID, p.Job, err)
			}
		}
	}
	return nil
}

// insertBatch bounds the runs of one sqlInsertRuns statement.
const insertBatch = 1000

// insertRun makes a run, its occurrence and its creation event in one
// statement. dup reports that the occurrence had a run already: then
// nothing was written. A zero now is the database clock. (A fire makes its
// runs with queueInsertRuns, which does the same for many.)
func insertRun(ctx context.Context, c *conn, p store.RunInsertParams, now time.Time) (run *jobs.Run, dup bool, err error) {
	r, err := newRunOf(p, now)
	if err != nil {
		return nil, false, err
	}
	// $3: the clock; $4: scheduled_at (the occurrence key); $5: not_before.
	const at = `COALESCE($3::timestamptz, now())`
	const scheduledAt = `COALESCE($4::timestamptz, ` + at + `)`
	var occurrence, from string
	if store.HasOccurrence(p.Trigger) {
		// ON CONFLICT DO NOTHING: a concurrent maker of the occurrence is
		// waited for; if it commits, this statement makes nothing.
		occurrence = `o AS (
			INSERT INTO occurrences (job, scheduled_at, run_id, kind) VALUES ($2, ` + scheduledAt + `, $1,
				CASE $6::text WHEN 'backfill' THEN 'schedule' ELSE $6::text END)
			ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING run_id
		), `
		from = ` FROM o`
	}
	var onConflict string
	if p.ParentRunID != "" {
		// The parent made its run of the job already: nothing is made.
		onConflict = ` ON CONFLICT (parent_run_id, job) WHERE parent_run_id IS NOT NULL DO NOTHING`
	}
	run, err = scanRun(c.queryRow(ctx, `WITH `+occurrence+`r AS (
			INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
				not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry, actor, parent_run_id)
			SELECT $1::text, $2::text, 'pending', 0, $7::int4, $6::text, `+scheduledAt+`, COALESCE($5::timestamptz, `+scheduledAt+`),
				$8::timestamptz, `+at+`, `+at+`, $9::text, $10::text, $11::bytea, $12::jsonb, $14::text, $15::text`+from+onConflict+`
			RETURNING `+runColumns+`
		), e AS (
			INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, actor)
			SELECT id, created_at, $13::text, 0, NULL, 'pending', 'created', actor FROM r
		)
		SELECT * FROM r`,
		r.id, p.Job, ts(now), ts(p.ScheduledAt), ts(p.NotBefore), string(p.Trigger), max(p.Retry.MaxAttempts, 1),
		ts(p.NotAfter), nullString(p.DedupID), nullString(p.RerunOf), bytesOf(p.Payload), r.retry, p.Node,
		cleanText(p.Actor), nullString(p.ParentRunID)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	c.wake()
	return run, false, nil
}

// newRun is a run to make, checked, with its id.
type newRun struct {
	p     store.RunInsertParams
	now   time.Time // zero: the database clock
	id    string
	retry string
}

// newRunOf checks p and gives the run its id.
func newRunOf(p store.RunInsertParams, now time.Time) (newRun, error) {
	switch {
	case p.Job == "":
		return newRun{}, errors.New("job name is empty")
	case p.Trigger != jobs.TriggerSchedule && p.Trigger != jobs.TriggerOnce &&
		p.Trigger != jobs.TriggerManual && p.Trigger != jobs.TriggerRerun && p.Trigger != jobs.TriggerChain &&
		p.Trigger != jobs.TriggerBackfill:
		return newRun{}, fmt.Errorf("unknown trigger %q", p.Trigger)
	case store.HasOccurrence(p.Trigger) && p.ScheduledAt.IsZero():
		return newRun{}, fmt.Errorf("a %s run needs its scheduled time", p.Trigger)
	}
	if err := store.CheckChainParams(p); err != nil {
		return newRun{}, err
	}
	// The window is checked here when its start is known, and by the
	// runs_window constraint in any case.
	if err := jobs.ValidateWindow(firstTime(p.NotBefore, p.ScheduledAt, now), p.NotAfter); err != nil {
		return newRun{}, fmt.Errorf("run window: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return newRun{}, err
	}
	retry, err := store.EncodeRetry(p.Retry, p.NoRetryExitCodes)
	if err != nil {
		return newRun{}, err
	}
	return newRun{p: p, now: now, id: id.String(), retry: retry}, nil
}

// sqlInsertRuns makes runs, their occurrences and their creation events.
// ON CONFLICT DO NOTHING: a concurrent maker of an occurrence is waited
// for; if it commits, the run of that occurrence is not made. In each row,
// a NULL clock is the database's, a NULL scheduled_at is the clock and a
// NULL not_before is scheduled_at.
const sqlInsertRuns = `WITH n AS (
		SELECT n.*, COALESCE(n.now, now()) AS at, COALESCE(n.scheduled_at, n.now, now()) AS tick
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[],
			$7::timestamptz[], $8::int4[], $9::text[], $10::text[], $11::bytea[], $12::text[], $13::text[],
			$14::text[])
			WITH ORDINALITY AS n(id, job, trigger_kind, now, scheduled_at, not_before, not_after, max_attempts,
				dedup_id, rerun_of, payload, retry, node, actor, ord)
	), o AS (
		INSERT INTO occurrences (job, scheduled_at, run_id, kind)
		SELECT job, tick, id, CASE trigger_kind WHEN 'backfill' THEN 'schedule' ELSE trigger_kind END
		FROM n WHERE trigger_kind IN ('schedule', 'once', 'backfill') ORDER BY ord
		ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING run_id
	), r AS (
		INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry, actor)
		SELECT id, job, 'pending', 0, max_attempts, trigger_kind, tick, COALESCE(not_before, tick),
			not_after, at, at, NULLIF(dedup_id, ''), NULLIF(rerun_of, ''), payload, retry::jsonb, actor
		FROM n WHERE trigger_kind NOT IN ('schedule', 'once', 'backfill') OR id IN (SELECT run_id FROM o) ORDER BY ord
		RETURNING ` + runColumns + `
	), e AS (
		INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, actor)
		SELECT r.id, r.created_at, n.node, 0, NULL, 'pending', 'created', r.actor FROM r JOIN n ON n.id = r.id ORDER BY n.ord
	)
	SELECT * FROM r`

// queueInsertRuns queues the statement that makes rs; once it ran, made[i]
// is the run made for rs[i], or nil when its occurrence had a run already.
func queueInsertRuns(c *conn, b *pgx.Batch, rs []newRun, made []*jobs.Run) {
	if len(rs) == 0 {
		return
	}
	n := len(rs)
	var (
		ids, jobNames, triggers, dedupIDs = make(textArray, n), make(textArray, n), make(textArray, n), make(textArray, n)
		rerunOfs, retries, nodes, actors  = make(textArray, n), make(textArray, n), make(textArray, n), make(textArray, n)
		nows, scheduled                   = make(tsArray, n), make(tsArray, n)
		notBefore, notAfter               = make(tsArray, n), make(tsArray, n)
		maxAttempts                       = make(int4Array, n)
		payloads                          = make(byteArray, n)
	)
	index := make(map[string]int, n)
	for i, r := range rs {
		p := r.p
		index[r.id] = i
		ids[i], jobNames[i], triggers[i] = text(r.id), text(p.Job), text(p.Trigger)
		nows[i], scheduled[i] = tsArg(r.now), tsArg(p.ScheduledAt)
		notBefore[i], notAfter[i] = tsArg(p.NotBefore), tsArg(p.NotAfter)
		maxAttempts[i] = int4Of(max(p.Retry.MaxAttempts, 1))
		dedupIDs[i], rerunOfs[i] = text(p.DedupID), text(p.RerunOf)
		payloads[i], retries[i], nodes[i] = bytea(p.Payload), text(r.retry), text(p.Node)
		actors[i] = text(cleanText(p.Actor))
	}
	b.Queue(sqlInsertRuns, ids, jobNames, triggers, nows, scheduled, notBefore, notAfter, maxAttempts,
		dedupIDs, rerunOfs, payloads, retries, nodes, actors).Query(func(rows pgx.Rows) error {
		sc := newRunScanner()
		for rows.Next() {
			run, err := sc.scan(rows)
			if err != nil {
				return err
			}
			made[index[run.ID]] = run
			c.wake()
		}
		return rows.Err()
	})
}
