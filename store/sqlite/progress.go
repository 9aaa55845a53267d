package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

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
