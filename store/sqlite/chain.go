package sqlite

import (
	"context"

	"github.com/schedulerd/schedulerd/jobs"
)

// RunChildren returns the runs that the end of run id made (its chain),
// oldest first; see store.Store.
func (s *Store) RunChildren(ctx context.Context, id string) ([]*jobs.Run, error) {
	runs, err := scanRuns(s.read().query(ctx, `SELECT `+runColumns+` FROM runs INDEXED BY runs_parent
		WHERE parent_run_id = ? ORDER BY created_at, id`, id))
	if err != nil {
		return nil, fail("run children", err)
	}
	return runs, nil
}
