package postgres

import (
	"context"
	"fmt"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

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
