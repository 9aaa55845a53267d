package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// The statements of a cancel; the writer keeps sqlRequestCancel prepared
// (preparedQueries).
const (
	// sqlRequestCancel keeps the run's cancelled_by when the actor is ''
	// (overlap=replace asks the engine's way).
	sqlRequestCancel = `UPDATE runs SET cancel_requested = 1, cancelled_by = COALESCE(NULLIF(?, ''), cancelled_by),
		updated_at = ? WHERE id = ? RETURNING ` + runColumns
	sqlCancelledBy = `UPDATE runs SET cancelled_by = ? WHERE id = ?`
)

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
