package postgres

import (
	"context"

	"github.com/schedulerd/schedulerd/jobs"
)

// RunChildren returns the runs that the end of run id made (its chain),
// oldest first; see store.Store.
func (s *Store) RunChildren(ctx context.Context, id string) ([]*jobs.Run, error) {
	runs, err := scanRuns(s.read().query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE parent_run_id = $1 ORDER BY created_at, id`, id))
	if err != nil {
		return nil, fail("run children", err)
	}
	return runs, nil
}
