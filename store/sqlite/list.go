package sqlite

import (
	"context"
	"strings"
	"time"

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
