package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Status lists as SQL literals. The claim and expiry queries spell the
// waiting statuses exactly as the partial indexes do, so that SQLite uses them.
const (
	sqlActive   = `('pending', 'running', 'retrying')`
	sqlWaiting  = `('pending', 'retrying')`
	sqlTerminal = `('completed', 'cancelled', 'dead_letter')`
	// sqlListedByStatus is the predicate of the runs_status_created index:
	// the statuses other than running (few, in runs_node_running) and
	// completed (most of the history, in runs_created).
	sqlListedByStatus = `status NOT IN ('running', 'completed')`
)

// The statements of the busy write paths, which the writer keeps prepared
// (preparedQueries).
const (
	sqlGetRun = `SELECT ` + runColumns + ` FROM runs WHERE id = ?`
	// sqlRunsByID reads the runs whose ids are in a JSON array.
	sqlRunsByID = `SELECT ` + runColumns + ` FROM runs WHERE id IN (SELECT value FROM json_each(?))`

	sqlOccurrenceRun    = `SELECT run_id FROM occurrences WHERE job = ? AND scheduled_at = ?`
	sqlInsertOccurrence = `INSERT INTO occurrences (job, scheduled_at, run_id, kind) VALUES (?, ?, ?, ?)`
	sqlDedupRun         = `SELECT id FROM runs WHERE job = ? AND dedup_id = ? AND status IN ` + sqlActive
	sqlInsertRun        = `INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind,
		scheduled_at, not_before, not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry_json, actor)
		VALUES (?, ?, 'pending', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertEvent = `INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message, actor)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// sqlRequestCancel keeps the run's cancelled_by when the actor is ''
	// (overlap=replace asks the engine's way).
	sqlRequestCancel = `UPDATE runs SET cancel_requested = 1, cancelled_by = COALESCE(NULLIF(?, ''), cancelled_by),
		updated_at = ? WHERE id = ? RETURNING ` + runColumns
	sqlCancelledBy = `UPDATE runs SET cancelled_by = ? WHERE id = ?`

	sqlDue = `status IN ` + sqlWaiting + ` AND not_before <= ? AND (not_after IS NULL OR not_after > ?)`
	// sqlClaimCandidates reads a job's first due runs in start order, a
	// range of the runs_claim index.
	sqlClaimCandidates = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_claim
		WHERE job = ? AND ` + sqlDue + ` ORDER BY not_before, created_at, id LIMIT ?`
	// sqlClaimRuns claims the runs whose ids are in a JSON array, in one
	// statement whatever their number. It writes only the runs: the
	// attempt's row, which also stands for the claim's event (claimed_from:
	// the status the claim took the run from), is written when the attempt
	// ends.
	sqlClaimRuns = `UPDATE runs SET status = 'running', attempt = attempt + 1, node = ?,
		incarnation = ?, started_at = ?, updated_at = ?, reason = 'claimed', error = '', exit_code = NULL,
		cancel_requested = 0, progress = 0, progress_message = '', claimed_from = status
		WHERE id IN (SELECT value FROM json_each(?))`
)

// preparedQueries are the statements the writer keeps prepared.
var preparedQueries = []string{
	sqlGetRun, sqlRunsByID, sqlOccurrenceRun, sqlInsertOccurrence, sqlDedupRun, sqlInsertRun, sqlInsertEvent,
	sqlRequestCancel, sqlClaimCandidates, sqlClaimRuns, sqlGetCursor, sqlUpsertResults,
}

// batchSize bounds the rows one transaction of expiry or pruning handles, so
// that the writer is never held for long.
const batchSize = 1000

// hasOccurrence reports whether runs of trigger are identified by their
// occurrence (job, scheduled time).
func hasOccurrence(t jobs.Trigger) bool {
	return t == jobs.TriggerSchedule || t == jobs.TriggerOnce
}

// RunInsert makes a run (one-off, manual or rerun).
func (s *Store) RunInsert(ctx context.Context, p store.RunInsertParams) (*jobs.Run, error) {
	var run *jobs.Run
	err := s.write(ctx, "insert run", func(c conn) (err error) {
		run, err = insertRun(ctx, c, p, now(p.Now))
		return err
	})
	return run, err
}

// RunInsertMany makes many runs in one transaction, all or none.
func (s *Store) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]*jobs.Run, error) {
	runs := make([]*jobs.Run, 0, len(ps))
	err := s.write(ctx, "insert runs", func(c conn) error {
		runs = runs[:0]
		for _, p := range ps {
			run, err := insertRun(ctx, c, p, now(p.Now))
			if err != nil {
				return err
			}
			runs = append(runs, run)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}

// occurrenceRun returns the run that owns the occurrence (job, at), or "".
func occurrenceRun(ctx context.Context, c conn, job string, at time.Time) (string, error) {
	var id string
	err := c.queryRow(ctx, sqlOccurrenceRun, job, at.UnixMicro()).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// insertRun makes a run, its occurrence and its creation event.
func insertRun(ctx context.Context, c conn, p store.RunInsertParams, now time.Time) (*jobs.Run, error) {
	run, retry, err := newRun(p, now)
	if err != nil {
		return nil, err
	}
	if hasOccurrence(run.Trigger) {
		other, err := occurrenceRun(ctx, c, run.Job, run.ScheduledAt)
		if err != nil {
			return nil, err
		}
		if other != "" {
			return nil, fmt.Errorf("%w: job %s at %s already has run %s",
				store.ErrDuplicate, run.Job, run.ScheduledAt.Format(time.RFC3339Nano), other)
		}
	}
	return run, writeRun(ctx, c, run, retry, p.Node)
}

// newRun checks p and returns the run it makes at now, as the database
// then holds it, with its stored retry policy.
func newRun(p store.RunInsertParams, now time.Time) (*jobs.Run, string, error) {
	switch {
	case p.Job == "":
		return nil, "", errors.New("job name is empty")
	case p.Trigger != jobs.TriggerSchedule && p.Trigger != jobs.TriggerOnce &&
		p.Trigger != jobs.TriggerManual && p.Trigger != jobs.TriggerRerun:
		return nil, "", fmt.Errorf("unknown trigger %q", p.Trigger)
	case hasOccurrence(p.Trigger) && p.ScheduledAt.IsZero():
		return nil, "", fmt.Errorf("a %s run needs its scheduled time", p.Trigger)
	}
	scheduledAt := p.ScheduledAt
	if scheduledAt.IsZero() {
		scheduledAt = now
	}
	notBefore := p.NotBefore
	if notBefore.IsZero() {
		notBefore = scheduledAt
	}
	if err := jobs.ValidateWindow(notBefore, p.NotAfter); err != nil {
		return nil, "", fmt.Errorf("run window: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, "", err
	}
	retry, err := store.EncodeRetry(p.Retry, p.NoRetryExitCodes)
	if err != nil {
		return nil, "", err
	}
	run := &jobs.Run{
		ID: id.String(), Job: p.Job, Status: jobs.StatusPending, MaxAttempts: max(p.Retry.MaxAttempts, 1),
		Trigger: p.Trigger, ScheduledAt: micro(scheduledAt), NotBefore: micro(notBefore), NotAfter: micro(p.NotAfter),
		CreatedAt: now, DedupID: p.DedupID, RerunOf: p.RerunOf, Payload: p.Payload, Actor: p.Actor,
	}
	if run.Retry, run.NoRetryExitCodes, err = store.DecodeRetry(retry); err != nil {
		return nil, "", err
	}
	return run, retry, nil
}

// writeRun writes a new run whose occurrence is free, with its occurrence
// and its creation event by node.
func writeRun(ctx context.Context, c conn, run *jobs.Run, retry, node string) error {
	if hasOccurrence(run.Trigger) {
		_, err := c.exec(ctx, sqlInsertOccurrence, run.Job, run.ScheduledAt.UnixMicro(), run.ID, string(run.Trigger))
		if err != nil {
			return err
		}
	}
	if run.DedupID != "" {
		var other string
		err := c.queryRow(ctx, sqlDedupRun, run.Job, run.DedupID).Scan(&other)
		switch {
		case err == nil:
			return fmt.Errorf("%w: job %s has the active run %s with dedup id %q", store.ErrDuplicate, run.Job, other, run.DedupID)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
	}
	_, err := c.exec(ctx, sqlInsertRun,
		run.ID, run.Job, run.MaxAttempts, string(run.Trigger), run.ScheduledAt.UnixMicro(), run.NotBefore.UnixMicro(),
		dbTime(run.NotAfter), run.CreatedAt.UnixMicro(), run.CreatedAt.UnixMicro(),
		nullString(run.DedupID), nullString(run.RerunOf), run.Payload, retry, run.Actor)
	if err != nil {
		return err
	}
	return insertEvent(ctx, c, jobs.Event{RunID: run.ID, Time: run.CreatedAt, Node: node, To: jobs.StatusPending,
		Reason: jobs.ReasonCreated, Actor: run.Actor})
}

// micro returns t as the database gives it back: in UTC, to the
// microsecond.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

func insertEvent(ctx context.Context, c conn, e jobs.Event) error {
	_, err := c.exec(ctx, sqlInsertEvent,
		e.RunID, e.Time.UnixMicro(), e.Node, e.Attempt, nullString(string(e.From)), string(e.To), string(e.Reason), e.Message,
		e.Actor)
	return err
}

func getRun(ctx context.Context, c conn, id string) (*jobs.Run, error) {
	run, err := scanRun(c.queryRow(ctx, sqlGetRun, id))
	if errors.Is(err, sql.ErrNoRows) {
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

// runTransitions reads the batch's runs in one statement, then takes each
// transition in turn: store.CheckTransition refuses it before it writes
// anything (the refusal is its result), or it is recorded in changes, and
// the run as it leaves it is what the next transition of that run sees.
// The changes are then written with a statement per table and per
// changeChunks rows. Any other error rolls the whole batch back.
func (s *Store) runTransitions(ctx context.Context, op string, ts []jobs.Transition) ([]store.TransitionResult, error) {
	results := make([]store.TransitionResult, len(ts))
	if len(ts) == 0 {
		return results, nil
	}
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.RunID
	}
	err := s.write(ctx, op, func(c conn) error {
		clear(results)
		runs, err := getRuns(ctx, c, ids)
		if err != nil {
			return err
		}
		var ch changes
		for i, t := range ts {
			cur := runs[t.RunID]
			if err := store.CheckTransition(cur, t); err != nil {
				results[i].Err = fmt.Errorf("run transition: %w", err)
				continue
			}
			run := ch.add(cur, t)
			runs[t.RunID], results[i].Run = run, run
		}
		if err := ch.write(ctx, c); err != nil {
			return err
		}
		return writeNotifications(ctx, c, ts, results, now(time.Time{}))
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// getRuns reads the runs of ids that exist, by id.
func getRuns(ctx context.Context, c conn, ids []string) (map[string]*jobs.Run, error) {
	runs, err := scanRuns(c.query(ctx, sqlRunsByID, jsonStrings(ids)))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*jobs.Run, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
	}
	return byID, nil
}

// transition is the one code path that changes a run's status after its
// claim, for a caller that wants any refusal as its error.
func transition(ctx context.Context, c conn, t jobs.Transition) (*jobs.Run, error) {
	cur, err := getRun(ctx, c, t.RunID)
	if err != nil {
		return nil, err
	}
	if err := store.CheckTransition(cur, t); err != nil {
		return nil, err
	}
	var ch changes
	run := ch.add(cur, t)
	if err := ch.write(ctx, c); err != nil {
		return nil, err
	}
	res := []store.TransitionResult{{Run: run}}
	return run, writeNotifications(ctx, c, []jobs.Transition{t}, res, now(time.Time{}))
}

func intOrNull(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// RunsClaim atomically starts up to Limit due runs; see store.Store.
//
// The first due runs of all jobs are read in start order (not_before,
// created_at, id) from the runs_due index, and those of declared jobs with
// room are taken: the work is what the claim takes, however many jobs are
// declared. When the first store.DueScan(Limit) due runs do not give Limit
// runs (runs of other jobs, or of jobs at their limit, come first), the
// claim reads each declared job's own due runs from the runs_claim index
// instead, at most as many as the job can still take, and merges them: a
// backlog of one job never hides another job's due runs.
func (s *Store) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if p.Limit <= 0 || p.Jobs.Len() == 0 {
		return nil, nil
	}
	if p.Node == "" || p.Incarnation == "" {
		return nil, errors.New("claim runs: node and incarnation must be set")
	}
	at := now(p.Now).UnixMicro()
	scan := store.DueScan(p.Limit)

	// Most polls find nothing due: answer those with one read, without
	// taking the write lock.
	if !p.Due {
		due, err := dueAmongHeads(ctx, s.read(), at, scan, p.Jobs)
		if err != nil {
			return nil, fail("claim runs", err)
		}
		if !due {
			return nil, nil
		}
	}

	limited := p.Jobs.Limited()
	var claimed []*jobs.Run
	err := s.write(ctx, "claim runs", func(c conn) error {
		claimed = nil
		// The running runs of a SQLite store are this node's: a few.
		running := map[string]int{}
		if limited {
			var err error
			if running, err = runningCounts(ctx, c); err != nil {
				return err
			}
		}
		room := func(job string) int {
			limit, ok := p.Jobs.Limit(job)
			switch {
			case !ok:
				return 0
			case limit > 0:
				return limit - running[job]
			}
			return p.Limit
		}
		cands, full, err := claimHeads(ctx, c, at, scan, p.Limit, room)
		if err != nil {
			return err
		}
		if len(cands) < p.Limit && full {
			if cands, err = claimPerJob(ctx, c, at, p.Limit, p.Jobs, room); err != nil {
				return err
			}
		}
		claimed, err = claimRuns(ctx, c, cands, p, time.UnixMicro(at).UTC())
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// sqlDueHeads reads the jobs of the first $3 due runs in start order.
const sqlDueHeads = `SELECT job FROM runs INDEXED BY runs_due WHERE ` + sqlDue + `
	ORDER BY not_before, created_at, id LIMIT ?`

// dueAmongHeads reports whether a run of jobs is among the first scan due
// runs in start order, or scan due runs are there (then a run of jobs may
// come after them). It stops reading at the first run of jobs: under a
// backlog that is the first row, where reading all scan rows showed in a
// burn-down's CPU profile.
func dueAmongHeads(ctx context.Context, c conn, at int64, scan int, jobs store.JobLimits) (bool, error) {
	rows, err := c.query(ctx, sqlDueHeads, at, at, scan)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var job string
		if err := rows.Scan(&job); err != nil {
			return false, err
		}
		if _, ok := jobs.Limit(job); ok {
			return true, nil
		}
		read++
	}
	return read >= scan, rows.Err()
}

// claimHeads reads the first scan due runs in start order and returns the
// first limit of them that room allows (room(job) says how many runs of
// job may start), and whether scan runs were read.
func claimHeads(ctx context.Context, c conn, at int64, scan, limit int, room func(string) int) ([]*jobs.Run, bool, error) {
	rows, err := c.query(ctx, `SELECT `+runColumns+` FROM runs INDEXED BY runs_due WHERE `+sqlDue+`
		ORDER BY not_before, created_at, id LIMIT ?`, at, at, scan)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var cands []*jobs.Run
	taken := map[string]int{}
	read := 0
	for len(cands) < limit && rows.Next() {
		read++
		r, err := scanRun(rows)
		if err != nil {
			return nil, false, err
		}
		if taken[r.Job] < room(r.Job) {
			taken[r.Job]++
			cands = append(cands, r)
		}
	}
	return cands, read == scan, rows.Err()
}

// claimPerJob reads each declared job's first due runs, as many as room
// allows, from the runs_claim index, and returns the first limit of all of
// them in start order.
func claimPerJob(ctx context.Context, c conn, at int64, limit int, declared store.JobLimits,
	room func(string) int) ([]*jobs.Run, error) {
	dueJobs, err := queryStrings(ctx, c, `SELECT j.value FROM json_each(?) j WHERE EXISTS (
		SELECT 1 FROM runs INDEXED BY runs_claim WHERE job = j.value AND `+sqlDue+`)`, jsonStrings(declared.Names()), at, at)
	if err != nil {
		return nil, err
	}
	var cands []*jobs.Run
	for _, job := range dueJobs {
		n := min(limit, room(job))
		if n <= 0 {
			continue
		}
		runs, err := scanRuns(c.query(ctx, sqlClaimCandidates, job, at, at, n))
		if err != nil {
			return nil, err
		}
		cands = append(cands, runs...)
	}
	slices.SortFunc(cands, func(a, b *jobs.Run) int {
		return cmp.Or(a.NotBefore.Compare(b.NotBefore), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return cands[:min(len(cands), limit)], nil
}

// sqlRunningCounts counts the running runs of each job, from the index of
// the running runs.
const sqlRunningCounts = `SELECT job, COUNT(*) FROM runs INDEXED BY runs_node_running
		WHERE status = 'running' GROUP BY job`

// runningCounts counts the running runs of each job.
func runningCounts(ctx context.Context, c conn) (map[string]int, error) {
	counts := map[string]int{}
	rows, err := c.query(ctx, sqlRunningCounts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var job string
		var n int
		if err := rows.Scan(&job, &n); err != nil {
			return nil, err
		}
		counts[job] = n
	}
	return counts, rows.Err()
}

// claimRuns starts the next attempt of each of runs, waiting runs that the
// write transaction read, and returns them as they are then stored, in one
// statement for any number of runs.
func claimRuns(ctx context.Context, c conn, runs []*jobs.Run, p store.ClaimParams, at time.Time) ([]*jobs.Run, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(runs))
	claimed := make([]*jobs.Run, len(runs))
	for i, cur := range runs {
		if err := jobs.ValidateTransition(cur.Status, jobs.StatusRunning); err != nil {
			return nil, fmt.Errorf("run %s: %w", cur.ID, err)
		}
		ids[i] = cur.ID
		r := *cur
		r.Status, r.Attempt, r.Node, r.Incarnation = jobs.StatusRunning, cur.Attempt+1, p.Node, p.Incarnation
		r.StartedAt, r.Reason, r.Error, r.ExitCode = at, jobs.ReasonClaimed, "", nil
		r.CancelRequested, r.Progress, r.ProgressMessage, r.ClaimedFrom = false, 0, "", cur.Status
		claimed[i] = &r
	}
	if _, err := c.exec(ctx, sqlClaimRuns, p.Node, p.Incarnation, at.UnixMicro(), at.UnixMicro(), jsonStrings(ids)); err != nil {
		return nil, err
	}
	return claimed, nil
}

// RunsExpire cancels (reason expired) the waiting runs past their not_after.
func (s *Store) RunsExpire(ctx context.Context, p store.RunsExpireParams) ([]*jobs.Run, error) {
	node, at := p.Node, now(p.Now)
	const expired = `status IN ` + sqlWaiting + ` AND not_after IS NOT NULL AND not_after <= ?`
	var one int
	err := s.read().queryRow(ctx, `SELECT 1 FROM runs INDEXED BY runs_expire WHERE `+expired+` LIMIT 1`, at.UnixMicro()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("expire runs", err)
	}
	var all []*jobs.Run
	for {
		var batch []*jobs.Run
		err := s.write(ctx, "expire runs", func(c conn) error {
			batch = nil
			idJobs, err := queryStrings(ctx, c, `SELECT id || ' ' || job FROM runs INDEXED BY runs_expire WHERE `+expired+` ORDER BY not_after LIMIT ?`,
				at.UnixMicro(), batchSize)
			if err != nil {
				return err
			}
			for _, ij := range idJobs {
				id, job, _ := strings.Cut(ij, " ")
				t := jobs.Expire(id, node, at)
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

func queryStrings(ctx context.Context, c conn, q string, args ...any) ([]string, error) {
	rows, err := c.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// RunCancel cancels a waiting run, or asks the owner of a running one to
// stop it; see store.Store.
func (s *Store) RunCancel(ctx context.Context, p store.RunCancelParams) (*jobs.Run, error) {
	at := now(p.Now)
	reason := cmp.Or(p.Reason, jobs.ReasonCancelled)
	var run *jobs.Run
	err := s.write(ctx, "cancel run", func(c conn) error {
		cur, err := getRun(ctx, c, p.ID)
		if err != nil {
			return err
		}
		run, err = cancelRun(ctx, c, cur, p, reason, at)
		return err
	})
	return run, err
}

// cancelRun cancels cur when it waits, or sets CancelRequested when it
// runs, and records p.Actor, when set, as the run's CancelledBy.
func cancelRun(ctx context.Context, c conn, cur *jobs.Run, p store.RunCancelParams, reason jobs.Reason, at time.Time) (*jobs.Run, error) {
	switch {
	case cur.Status == jobs.StatusRunning:
		return scanRun(c.queryRow(ctx, sqlRequestCancel, p.Actor, at.UnixMicro(), cur.ID))
	case cur.Status.Terminal():
		return nil, fmt.Errorf("%w: run %s is already %s", jobs.ErrInvalidTransition, cur.ID, cur.Status)
	}
	t := jobs.Cancel(cur.ID, p.Node, reason, at)
	if p.Actor == "" {
		return transition(ctx, c, t)
	}
	if _, err := c.exec(ctx, sqlCancelledBy, p.Actor, cur.ID); err != nil {
		return nil, err
	}
	t.Actor = p.Actor
	run, err := transition(ctx, c, t)
	if err != nil {
		return nil, err
	}
	run.CancelledBy = p.Actor
	return run, nil
}

// RunsCancelRequested returns the running runs of incarnation that a user
// asked to cancel.
func (s *Store) RunsCancelRequested(ctx context.Context, incarnation string) ([]string, error) {
	ids, err := queryStrings(ctx, s.read(), `SELECT id FROM runs WHERE incarnation = ? AND cancel_requested = 1
		AND status = 'running' ORDER BY id`, incarnation)
	if err != nil {
		return nil, fail("runs cancel requested", err)
	}
	return ids, nil
}

// RunProgress records the progress of a running attempt (fenced).
func (s *Store) RunProgress(ctx context.Context, f jobs.Fence, percent int, message string) error {
	percent = min(max(percent, 0), 100)
	return s.write(ctx, "run progress", func(c conn) error {
		res, err := c.exec(ctx, `UPDATE runs SET progress = ?, progress_message = ?, updated_at = ?
			WHERE id = ? AND status = 'running' AND attempt = ? AND incarnation = ?`,
			percent, message, now(time.Time{}).UnixMicro(), f.RunID, f.Attempt, f.Incarnation)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		cur, err := getRun(ctx, c, f.RunID)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %s: the run is %s at attempt %d of incarnation %s",
			store.ErrFenced, f, cur.Status, cur.Attempt, cur.Incarnation)
	})
}

// RunsRunning returns the running runs whose attempt belongs to node.
func (s *Store) RunsRunning(ctx context.Context, node string) ([]*jobs.Run, error) {
	runs, err := scanRuns(s.read().query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE node = ? AND status = 'running' ORDER BY started_at, id`, node))
	if err != nil {
		return nil, fail("running runs", err)
	}
	return runs, nil
}

// RunsNextDue returns the earliest not_before of the waiting runs of the
// named jobs; zero when there is none.
func (s *Store) RunsNextDue(ctx context.Context, jobNames []string, after time.Time) (time.Time, error) {
	if len(jobNames) == 0 {
		return time.Time{}, nil
	}
	from := int64(math.MinInt64)
	if !after.IsZero() {
		from = after.UnixMicro()
	}
	// The scheduling loop asks this every iteration. The first waiting runs
	// of all jobs, in the order of the runs_due index, nearly always hold
	// one of the node's jobs: the first of those is the answer. Else one
	// LIMIT 1 probe of the claim index per job (a MIN over all waiting runs
	// walked the whole backlog: most of the CPU of a burn-down).
	const scan = 256
	rows, err := s.read().query(ctx, `SELECT job, not_before FROM runs INDEXED BY runs_due
		WHERE status IN `+sqlWaiting+` AND not_before > ? ORDER BY not_before, created_at, id LIMIT ?`, from, scan)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	named := store.NewNameIndex(jobNames)
	read := 0
	for rows.Next() {
		read++
		var job string
		var notBefore int64
		if err := rows.Scan(&job, &notBefore); err != nil {
			rows.Close()
			return time.Time{}, fail("next due run", err)
		}
		if named.Has(job) {
			rows.Close()
			return time.UnixMicro(notBefore).UTC(), nil
		}
	}
	if err := rows.Close(); err != nil {
		return time.Time{}, fail("next due run", err)
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, fail("next due run", err)
	}
	if read < scan {
		return time.Time{}, nil // no waiting run of these jobs
	}
	var next sql.NullInt64
	err = s.read().queryRow(ctx, `SELECT MIN((SELECT not_before FROM runs INDEXED BY runs_claim
			WHERE job = j.value AND status IN `+sqlWaiting+` AND not_before > ? ORDER BY not_before LIMIT 1))
		FROM json_each(?) j`, from, jsonStrings(jobNames)).Scan(&next)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	return goTime(next), nil
}

// RunsPrune deletes the runs that finished before the given time, with
// their events and attempts, in batches; see store.Store. It also deletes
// the occurrences of schedule ticks that are older than both the prune
// horizon and the job's cursor and whose run is gone: the cursor already
// keeps those ticks from firing again. Occurrences of one-off jobs, and of
// jobs without a cursor, stay forever.
func (s *Store) RunsPrune(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	b := before.UnixMicro()
	const batch = `SELECT id FROM runs INDEXED BY runs_finished WHERE finished_at IS NOT NULL AND finished_at < ?
		AND status IN ` + sqlTerminal + ` ORDER BY finished_at LIMIT ?`
	total := 0
	for {
		var n int64
		err := s.write(ctx, "prune runs", func(c conn) error {
			ids, err := queryStrings(ctx, c, batch, b, batchSize)
			if err != nil || len(ids) == 0 {
				return err
			}
			for _, table := range []string{"events", "attempts"} {
				if _, err := c.exec(ctx, `DELETE FROM `+table+` WHERE run_id IN (`+placeholders(len(ids))+`)`, anys(ids)...); err != nil {
					return err
				}
			}
			res, err := c.exec(ctx, `DELETE FROM runs WHERE id IN (`+placeholders(len(ids))+`)`, anys(ids)...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil {
			return total, err
		}
		if n < batchSize {
			break
		}
	}
	for {
		var n int64
		err := s.write(ctx, "prune occurrences", func(c conn) error {
			res, err := c.exec(ctx, `DELETE FROM occurrences WHERE rowid IN (
				SELECT o.rowid FROM cursors c CROSS JOIN occurrences o ON o.job = c.job
				WHERE o.scheduled_at < ? AND o.scheduled_at < c.last AND o.kind = 'schedule'
				AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = o.run_id)
				LIMIT ?)`, b, batchSize)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		if n < batchSize {
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
	run, err := getRun(ctx, s.read(), id)
	if err != nil {
		return nil, fail("get run", err)
	}
	return run, nil
}

// RunsList returns runs, newest first (store.RunFilter).
func (s *Store) RunsList(ctx context.Context, f store.RunFilter) ([]*jobs.Run, error) {
	c := s.read()
	var before *listCursor
	if f.Before != "" {
		before = &listCursor{id: f.Before}
		if err := c.queryRow(ctx, `SELECT created_at FROM runs WHERE id = ?`, f.Before).Scan(&before.createdAt); err != nil {
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
	createdAt int64
	id        string
}

// runsListQuery is the statement of RunsList, reading from before on when
// it is not nil. A job's runs are read from runs_job_created newest
// first, whatever the status filter: the listing stops at the limit.
// Otherwise a rare status is read from the partial runs_status_created
// index, running runs from runs_node_running, and completed ones, most of
// the history, from runs_created newest first. SQLite uses a partial index
// only for a query that states its predicate, so the statement does. The
// time range and the cursor bound created_at (and id) in each index.
func runsListQuery(f store.RunFilter, before *listCursor) (string, []any) {
	limit := f.ListLimit()
	q := `SELECT ` + runColumns + ` FROM runs WHERE 1 = 1`
	var args []any
	if f.Job != "" {
		q = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_job_created WHERE job = ?`
		args = append(args, f.Job)
	}
	switch f.Status {
	case "":
	case jobs.StatusRunning:
		if f.Job == "" {
			q = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_node_running WHERE 1 = 1`
		}
		q += ` AND status = 'running'`
	case jobs.StatusCompleted:
		q += ` AND status = 'completed'`
	default:
		q += ` AND status = ? AND ` + sqlListedByStatus
		args = append(args, string(f.Status))
	}
	// One upper bound, the tighter: with both, SQLite seeks to Until and
	// reads every entry down to the cursor, however deep the page.
	until := f.Until
	if before != nil && (until.IsZero() || before.createdAt < until.UnixMicro()) {
		until = time.Time{}
		q += ` AND (created_at, id) < (?, ?)`
		args = append(args, before.createdAt, before.id)
	}
	q, args = createdRange(q, args, f.Since, until)
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	return q, append(args, limit)
}

// createdRange adds to the statement q the bounds of created_at that since
// and until set (zero: none).
func createdRange(q string, args []any, since, until time.Time) (string, []any) {
	if !since.IsZero() {
		q += ` AND created_at >= ?`
		args = append(args, since.UnixMicro())
	}
	if !until.IsZero() {
		q += ` AND created_at < ?`
		args = append(args, until.UnixMicro())
	}
	return q, args
}

// runsStatsQuery is the statement of RunsStats: the runs of the range,
// from runs_job_created for a job and runs_created for all, each with its
// duration when it completed (d), numbered by it among the completed ones
// (i, from 1) and counted (n), so that the percentiles are the durations
// of rank store.PercentileRank.
func runsStatsQuery(f store.RunStatsFilter) (string, []any) {
	q := `SELECT status, reason, CASE WHEN status = 'completed' THEN max(finished_at - started_at, 0) END AS d
		FROM runs INDEXED BY runs_created WHERE 1 = 1`
	var args []any
	if f.Job != "" {
		q = `SELECT status, reason, CASE WHEN status = 'completed' THEN max(finished_at - started_at, 0) END AS d
		FROM runs INDEXED BY runs_job_created WHERE job = ?`
		args = append(args, f.Job)
	}
	q, args = createdRange(q, args, f.Since, f.Until)
	return `SELECT ` + statusCounts + `, count(*) FILTER (WHERE status = 'cancelled' AND reason = 'expired'),
		coalesce(max(CASE WHEN i = (n * 50 + 99) / 100 THEN d END), 0),
		coalesce(max(CASE WHEN i = (n * 95 + 99) / 100 THEN d END), 0),
		coalesce(max(d), 0)
	FROM (SELECT status, reason, d, row_number() OVER (PARTITION BY d IS NULL ORDER BY d) AS i, count(d) OVER () AS n
		FROM (` + q + `))`, args
}

// statusCounts are the columns that count the runs of each status, in the
// order of jobs.Statuses.
var statusCounts = func() string {
	var cols []string
	for _, st := range jobs.Statuses {
		cols = append(cols, `count(*) FILTER (WHERE status = '`+string(st)+`')`)
	}
	return strings.Join(cols, ", ")
}()

// RunsStats summarises the runs of f in one statement (store.RunStats).
func (s *Store) RunsStats(ctx context.Context, f store.RunStatsFilter) (*store.RunStats, error) {
	q, args := runsStatsQuery(f)
	counts := make([]int64, len(jobs.Statuses))
	var p50, p95, longest int64
	st := &store.RunStats{Counts: make(map[jobs.Status]int64, len(counts))}
	dest := []any{}
	for i := range counts {
		dest = append(dest, &counts[i])
	}
	if err := s.read().queryRow(ctx, q, args...).Scan(append(dest, &st.Expired, &p50, &p95, &longest)...); err != nil {
		return nil, fail("run stats", err)
	}
	for i, status := range jobs.Statuses {
		st.Counts[status] = counts[i]
	}
	st.P50, st.P95, st.Max = time.Duration(p50)*time.Microsecond, time.Duration(p95)*time.Microsecond, time.Duration(longest)*time.Microsecond
	return st, nil
}

// sqlRunEvents and sqlRunAttempts read a run's events and attempts, and
// while it runs, the claim's event and the attempt that its run's row
// stands for until the attempt ends (claimed_from), in one snapshot. An
// attempt row stands for two events, read from that row (claimed_from,
// end_node): its claim's and its end's. They go in the order they
// happened among the rows of events by attempt number: a claim starts
// attempt n, no event is written while an attempt runs (each change of a
// running run ends its attempt), and each event written between the end of
// attempt n and the claim of n+1 carries attempt n. So by attempt, and in
// an attempt the claim, the end, then the rows of events in their order.
const (
	sqlRunEvents = `SELECT ` + eventColumns + ` FROM (
			SELECT attempt AS n, 2 AS k, id AS seq, ` + eventColumns + ` FROM events WHERE run_id = ?1
			UNION ALL
			SELECT number, 0, 0, run_id, started_at, node, number, claimed_from, 'running', 'claimed', '', ''
			FROM attempts WHERE run_id = ?1
			UNION ALL
			SELECT number, 1, 0, run_id, finished_at, end_node, number, 'running', status, reason, error,
				CASE WHEN reason = 'cancelled' THEN (SELECT cancelled_by FROM runs WHERE id = ?1) ELSE '' END
			FROM attempts WHERE run_id = ?1
			UNION ALL
			SELECT attempt, 0, 0, id, started_at, node, attempt, claimed_from, 'running', 'claimed', '', '' FROM runs
			WHERE id = ?1 AND status = 'running')
		ORDER BY n, k, seq`
	sqlRunAttempts = `SELECT ` + attemptColumns + ` FROM (
			SELECT ` + attemptColumns + ` FROM attempts WHERE run_id = ?1
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', x'', 0, 0
			FROM runs WHERE id = ?1 AND status = 'running')
		ORDER BY number`
)

// RunEvents returns a run's history, oldest first.
func (s *Store) RunEvents(ctx context.Context, id string) ([]*jobs.Event, error) {
	c := s.read()
	rows, err := c.query(ctx, sqlRunEvents, id)
	if err != nil {
		return nil, fail("run events", err)
	}
	defer rows.Close()
	var events []*jobs.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fail("run events", err)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("run events", err)
	}
	if len(events) == 0 { // every run has its creation event
		if _, err := getRun(ctx, c, id); err != nil {
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
	defer rows.Close()
	var attempts []*jobs.Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fail("run attempts", err)
		}
		attempts = append(attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("run attempts", err)
	}
	if len(attempts) == 0 {
		if _, err := getRun(ctx, c, id); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	return attempts, nil
}

// sqlRunAttemptsClipped reads attempts as sqlRunAttempts does, of one
// number (?2, 0 for all), the newest ?4 (-1 for all), each output stored
// of more than 2*?3 bytes (?3 > 0) as its first and its last ?3 bytes,
// with the length stored. A blob's length is in its record: it is not
// read for it.
const sqlRunAttemptsClipped = `SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
		error, reason, head, output_bytes, truncated, tail, stored FROM (
			SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason,
				CASE WHEN ?3 = 0 OR length(output) <= 2 * ?3 THEN output ELSE substr(output, 1, ?3) END AS head,
				output_bytes, truncated,
				CASE WHEN ?3 = 0 OR length(output) <= 2 * ?3 THEN x'' ELSE substr(output, -?3) END AS tail,
				length(output) AS stored
			FROM attempts WHERE run_id = ?1 AND (?2 = 0 OR number = ?2)
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', x'', 0, 0, x'', 0
			FROM runs WHERE id = ?1 AND status = 'running' AND (?2 = 0 OR attempt = ?2))
		ORDER BY number DESC LIMIT ?4`

// RunAttemptsClipped returns attempts of a run with a bounded part of
// their output, oldest first.
func (s *Store) RunAttemptsClipped(ctx context.Context, p store.AttemptsParams) ([]*store.ClippedAttempt, error) {
	c := s.read()
	limit := -1
	if p.Newest > 0 {
		limit = p.Newest
	}
	rows, err := c.query(ctx, sqlRunAttemptsClipped, p.RunID, p.Number, max(p.Keep, 0), limit)
	if err != nil {
		return nil, fail("run attempts", err)
	}
	defer rows.Close()
	var out []*store.ClippedAttempt
	for rows.Next() {
		var (
			tail []byte
			ca   store.ClippedAttempt
		)
		a, err := scanAttempt(rows, &tail, &ca.StoredBytes)
		if err != nil {
			return nil, fail("run attempts", err)
		}
		ca.Attempt, ca.Tail = *a, string(tail)
		out = append(out, &ca)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("run attempts", err)
	}
	if len(out) == 0 {
		if _, err := getRun(ctx, c, p.RunID); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// JobsLastRun returns the newest run of each named job that has one.
func (s *Store) JobsLastRun(ctx context.Context, jobNames []string) (map[string]*jobs.Run, error) {
	out := map[string]*jobs.Run{}
	if len(jobNames) == 0 {
		return out, nil
	}
	runs, err := scanRuns(s.read().query(ctx, `SELECT `+runColumns+` FROM runs WHERE id IN (
		SELECT (SELECT r.id FROM runs r WHERE r.job = j.value ORDER BY r.created_at DESC, r.id DESC LIMIT 1)
		FROM json_each(?) j)`, jsonStrings(jobNames)))
	if err != nil {
		return nil, fail("last runs", err)
	}
	for _, r := range runs {
		out[r.Job] = r
	}
	return out, nil
}

// sqlRunsCount counts the runs of each status but completed: running runs
// in runs_node_running, the others in runs_status_created, whose
// predicate the statement states so that SQLite uses it.
const sqlRunsCount = `SELECT status, count(*) FROM runs INDEXED BY runs_status_created
		WHERE ` + sqlListedByStatus + ` GROUP BY status
	UNION ALL
	SELECT 'running', count(*) FROM runs INDEXED BY runs_node_running WHERE status = 'running'`

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
