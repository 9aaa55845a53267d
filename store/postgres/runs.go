package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Status lists as SQL literals. The statements spell them exactly as the
// partial indexes do, so that the planner uses those.
const (
	sqlActive   = `('pending', 'running', 'retrying')`
	sqlWaiting  = `('pending', 'retrying')`
	sqlTerminal = `('completed', 'cancelled', 'dead_letter')`
)

// batchSize bounds the rows one statement of expiry or pruning handles, so
// that no transaction holds many locks for long.
const batchSize = 1000

// hasOccurrence reports whether runs of trigger are identified by their
// occurrence (job, scheduled time).
func hasOccurrence(t jobs.Trigger) bool {
	return t == jobs.TriggerSchedule || t == jobs.TriggerOnce
}

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
		if err == nil && dup {
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
	if hasOccurrence(p.Trigger) {
		// ON CONFLICT DO NOTHING: a concurrent maker of the occurrence is
		// waited for; if it commits, this statement makes nothing.
		occurrence = `o AS (
			INSERT INTO occurrences (job, scheduled_at, run_id, kind) VALUES ($2, ` + scheduledAt + `, $1, $6)
			ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING run_id
		), `
		from = ` FROM o`
	}
	run, err = scanRun(c.queryRow(ctx, `WITH `+occurrence+`r AS (
			INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
				not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry, actor)
			SELECT $1::text, $2::text, 'pending', 0, $7::int4, $6::text, `+scheduledAt+`, COALESCE($5::timestamptz, `+scheduledAt+`),
				$8::timestamptz, `+at+`, `+at+`, $9::text, $10::text, $11::bytea, $12::jsonb, $14::text`+from+`
			RETURNING `+runColumns+`
		), e AS (
			INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, actor)
			SELECT id, created_at, $13::text, 0, NULL, 'pending', 'created', actor FROM r
		)
		SELECT * FROM r`,
		r.id, p.Job, ts(now), ts(p.ScheduledAt), ts(p.NotBefore), string(p.Trigger), max(p.Retry.MaxAttempts, 1),
		ts(p.NotAfter), nullString(p.DedupID), nullString(p.RerunOf), bytesOf(p.Payload), r.retry, p.Node,
		cleanText(p.Actor)))
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
		p.Trigger != jobs.TriggerManual && p.Trigger != jobs.TriggerRerun:
		return newRun{}, fmt.Errorf("unknown trigger %q", p.Trigger)
	case hasOccurrence(p.Trigger) && p.ScheduledAt.IsZero():
		return newRun{}, fmt.Errorf("a %s run needs its scheduled time", p.Trigger)
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
		SELECT job, tick, id, trigger_kind FROM n WHERE trigger_kind IN ('schedule', 'once') ORDER BY ord
		ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING run_id
	), r AS (
		INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry, actor)
		SELECT id, job, 'pending', 0, max_attempts, trigger_kind, tick, COALESCE(not_before, tick),
			not_after, at, at, NULLIF(dedup_id, ''), NULLIF(rerun_of, ''), payload, retry::jsonb, actor
		FROM n WHERE trigger_kind NOT IN ('schedule', 'once') OR id IN (SELECT run_id FROM o) ORDER BY ord
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

// getRun reads a run; lock takes its row lock until the transaction ends.
func getRun(ctx context.Context, c *conn, id string, lock bool) (*jobs.Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs WHERE id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	run, err := scanRun(c.queryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return run, err
}

// RunTransition applies a change of status; see store.Store. It is a batch
// of one.
func (s *Store) RunTransition(ctx context.Context, t jobs.Transition) (*jobs.Run, error) {
	res, err := s.runTransitions(ctx, "run transition", []jobs.Transition{t})
	if err != nil {
		return nil, err
	}
	return res[0].Run, res[0].Err
}

// RunTransitionMany applies many transitions in one transaction, in order;
// see store.Store.
func (s *Store) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	return s.runTransitions(ctx, "run transitions", ts)
}

func (s *Store) runTransitions(ctx context.Context, op string, ts []jobs.Transition) ([]store.TransitionResult, error) {
	var results []store.TransitionResult
	if len(ts) == 0 {
		return []store.TransitionResult{}, nil
	}
	err := s.write(ctx, op, func(c *conn) (err error) {
		results, err = transitions(ctx, c, ts)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		if r.Err != nil {
			results[i].Err = fmt.Errorf("run transition: %w", r.Err)
		}
	}
	return results, nil
}

// transitions is the one code path that changes a run's status after its
// claim. The ends of attempts into a terminal status are written at once,
// without reading their runs (endAttempts); every other transition, and
// those of them whose fence or claim the statement did not find, go the
// locked way (lockedTransitions), in the order of ts.
func transitions(ctx context.Context, c *conn, ts []jobs.Transition) ([]store.TransitionResult, error) {
	results, err := runTransitionsOnly(ctx, c, ts)
	if err != nil {
		return nil, err
	}
	return results, writeNotifications(ctx, c, ts, results)
}

// runTransitionsOnly writes the transitions' changes of runs; see
// transitions.
func runTransitionsOnly(ctx context.Context, c *conn, ts []jobs.Transition) ([]store.TransitionResult, error) {
	idx := endsAtOnce(ts)
	if len(idx) == 0 {
		return lockedTransitions(ctx, c, ts)
	}
	ended, err := endAttempts(ctx, c, ts, idx)
	if err != nil {
		return nil, err
	}
	results := make([]store.TransitionResult, len(ts))
	if len(ended) == len(ts) {
		for i, t := range ts {
			results[i].Run = ended[t.RunID]
		}
		return results, nil
	}
	var (
		rest   []jobs.Transition
		restAt []int
	)
	for i, t := range ts {
		if r := ended[t.RunID]; r != nil {
			results[i].Run = r
			continue
		}
		rest, restAt = append(rest, t), append(restAt, i)
	}
	res, err := lockedTransitions(ctx, c, rest)
	if err != nil {
		return nil, err
	}
	for k, i := range restAt {
		results[i] = res[k]
	}
	return results, nil
}

// lockedTransitions locks the runs of ts and reads them in one statement,
// in the order of their ids so that concurrent batches never deadlock;
// decides each transition in turn in Go, each on the run as the ones
// before it left it (a refusal is that transition's result, and writes
// nothing); then writes all the changes in one round trip. A completion
// racing a recovery of the same attempt waits for the row lock, then finds
// the fence broken.
func lockedTransitions(ctx context.Context, c *conn, ts []jobs.Transition) ([]store.TransitionResult, error) {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.RunID
	}
	runs, now, err := lockRuns(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	results := make([]store.TransitionResult, len(ts))
	ch := newChanges(len(ts))
	for i, t := range ts {
		results[i].Run, results[i].Err = ch.transition(runs, t, now)
	}
	var b pgx.Batch
	ch.queue(c, &b)
	if err := c.send(ctx, &b); err != nil {
		return nil, err
	}
	return results, nil
}

// transition applies one transition, for a caller that wants a refusal as
// its error.
func transition(ctx context.Context, c *conn, t jobs.Transition) (*jobs.Run, error) {
	res, err := transitions(ctx, c, []jobs.Transition{t})
	if err != nil {
		return nil, err
	}
	return res[0].Run, res[0].Err
}

// sqlLockRuns reads runs under their row locks, in the order of their ids,
// with the database clock; sqlLockRun reads one, with a scalar parameter
// (a simpler plan than one over an array).
const (
	sqlLockRuns = `SELECT ` + runColumns + `, now() FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`
	sqlLockRun  = `SELECT ` + runColumns + `, now() FROM runs WHERE id = $1 FOR UPDATE`
)

// lockRuns reads the runs of ids that exist, by id, under their row
// locks, and the database clock (zero when there is none).
func lockRuns(ctx context.Context, c *conn, ids []string) (map[string]*jobs.Run, time.Time, error) {
	q, arg := sqlLockRuns, any(textsOf(ids))
	if len(ids) > 0 && !slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
		q, arg = sqlLockRun, ids[0]
	}
	runs, now, err := scanRunsNow(c.query(ctx, q, arg))
	if err != nil {
		return nil, time.Time{}, err
	}
	byID := make(map[string]*jobs.Run, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
	}
	return byID, now, nil
}

// scanRunsNow reads rows of runColumns followed by the database clock, and
// closes them.
func scanRunsNow(rows pgx.Rows, err error) ([]*jobs.Run, time.Time, error) {
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var (
		runs []*jobs.Run
		now  time.Time
	)
	sc := newRunScanner(&now)
	for rows.Next() {
		run, err := sc.scan(rows)
		if err != nil {
			return nil, time.Time{}, err
		}
		runs = append(runs, run)
	}
	return runs, now.UTC(), rows.Err()
}

// claimLockTimeout bounds the wait for the locks of limited jobs.
const claimLockTimeout = "5s"

// jobLockKey is the advisory lock key of a job's claims (with lockJobs).
func jobLockKey(job string) int32 {
	h := fnv.New32a()
	h.Write([]byte(job))
	return int32(h.Sum32())
}

// sqlClaimAt is the clock of a claim ($2), and sqlClaimDue says that a run
// is due at it. The statements read a job's due runs as a range of the
// runs_claim index, (job, not_before <= now) in start order, so that a
// claim reads only the runs it takes: neither the runs waiting for a later
// time nor the history.
const (
	sqlClaimAt = `COALESCE($2::timestamptz, now())`
	// sqlDueWindow: a waiting run's window holds the claim's time.
	sqlDueWindow = `not_before <= ` + sqlClaimAt + ` AND (not_after IS NULL OR not_after > ` + sqlClaimAt + `)`
	sqlClaimDue  = `status IN ` + sqlWaiting + ` AND ` + sqlDueWindow
	// sqlNamedJobs is the clause of runs_active's condition, true of every
	// run, that the lock of jobs' active runs states and a read of one
	// job's due runs does not imply: such a read cannot use runs_active,
	// whatever the statistics say.
	sqlNamedJobs = `job <> ''`
	// sqlWaitingOfAll is runs_due's condition, which the reads of all
	// jobs' first waiting runs state: they can use no other index on
	// waiting runs, and no other read can use runs_due.
	sqlWaitingOfAll = `(status || '') IN ` + sqlWaiting
	// sqlDueOfAll is sqlClaimDue for those reads.
	sqlDueOfAll = sqlWaitingOfAll + ` AND ` + sqlDueWindow
	// sqlPickedDue is sqlClaimDue that no index serves (see sqlClaim): the
	// status as COALESCE(status, ''), which is the status (it is NOT NULL)
	// but neither the status of the other indexes' conditions nor runs_due's
	// status || ''. (As status || '', the candidates of a round were looked
	// up through runs_due.)
	sqlPickedDue = `COALESCE(status, '') IN ` + sqlWaiting + ` AND ` + sqlDueWindow
)

// sqlDueJobs returns those of the jobs $1 that have a due run: per job, the
// first due run in the order of the runs_claim index (ORDER BY and LIMIT 1
// keep the planner on that index, whatever its estimates).
const sqlDueJobs = `SELECT j FROM unnest($1::text[]) AS j CROSS JOIN LATERAL (
		SELECT 1 FROM runs WHERE job = j AND ` + sqlClaimDue + `
		ORDER BY not_before, created_at, id LIMIT 1) d`

// sqlClaim and sqlClaimOne claim up to $3 due runs of the jobs $1 whose
// concurrency limits are $4 (0: none), at most $7 of each, for node $5 and
// incarnation $6, and return them, each with the status it was claimed
// from in claimed_from.
// room: how many runs each job may still start; picked: the runs to claim;
// then the claim, set-based, which writes only the runs (claimed_from, the
// status the run is claimed from, as SET reads the row before the update:
// the attempt's row and the claim's event are written when the attempt
// ends). The claim finds the picked runs by the row versions it locked
// (ctid), as an array: joined to picked, whose size the planner cannot
// know, they could be hashed and the whole table scanned; looked up by id,
// each cost a probe of the primary key. A picked row is locked until the
// claim ends, so its version is the one the update finds; one that a
// transaction committed after the claim's snapshot, which FOR UPDATE locks
// in its newest version, is one this snapshot does not see: it is not
// claimed this time. A limited job's running runs are counted in the
// statement: the caller holds the job's advisory lock.
//
// sqlClaim, for several jobs: cand reads room.n of each job's due runs from
// the index without locks; picked looks them up by id, locks the first $3
// in start order that no one else holds (FOR UPDATE SKIP LOCKED, which
// checks each run again once it is locked), and locks no more than it
// claims. picked checks the status in a form that no index condition has
// (sqlPickedDue): with the status as such, a planner whose statistics
// predate a round of 10,000 runs fired ahead of one tick read every waiting
// run through the status indexes (runs_active and runs_status_created) and
// matched each against the candidates' ids, instead of a probe of the
// primary key per candidate. (runs_active's condition, with sqlNamedJobs,
// keeps it out of that choice; runs_status_created, whose first column is
// the status, is still in it.) Claimers of the same jobs at the same moment
// read the same runs, though, and all but one get few of them or none.
//
// sqlClaimOne, for one job: picked locks the job's due runs as it reads
// them, skipping those another claim holds, so that claimers of one
// backlog at the same moment (nodes of a cluster) each take a full batch.
// Over several jobs this would lock up to room.n runs of each job to claim
// $3 of them all.
const (
	sqlClaimRoom = `room AS (
		SELECT w.job, LEAST(CASE WHEN w.lim > 0
			THEN w.lim - (SELECT count(*) FROM runs WHERE job = w.job AND status = 'running')
			ELSE $3 END, w.cap, $3) AS n
		FROM unnest($1::text[], $4::int4[], $7::int4[]) AS w(job, lim, cap)
	)`
	sqlClaimUpdate = `r AS (
		UPDATE runs SET status = 'running', attempt = attempt + 1, node = $5, incarnation = $6,
			started_at = ` + sqlClaimAt + `, updated_at = ` + sqlClaimAt + `, reason = 'claimed', error = '',
			exit_code = NULL, cancel_requested = false, progress = 0, progress_message = '',
			claimed_from = status
		WHERE ctid = ANY(ARRAY(SELECT ctid FROM picked))
		RETURNING ` + runColumns + `
	)
	SELECT * FROM r ORDER BY not_before, created_at, id`
	sqlClaim = `WITH ` + sqlClaimRoom + `, cand AS (
		SELECT c.id FROM room CROSS JOIN LATERAL (
			SELECT id FROM runs WHERE job = room.job AND ` + sqlClaimDue + `
			ORDER BY not_before, created_at, id LIMIT GREATEST(room.n, 0)
		) c
	), picked AS (
		SELECT ctid FROM runs
		WHERE id = ANY(ARRAY(SELECT id FROM cand)) AND ` + sqlPickedDue + `
		ORDER BY not_before, created_at, id LIMIT $3
		FOR UPDATE SKIP LOCKED
	), ` + sqlClaimUpdate
	sqlClaimOne = `WITH ` + sqlClaimRoom + `, picked AS (
		SELECT c.ctid FROM room CROSS JOIN LATERAL (
			SELECT ctid FROM runs WHERE job = room.job AND ` + sqlClaimDue + `
			ORDER BY not_before, created_at, id LIMIT GREATEST(room.n, 0)
			FOR UPDATE SKIP LOCKED
		) c
	), ` + sqlClaimUpdate
)

// sqlDueHeads reads the first $1 due runs in start order (a range of the
// runs_due index) as stretches of consecutive runs of one job, in order:
// a job, and how many of its runs come before another job's.
const sqlDueHeads = `SELECT job, count(*) FROM (
		SELECT job, k, k - row_number() OVER (PARTITION BY job ORDER BY k) AS stretch FROM (
			SELECT job, row_number() OVER (ORDER BY not_before, created_at, id) AS k FROM (
				SELECT job, not_before, created_at, id FROM runs WHERE ` + sqlDueOfAll + `
				ORDER BY not_before, created_at, id LIMIT $1) d) h) s
	GROUP BY job, stretch ORDER BY min(k)`

// dueHead is a stretch of the first due runs that are one job's.
type dueHead struct {
	job string
	n   int
}

// RunsClaim atomically starts up to Limit due runs; see store.Store.
//
// A claim first reads which jobs the first store.DueScan(Limit) due runs
// of all jobs belong to, in start order (sqlDueHeads, outside any
// transaction: an idle poll ends there). It then claims those of the
// declared jobs among them, at most as many of each as it saw
// (sqlClaim): the work is what the claim takes, however many jobs are
// declared. When the scan was full and the claim took fewer than Limit
// runs (runs of other jobs, or of jobs at their limit, came first), a
// second claim looks at each declared job's own due runs (sqlDueJobs, then
// sqlClaim over the due ones): a backlog of one job never hides another
// job's due runs.
//
// A claim with Due set and at most DueScan(Limit) jobs, or of one job
// without a concurrency limit, skips the first read and claims from those
// jobs' due runs at once.
//
// FOR UPDATE SKIP LOCKED lets nodes claim the same jobs at once without
// waiting for each other or taking a run twice. When none of the jobs
// claimed has a concurrency limit, a claim is that one statement, outside
// any transaction.
//
// SKIP LOCKED cannot keep a concurrency limit, though: two claimers would
// each count the job's running runs before the other's claim commits. So
// when a limited job is claimed, one transaction takes an advisory lock per
// limited job (in the order of the lock keys, so that claimers never
// deadlock) and claims after that, with a snapshot that sees every claim
// committed before it got the locks: claims of one limited job are
// serialized across the cluster, while claims of unlimited jobs never
// wait. A run leaving running needs no lock; it only makes the count
// smaller.
//
// Each job's due runs are read in start order (not_before, created_at, id)
// from the runs_claim index, at most as many as the job can still take, and
// the first Limit of them in that order are claimed.
func (s *Store) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if p.Limit <= 0 || p.Jobs.Len() == 0 {
		return nil, nil
	}
	if p.Node == "" || p.Incarnation == "" {
		return nil, errors.New("claim runs: node and incarnation must be set")
	}
	scan := store.DueScan(p.Limit)
	if (p.Due && p.Jobs.Len() <= scan) || oneUnlimited(p.Jobs) {
		// The caller knows these jobs to have due runs (ticks it fired
		// ahead): one index probe per job costs less than reading which
		// jobs the first due runs belong to. A claim of one job without a
		// concurrency limit is one statement that reads only that job's
		// due runs, whether it has any or not: the first read would add a
		// statement to learn which of the first due runs are its (a cost
		// seen in the server's busy time in a burn-down of one job's
		// runs).
		return s.claim(ctx, p.Jobs.Names(), nil, p)
	}
	heads, seen, err := dueHeads(ctx, s.read(), scan, p.Now)
	if err != nil {
		return nil, fail("claim runs", err)
	}
	// The first due runs of the declared jobs, in start order, until they
	// can give Limit runs: a claim counts and locks only the jobs it takes,
	// and takes no run of a job past one of another job that comes first.
	var names []string
	caps, used := map[string]int{}, map[string]int{}
	more, room := false, 0
	for _, h := range heads {
		limit, ok := p.Jobs.Limit(h.job)
		switch {
		case !ok:
			continue
		case room >= p.Limit:
			more = true
			continue
		}
		if caps[h.job] == 0 {
			names = append(names, h.job)
		}
		n := min(h.n, p.Limit-room)
		caps[h.job] += n
		if limit > 0 {
			n = min(n, max(0, limit-used[h.job]))
			used[h.job] += n
		}
		room += n
	}
	var claimed []*jobs.Run
	if len(names) > 0 {
		slices.Sort(names)
		if claimed, err = s.claim(ctx, names, caps, p); err != nil {
			return nil, err
		}
	}
	if len(claimed) >= p.Limit || (seen < scan && !more) {
		return claimed, nil
	}

	// The first due runs were not this claim's to take: look at each
	// declared job.
	rows, err := s.read().query(ctx, sqlDueJobs, p.Jobs.Names(), ts(p.Now))
	dueJobs, err := collectStrings(rows, err)
	if err != nil {
		return claimed, fail("claim runs", err)
	}
	if len(dueJobs) == 0 {
		return claimed, nil
	}
	rest := p
	rest.Limit -= len(claimed)
	others, err := s.claim(ctx, dueJobs, nil, rest)
	if err != nil {
		return claimed, err
	}
	return append(claimed, others...), nil
}

// oneUnlimited reports whether jobs is one job without a concurrency
// limit.
func oneUnlimited(jobs store.JobLimits) bool {
	return jobs.Len() == 1 && !jobs.Limited()
}

// dueHeads returns the jobs of the first scan due runs in start order,
// with how many of them are each job's, and how many due runs it read.
func dueHeads(ctx context.Context, c *conn, scan int, now time.Time) ([]dueHead, int, error) {
	rows, err := c.query(ctx, sqlDueHeads, scan, ts(now))
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var heads []dueHead
	seen := 0
	for rows.Next() {
		var h dueHead
		if err := rows.Scan(&h.job, &h.n); err != nil {
			return nil, 0, err
		}
		heads = append(heads, h)
		seen += h.n
	}
	return heads, seen, rows.Err()
}

// claim runs sqlClaim for the named jobs (sorted), at most caps[job] runs
// of a job when caps has it: in a transaction that first takes the
// advisory locks of the limited ones, or on its own when none is limited.
func (s *Store) claim(ctx context.Context, names []string, caps map[string]int, p store.ClaimParams) ([]*jobs.Run, error) {
	limits := make([]int32, len(names))
	capOf := make([]int32, len(names))
	var keys []int32
	for i, job := range names {
		if limit, _ := p.Jobs.Limit(job); limit > 0 {
			limits[i] = int32(limit)
			keys = append(keys, jobLockKey(job))
		}
		capOf[i] = int32(p.Limit)
		if n, ok := caps[job]; ok {
			capOf[i] = int32(n)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)

	// The statement takes only waiting runs and, outside a transaction,
	// has committed by the time its rows are read: the state machine has
	// its say first.
	for _, from := range []jobs.Status{jobs.StatusPending, jobs.StatusRetrying} {
		if err := jobs.ValidateTransition(from, jobs.StatusRunning); err != nil {
			return nil, fmt.Errorf("claim runs: %w", err)
		}
	}
	var claimed []*jobs.Run
	run := func(c *conn) error {
		claimed = nil
		if len(keys) > 0 {
			// A claimer that stalls while it holds a job's lock must not
			// stall every node's claims: give up this poll instead.
			if _, err := c.exec(ctx, `SET LOCAL lock_timeout = '`+claimLockTimeout+`'`); err != nil {
				return err
			}
			if _, err := c.exec(ctx, `SELECT count(pg_advisory_xact_lock($1, k)) FROM unnest($2::int4[]) AS k`,
				lockJobs, keys); err != nil {
				return err
			}
		}
		q := sqlClaim
		if len(names) == 1 {
			q = sqlClaimOne
		}
		rows, err := c.query(ctx, q, names, ts(p.Now), p.Limit, limits, p.Node, p.Incarnation, capOf)
		if err != nil {
			return err
		}
		defer rows.Close()
		sc := newRunScanner()
		for rows.Next() {
			run, err := sc.scan(rows)
			if err != nil {
				return err
			}
			// The statement only takes waiting runs; the state machine
			// still has the last word.
			if err := jobs.ValidateTransition(run.ClaimedFrom, jobs.StatusRunning); err != nil {
				return fmt.Errorf("run %s: %w", run.ID, err)
			}
			claimed = append(claimed, run)
		}
		return rows.Err()
	}
	var err error
	if len(keys) > 0 {
		err = s.write(ctx, "claim runs", run)
	} else {
		err = s.writeOne(ctx, "claim runs", run)
	}
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// qualified prefixes each column of a column list with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, col := range cols {
		cols[i] = table + "." + strings.TrimSpace(col)
	}
	return strings.Join(cols, ", ")
}

// RunsExpire cancels (reason expired) the waiting runs past their not_after.
// An idle poll is one statement; expired runs are cancelled through the
// transition code path, in batches, skipping runs that another node is
// expiring or claiming at that moment.
func (s *Store) RunsExpire(ctx context.Context, p store.RunsExpireParams) ([]*jobs.Run, error) {
	node, now := p.Node, p.Now
	const expired = `status IN ` + sqlWaiting + ` AND not_after IS NOT NULL AND not_after <= COALESCE($1::timestamptz, now())`
	var one int
	err := s.read().queryRow(ctx, `SELECT 1 FROM runs WHERE `+expired+` LIMIT 1`, ts(now)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("expire runs", err)
	}
	var all []*jobs.Run
	for {
		var batch []*jobs.Run
		err := s.write(ctx, "expire runs", func(c *conn) error {
			batch = nil
			rows, err := c.query(ctx, `SELECT id || ' ' || job FROM runs WHERE `+expired+` ORDER BY not_after LIMIT $2
				FOR UPDATE SKIP LOCKED`, ts(now), batchSize)
			idJobs, err := collectStrings(rows, err)
			if err != nil {
				return err
			}
			for _, ij := range idJobs {
				id, job, _ := strings.Cut(ij, " ")
				t := jobs.Expire(id, node, now)
				t.Notify = p.Targets(job)
				run, err := transition(ctx, c, t)
				if err != nil {
					return err
				}
				batch = append(batch, run)
			}
			return nil
		})
		all = append(all, batch...)
		if err != nil {
			return all, err
		}
		if len(batch) < batchSize {
			return all, nil
		}
	}
}

func collectStrings(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// RunCancel cancels a waiting run, or asks the owner of a running one to
// stop it; see store.Store.
func (s *Store) RunCancel(ctx context.Context, p store.RunCancelParams) (*jobs.Run, error) {
	reason := cmp.Or(p.Reason, jobs.ReasonCancelled)
	var run *jobs.Run
	err := s.write(ctx, "cancel run", func(c *conn) error {
		cur, err := getRun(ctx, c, p.ID, true)
		if err != nil {
			return err
		}
		run, err = cancelRun(ctx, c, cur, p, reason)
		return err
	})
	return run, err
}

// cancelRun cancels cur when it waits, or sets CancelRequested when it
// runs, and records p.Actor, when set, as the run's CancelledBy; the
// caller holds cur's row lock.
func cancelRun(ctx context.Context, c *conn, cur *jobs.Run, p store.RunCancelParams, reason jobs.Reason) (*jobs.Run, error) {
	actor := cleanText(p.Actor)
	switch {
	case cur.Status == jobs.StatusRunning:
		return scanRun(c.queryRow(ctx, `UPDATE runs SET cancel_requested = true,
			cancelled_by = COALESCE(NULLIF($3::text, ''), cancelled_by),
			updated_at = COALESCE($2::timestamptz, now()) WHERE id = $1 RETURNING `+runColumns,
			cur.ID, ts(p.Now), actor))
	case cur.Status.Terminal():
		return nil, fmt.Errorf("%w: run %s is already %s", jobs.ErrInvalidTransition, cur.ID, cur.Status)
	}
	t := jobs.Cancel(cur.ID, p.Node, reason, p.Now)
	if actor == "" {
		return transition(ctx, c, t)
	}
	if _, err := c.exec(ctx, `UPDATE runs SET cancelled_by = $2 WHERE id = $1`, cur.ID, actor); err != nil {
		return nil, err
	}
	t.Actor = actor
	run, err := transition(ctx, c, t)
	if err != nil {
		return nil, err
	}
	run.CancelledBy = actor
	return run, nil
}

// RunsCancelRequested returns the running runs of incarnation that a user
// asked to cancel.
func (s *Store) RunsCancelRequested(ctx context.Context, incarnation string) ([]string, error) {
	rows, err := s.read().query(ctx, `SELECT id FROM runs WHERE incarnation = $1 AND cancel_requested
		AND status = 'running' ORDER BY id`, incarnation)
	ids, err := collectStrings(rows, err)
	if err != nil {
		return nil, fail("runs cancel requested", err)
	}
	return ids, nil
}

// RunProgress records the progress of a running attempt (fenced).
func (s *Store) RunProgress(ctx context.Context, f jobs.Fence, percent int, message string) error {
	percent = min(max(percent, 0), 100)
	c := s.read()
	tag, err := c.exec(ctx, `UPDATE runs SET progress = $2, progress_message = $3, updated_at = now()
		WHERE id = $1 AND status = 'running' AND attempt = $4 AND incarnation = $5`,
		f.RunID, percent, cleanText(message), f.Attempt, f.Incarnation)
	if err != nil {
		return fail("run progress", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	cur, err := getRun(ctx, c, f.RunID, false)
	if err != nil {
		return fail("run progress", err)
	}
	return fmt.Errorf("run progress: %w: %s: the run is %s at attempt %d of incarnation %s",
		store.ErrFenced, f, cur.Status, cur.Attempt, cur.Incarnation)
}

// sqlRunsRunning reads the running runs of node $1 from runs_running.
const sqlRunsRunning = `SELECT ` + runColumns + ` FROM runs
	WHERE node = $1 AND status = 'running' ORDER BY started_at, id`

// RunsRunning returns the running runs whose attempt belongs to node.
func (s *Store) RunsRunning(ctx context.Context, node string) ([]*jobs.Run, error) {
	runs, err := scanRuns(s.read().query(ctx, sqlRunsRunning, node))
	if err != nil {
		return nil, fail("running runs", err)
	}
	return runs, nil
}

// sqlFirstWaiting reads the job and not_before of the first $1 waiting runs
// of all jobs, in start order (runs_due).
const sqlFirstWaiting = `SELECT job, not_before FROM runs WHERE ` + sqlWaitingOfAll + `
	AND not_before > $2 ORDER BY not_before, created_at, id LIMIT $1`

// RunsNextDue returns the earliest not_before of the waiting runs of the
// named jobs; zero when there is none.
func (s *Store) RunsNextDue(ctx context.Context, jobNames []string, after time.Time) (time.Time, error) {
	if len(jobNames) == 0 {
		return time.Time{}, nil
	}
	from := pgtype.Timestamptz{Time: after.UTC().Truncate(time.Microsecond), Valid: true}
	if after.IsZero() {
		from = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	// The scheduling loop asks this every iteration. The first waiting runs
	// of all jobs, in the order of the runs_due index, nearly always hold
	// one of the node's jobs: the first of those is the answer. Else one
	// LIMIT 1 probe of the claim index per job (a min over all waiting runs
	// walked the whole backlog: most of the server's time in a burn-down).
	const scan = 256
	rows, err := s.read().query(ctx, sqlFirstWaiting, scan, from)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	named := store.NewNameIndex(jobNames)
	read := 0
	var first time.Time
	for rows.Next() {
		read++
		var job string
		var notBefore time.Time
		if err := rows.Scan(&job, &notBefore); err != nil {
			rows.Close()
			return time.Time{}, fail("next due run", err)
		}
		if named.Has(job) {
			first = notBefore.UTC()
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, fail("next due run", err)
	}
	if !first.IsZero() || read < scan {
		return first, nil
	}
	var next *time.Time
	err = s.read().queryRow(ctx, `SELECT min(x.not_before) FROM unnest($1::text[]) AS j(job)
		CROSS JOIN LATERAL (SELECT not_before FROM runs WHERE runs.job = j.job AND status IN `+sqlWaiting+`
			AND not_before > $2 ORDER BY not_before LIMIT 1) x`, jobNames, from).Scan(&next)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	return utc(next), nil
}

// RunsPrune deletes the runs that finished before the given time, with
// their events and attempts, in batches; see
// store.Store. It also deletes the occurrences of schedule ticks that are
// older than both the prune horizon and the job's cursor and whose run is
// gone: the cursor already keeps those ticks from firing again. Occurrences
// of one-off jobs, and of jobs without a cursor, stay forever.
func (s *Store) RunsPrune(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	c := s.read()
	total := 0
	for {
		// The runs with their events and attempts, in one statement.
		var n int
		err := c.queryRow(ctx, `WITH r AS (
				DELETE FROM runs WHERE id IN (
					SELECT id FROM runs WHERE finished_at IS NOT NULL AND finished_at < $1 AND status IN `+sqlTerminal+`
					ORDER BY finished_at LIMIT $2)
				RETURNING id
			), e AS (
				DELETE FROM events WHERE run_id IN (SELECT id FROM r)
			), a AS (
				DELETE FROM attempts WHERE run_id IN (SELECT id FROM r)
			)
			SELECT count(*) FROM r`, ts(before), batchSize).Scan(&n)
		if err != nil {
			return total, fail("prune runs", err)
		}
		total += n
		if n < batchSize {
			break
		}
	}
	for {
		tag, err := c.exec(ctx, `DELETE FROM occurrences WHERE (job, scheduled_at) IN (
			SELECT o.job, o.scheduled_at FROM occurrences o JOIN cursors c ON c.job = o.job
			WHERE o.scheduled_at < $1 AND o.scheduled_at < c.last AND o.kind = 'schedule'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = o.run_id)
			LIMIT $2)`, ts(before), batchSize)
		if err != nil {
			return total, fail("prune occurrences", err)
		}
		if tag.RowsAffected() < batchSize {
			break
		}
	}
	if total > 0 {
		s.logger.DebugContext(ctx, "pruned runs", "count", total, "before", before)
	}
	return total, nil
}

// RunGet returns one run.
func (s *Store) RunGet(ctx context.Context, id string) (*jobs.Run, error) {
	run, err := getRun(ctx, s.read(), id, false)
	if err != nil {
		return nil, fail("get run", err)
	}
	return run, nil
}

// RunsList returns runs, newest first (store.RunFilter).
func (s *Store) RunsList(ctx context.Context, f store.RunFilter) ([]*jobs.Run, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, nil // no run has it
	}
	c := s.read()
	var before *listCursor
	if f.Before != "" {
		before = &listCursor{id: f.Before}
		if err := c.queryRow(ctx, `SELECT created_at FROM run_order WHERE id = $1`, f.Before).Scan(&before.createdAt); err != nil {
			return nil, fail("list runs: before run "+f.Before, err)
		}
	}
	q, args := runsListQuery(f, before)
	runs, err := scanRuns(c.query(ctx, q, args...))
	if err != nil {
		return nil, fail("list runs", err)
	}
	return runs, nil
}

// listCursor is the place in the listing's order (created_at, id) of the
// run that a page of a listing comes after.
type listCursor struct {
	createdAt time.Time
	id        string
}

// runsListQuery is the statement of RunsList (f.Status valid or empty),
// reading from before on when it is not nil. The status is a constant, not
// a parameter: the plan is made for it. All runs, and completed ones (most
// of the history), are read newest first from run_order, of all jobs or of
// f.Job, each run then by its id; a rare status from the partial
// runs_status_created index, and running runs from runs_running. The time
// range and the cursor bound created_at (and id) in each index.
func runsListQuery(f store.RunFilter, before *listCursor) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// One upper bound, the tighter of Until and the cursor: the index is
	// read from it down.
	bounds := func(created, id string) string {
		var q string
		if !f.Since.IsZero() {
			q += ` AND ` + created + ` >= ` + arg(f.Since.UTC())
		}
		switch {
		case before != nil && (f.Until.IsZero() || before.createdAt.Before(f.Until)):
			q += ` AND (` + created + `, ` + id + `) < (` + arg(before.createdAt) + `, ` + arg(before.id) + `)`
		case !f.Until.IsZero():
			q += ` AND ` + created + ` < ` + arg(f.Until.UTC())
		}
		return q
	}
	if f.Status == "" || f.Status == jobs.StatusCompleted {
		q := `SELECT ` + qualified("r", runColumns) + ` FROM run_order o JOIN runs r ON r.id = o.id WHERE true`
		if f.Job != "" {
			q += ` AND o.job = ` + arg(f.Job)
		}
		if f.Status != "" {
			q += ` AND r.status = '` + string(f.Status) + `'`
		}
		q += bounds("o.created_at", "o.id")
		return q + ` ORDER BY o.created_at DESC, o.id DESC LIMIT ` + arg(f.ListLimit()), args
	}
	q := `SELECT ` + runColumns + ` FROM runs WHERE status = '` + string(f.Status) + `'`
	if f.Job != "" {
		q += ` AND job = ` + arg(f.Job)
	}
	q += bounds("created_at", "id")
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(f.ListLimit()), args
}

// runsStatsQuery is the statement of RunsStats: the runs of the range,
// from run_order (of f.Job, or of all jobs) in its indexes, each then by
// its id, counted by status, with the percentiles (percentile_disc: the
// nearest rank, store.PercentileRank) and the longest of the durations of
// the completed ones.
func runsStatsQuery(f store.RunStatsFilter) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var cols []string
	for _, st := range jobs.Statuses {
		cols = append(cols, `count(*) FILTER (WHERE r.status = '`+string(st)+`')`)
	}
	const d = `greatest(r.finished_at - r.started_at, interval '0')`
	q := `SELECT ` + strings.Join(cols, ", ") + `, count(*) FILTER (WHERE r.status = 'cancelled' AND r.reason = 'expired'),
		coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY ` + d + `) FILTER (WHERE r.status = 'completed'), interval '0'),
		coalesce(percentile_disc(0.95) WITHIN GROUP (ORDER BY ` + d + `) FILTER (WHERE r.status = 'completed'), interval '0'),
		coalesce(max(` + d + `) FILTER (WHERE r.status = 'completed'), interval '0')
	FROM run_order o JOIN runs r ON r.id = o.id WHERE true`
	if f.Job != "" {
		q += ` AND o.job = ` + arg(f.Job)
	}
	if !f.Since.IsZero() {
		q += ` AND o.created_at >= ` + arg(f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q += ` AND o.created_at < ` + arg(f.Until.UTC())
	}
	return q, args
}

// RunsStats summarises the runs of f in one statement (store.RunStats).
func (s *Store) RunsStats(ctx context.Context, f store.RunStatsFilter) (*store.RunStats, error) {
	q, args := runsStatsQuery(f)
	counts := make([]int64, len(jobs.Statuses))
	st := &store.RunStats{Counts: make(map[jobs.Status]int64, len(counts))}
	var dest []any
	for i := range counts {
		dest = append(dest, &counts[i])
	}
	if err := s.read().queryRow(ctx, q, args...).Scan(append(dest, &st.Expired, &st.P50, &st.P95, &st.Max)...); err != nil {
		return nil, fail("run stats", err)
	}
	for i, status := range jobs.Statuses {
		st.Counts[status] = counts[i]
	}
	return st, nil
}

// sqlRunEvents and sqlRunAttempts read a run's events and attempts, and
// while it runs, the claim's event and the attempt that its run's row
// stands for until the attempt ends (claimed_from), in one snapshot.
//
// The claim's and the end's events of an attempt are read from its row of
// attempts (claimed_from, end_node). They go in the order they
// happened among the rows of events by attempt number: a claim starts
// attempt n, no event is written while an attempt runs (each change of a
// running run ends its attempt), and each event written between the end of
// attempt n and the claim of n+1 carries attempt n. So by attempt, and in
// an attempt the claim, the end, then the rows of events in their order.
const (
	sqlRunEvents = `SELECT ` + eventColumns + ` FROM (
			SELECT attempt AS n, 2 AS k, id AS seq, ` + eventColumns + ` FROM events WHERE run_id = $1
			UNION ALL
			SELECT number, v.* FROM attempts CROSS JOIN LATERAL (VALUES
				(0, 0::bigint, run_id, started_at, node, number, claimed_from, 'running', 'claimed', '', ''),
				(1, 0, run_id, finished_at, end_node, number, 'running', status, reason, error,
					CASE WHEN reason = 'cancelled' THEN (SELECT cancelled_by FROM runs WHERE id = $1) ELSE '' END)) v
			WHERE run_id = $1
			UNION ALL
			SELECT attempt, 0, 0, id, started_at, node, attempt, claimed_from, 'running', 'claimed', '', '' FROM runs
			WHERE id = $1 AND status = 'running') e
		ORDER BY n, k, seq`
	sqlRunAttempts = `SELECT ` + attemptColumns + ` FROM (
			SELECT ` + attemptColumns + ` FROM attempts WHERE run_id = $1
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', ''::bytea, 0, false
			FROM runs WHERE id = $1 AND status = 'running') a
		ORDER BY number`
)

// RunEvents returns a run's history, oldest first.
func (s *Store) RunEvents(ctx context.Context, id string) ([]*jobs.Event, error) {
	c := s.read()
	rows, err := c.query(ctx, sqlRunEvents, id)
	if err != nil {
		return nil, fail("run events", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobs.Event, error) { return scanEvent(row) })
	if err != nil {
		return nil, fail("run events", err)
	}
	if len(events) == 0 { // every run has its creation event
		if _, err := getRun(ctx, c, id, false); err != nil {
			return nil, fail("run events", err)
		}
	}
	return events, nil
}

// RunAttempts returns a run's attempts, oldest first, with their output.
func (s *Store) RunAttempts(ctx context.Context, id string) ([]*jobs.Attempt, error) {
	c := s.read()
	rows, err := c.query(ctx, sqlRunAttempts, id)
	if err != nil {
		return nil, fail("run attempts", err)
	}
	attempts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobs.Attempt, error) { return scanAttempt(row) })
	if err != nil {
		return nil, fail("run attempts", err)
	}
	if len(attempts) == 0 {
		if _, err := getRun(ctx, c, id, false); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	return attempts, nil
}

// sqlRunAttemptsClipped reads attempts as sqlRunAttempts does, of one
// number ($2, 0 for all), the newest $4 (NULL for all), each output
// stored of more than 2*$3 bytes ($3 > 0) as its first and its last $3
// bytes, with the length stored.
const sqlRunAttemptsClipped = `SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
		error, reason, head, output_bytes, truncated, tail, stored FROM (
			SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason,
				CASE WHEN $3 = 0 OR octet_length(output) <= 2 * $3 THEN output ELSE substring(output FROM 1 FOR $3) END AS head,
				output_bytes, truncated,
				CASE WHEN $3 = 0 OR octet_length(output) <= 2 * $3 THEN ''::bytea
					ELSE substring(output FROM octet_length(output) - $3 + 1) END AS tail,
				octet_length(output)::bigint AS stored
			FROM attempts WHERE run_id = $1 AND ($2 = 0 OR number = $2)
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', ''::bytea, 0, false, ''::bytea, 0
			FROM runs WHERE id = $1 AND status = 'running' AND ($2 = 0 OR attempt = $2)) a
		ORDER BY number DESC LIMIT $4`

// RunAttemptsClipped returns attempts of a run with a bounded part of
// their output, oldest first.
func (s *Store) RunAttemptsClipped(ctx context.Context, p store.AttemptsParams) ([]*store.ClippedAttempt, error) {
	c := s.read()
	var limit *int64
	if p.Newest > 0 {
		n := int64(p.Newest)
		limit = &n
	}
	rows, err := c.query(ctx, sqlRunAttemptsClipped, p.RunID, int32(p.Number), int32(max(p.Keep, 0)), limit)
	if err != nil {
		return nil, fail("run attempts", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ClippedAttempt, error) {
		var (
			tail []byte
			ca   store.ClippedAttempt
		)
		a, err := scanAttempt(row, &tail, &ca.StoredBytes)
		if err != nil {
			return nil, err
		}
		ca.Attempt, ca.Tail = *a, string(tail)
		return &ca, nil
	})
	if err != nil {
		return nil, fail("run attempts", err)
	}
	if len(out) == 0 {
		if _, err := getRun(ctx, c, p.RunID, false); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// sqlJobsLastRun reads the newest run of each job of $1: its id from
// run_order, then the run.
const sqlJobsLastRun = `SELECT r.* FROM unnest($1::text[]) AS j CROSS JOIN LATERAL (
		SELECT ` + runColumns + ` FROM runs WHERE id = (SELECT o.id FROM run_order o WHERE o.job = j
			ORDER BY o.created_at DESC, o.id DESC LIMIT 1)) r`

// JobsLastRun returns the newest run of each named job that has one.
func (s *Store) JobsLastRun(ctx context.Context, jobNames []string) (map[string]*jobs.Run, error) {
	out := map[string]*jobs.Run{}
	if len(jobNames) == 0 {
		return out, nil
	}
	runs, err := scanRuns(s.read().query(ctx, sqlJobsLastRun, jobNames))
	if err != nil {
		return nil, fail("last runs", err)
	}
	for _, r := range runs {
		out[r.Job] = r
	}
	return out, nil
}

// sqlRunsCount counts the runs of each status but completed, from the
// partial indexes runs_status_created and runs_running.
const sqlRunsCount = `SELECT status, count(*) FROM runs WHERE status NOT IN ('running', 'completed') GROUP BY status
	UNION ALL
	SELECT 'running', count(*) FROM runs WHERE status = 'running'`

func (s *Store) RunsCount(ctx context.Context) (map[jobs.Status]int64, error) {
	rows, err := s.read().query(ctx, sqlRunsCount)
	if err != nil {
		return nil, fail("count runs", err)
	}
	defer rows.Close()
	out := store.NewRunCounts()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fail("count runs", err)
		}
		out[jobs.Status(st)] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fail("count runs", err)
	}
	return out, nil
}
