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

// The statements of an insert, which the writer keeps prepared
// (preparedQueries).
const (
	sqlOccurrenceRun    = `SELECT run_id FROM occurrences WHERE job = ? AND scheduled_at = ?`
	sqlInsertOccurrence = `INSERT INTO occurrences (job, scheduled_at, run_id, kind) VALUES (?, ?, ?, ?)`
	sqlDedupRun         = `SELECT id FROM runs WHERE job = ? AND dedup_id = ? AND status IN ` + sqlActive
	sqlChainRun         = `SELECT id FROM runs INDEXED BY runs_parent WHERE parent_run_id = ? AND job = ?`
	sqlInsertRun        = `INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind,
		scheduled_at, not_before, not_after, created_at, updated_at, dedup_id, rerun_of, payload, retry_json, actor,
		parent_run_id)
		VALUES (?, ?, 'pending', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertEvent = `INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message, actor)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

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
			if p.Trigger == jobs.TriggerChain || p.ParentRunID != "" {
				return errors.New("a run of a chain is made by its parent's end, not in bulk")
			}
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

// chainRun returns the run of job that the run parent made, or "".
func chainRun(ctx context.Context, c conn, parent, job string) (string, error) {
	var id string
	err := c.queryRow(ctx, sqlChainRun, parent, job).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// writeChains makes the runs of the chains of the transitions ts whose
// results are results (store.ChainRuns), in their transaction. A run of
// a chain that its parent made already is not made again: the parent's
// end is written once, and the unique index runs_parent holds in any case.
func writeChains(ctx context.Context, c conn, ts []jobs.Transition, results []store.TransitionResult) error {
	for i, t := range ts {
		if t.Chain.Empty() || results[i].Err != nil {
			continue
		}
		for _, p := range store.ChainRuns(t, results[i].Run) {
			_, err := insertRun(ctx, c, p, p.Now)
			if err != nil && !errors.Is(err, store.ErrDuplicate) {
				return fmt.Errorf("chain of run %s: job %s: %w", results[i].Run.ID, p.Job, err)
			}
		}
	}
	return nil
}

// insertRun makes a run, its occurrence and its creation event.
func insertRun(ctx context.Context, c conn, p store.RunInsertParams, now time.Time) (*jobs.Run, error) {
	run, retry, err := newRun(p, now)
	if err != nil {
		return nil, err
	}
	if run.ParentRunID != "" {
		other, err := chainRun(ctx, c, run.ParentRunID, run.Job)
		if err != nil {
			return nil, err
		}
		if other != "" {
			return nil, store.ChainDuplicate(p, other)
		}
	}
	if store.HasOccurrence(run.Trigger) {
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
		p.Trigger != jobs.TriggerManual && p.Trigger != jobs.TriggerRerun && p.Trigger != jobs.TriggerChain &&
		p.Trigger != jobs.TriggerBackfill:
		return nil, "", fmt.Errorf("unknown trigger %q", p.Trigger)
	case store.HasOccurrence(p.Trigger) && p.ScheduledAt.IsZero():
		return nil, "", fmt.Errorf("a %s run needs its scheduled time", p.Trigger)
	}
	if err := store.CheckChainParams(p); err != nil {
		return nil, "", err
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
		ParentRunID: p.ParentRunID,
	}
	if run.Retry, run.NoRetryExitCodes, err = store.DecodeRetry(retry); err != nil {
		return nil, "", err
	}
	return run, retry, nil
}

// writeRun writes a new run whose occurrence is free, with its occurrence
// and its creation event by node.
func writeRun(ctx context.Context, c conn, run *jobs.Run, retry, node string) error {
	if store.HasOccurrence(run.Trigger) {
		_, err := c.exec(ctx, sqlInsertOccurrence, run.Job, run.ScheduledAt.UnixMicro(), run.ID, store.OccurrenceKind(run.Trigger))
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
		nullString(run.DedupID), nullString(run.RerunOf), run.Payload, retry, run.Actor, nullString(run.ParentRunID))
	if err != nil {
		return err
	}
	return insertEvent(ctx, c, jobs.Event{RunID: run.ID, Time: run.CreatedAt, Node: node, To: jobs.StatusPending,
		Reason: jobs.ReasonCreated, Actor: run.Actor})
}

func insertEvent(ctx context.Context, c conn, e jobs.Event) error {
	_, err := c.exec(ctx, sqlInsertEvent,
		e.RunID, e.Time.UnixMicro(), e.Node, e.Attempt, nullString(string(e.From)), string(e.To), string(e.Reason), e.Message,
		e.Actor)
	return err
}
