package sqlite

import (
	"context"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// RunsRunning returns the running runs whose attempt belongs to node.
func (s *Store) RunsRunning(ctx context.Context, node string) ([]*jobs.Run, error) {
	runs, err := scanRuns(s.read().query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE node = ? AND status = 'running' ORDER BY started_at, id`, node))
	if err != nil {
		return nil, fail("running runs", err)
	}
	return runs, nil
}

// RunGet returns one run.
func (s *Store) RunGet(ctx context.Context, id string) (*jobs.Run, error) {
	run, err := getRun(ctx, s.read(), id)
	if err != nil {
		return nil, fail("get run", err)
	}
	return run, nil
}

// RunsList returns runs, newest first.
func (s *Store) RunsList(ctx context.Context, f store.RunFilter) ([]*jobs.Run, error) {
	q, args := runsListQuery(f)
	runs, err := scanRuns(s.read().query(ctx, q, args...))
	if err != nil {
		return nil, fail("list runs", err)
	}
	return runs, nil
}

// runsListQuery is the statement of RunsList. A job's runs are read from
// runs_job_created newest first, whatever the status filter: the listing
// stops at the limit. Otherwise a rare status is read from the partial
// runs_status_created index, running runs from runs_node_running, and
// completed ones, most of the history, from runs_created newest first.
// SQLite uses a partial index only for a query that states its predicate,
// so the statement does.
func runsListQuery(f store.RunFilter) (string, []any) {
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
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	return q, append(args, limit)
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
	out, err := rowscan.RunCounts(rowscan.SQL(s.read().query(ctx, sqlRunsCount)))
	if err != nil {
		return nil, fail("count runs", err)
	}
	return out, nil
}
