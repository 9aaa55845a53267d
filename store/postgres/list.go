package postgres

import (
	"context"
	"fmt"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

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

// RunGet returns one run.
func (s *Store) RunGet(ctx context.Context, id string) (*jobs.Run, error) {
	run, err := getRun(ctx, s.read(), id, false)
	if err != nil {
		return nil, fail("get run", err)
	}
	return run, nil
}

// RunsList returns runs, newest first.
func (s *Store) RunsList(ctx context.Context, f store.RunFilter) ([]*jobs.Run, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, nil // no run has it
	}
	q, args := runsListQuery(f)
	runs, err := scanRuns(s.read().query(ctx, q, args...))
	if err != nil {
		return nil, fail("list runs", err)
	}
	return runs, nil
}

// runsListQuery is the statement of RunsList (f.Status valid or empty). The
// status is a constant, not a parameter: the plan is made for it. All runs,
// and completed ones (most of the history), are read newest first from
// run_order, of all jobs or of f.Job, each run then by its id; a rare
// status from the partial runs_status_created index, and running runs from
// runs_running.
func runsListQuery(f store.RunFilter) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Status == "" || f.Status == jobs.StatusCompleted {
		q := `SELECT ` + qualified("r", runColumns) + ` FROM run_order o JOIN runs r ON r.id = o.id WHERE true`
		if f.Job != "" {
			q += ` AND o.job = ` + arg(f.Job)
		}
		if f.Status != "" {
			q += ` AND r.status = '` + string(f.Status) + `'`
		}
		return q + ` ORDER BY o.created_at DESC, o.id DESC LIMIT ` + arg(f.ListLimit()), args
	}
	q := `SELECT ` + runColumns + ` FROM runs WHERE status = '` + string(f.Status) + `'`
	if f.Job != "" {
		q += ` AND job = ` + arg(f.Job)
	}
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(f.ListLimit()), args
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
	out, err := rowscan.RunCounts(s.read().query(ctx, sqlRunsCount))
	if err != nil {
		return nil, fail("count runs", err)
	}
	return out, nil
}
