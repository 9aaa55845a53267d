package postgres

import (
	"cmp"
	"context"
	"fmt"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

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
