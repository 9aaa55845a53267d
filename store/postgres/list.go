package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// RunsList returns runs, newest first (store.RunFilter).
func (s *Store) RunsList(ctx context.Context, f store.RunFilter) ([]*jobs.Run, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, nil // no run has it
	}
	c := s.read()
	var before *listCursor
	if f.Before != "" {
		before = &listCursor{id: f.Before}
		if err := c.queryRow(ctx, `SELECT created_at FROM run_order WHERE id = $1`, f.Before).Scan(&before.createdAt); err != nil {
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
	createdAt time.Time
	id        string
}

// runsListQuery is the statement of RunsList (f.Status valid or empty),
// reading from before on when it is not nil. The status is a constant, not
// a parameter: the plan is made for it. All runs, and completed ones (most
// of the history), are read newest first from run_order, of all jobs or of
// f.Job, each run then by its id; a rare status from the partial
// runs_status_created index, and running runs from runs_running. The time
// range and the cursor bound created_at (and id) in each index.
func runsListQuery(f store.RunFilter, before *listCursor) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// One upper bound, the tighter of Until and the cursor: the index is
	// read from it down.
	bounds := func(created, id string) string {
		var q string
		if !f.Since.IsZero() {
			q += ` AND ` + created + ` >= ` + arg(f.Since.UTC())
		}
		switch {
		case before != nil && (f.Until.IsZero() || before.createdAt.Before(f.Until)):
			q += ` AND (` + created + `, ` + id + `) < (` + arg(before.createdAt) + `, ` + arg(before.id) + `)`
		case !f.Until.IsZero():
			q += ` AND ` + created + ` < ` + arg(f.Until.UTC())
		}
		return q
	}
	if f.Status == "" || f.Status == jobs.StatusCompleted {
		q := `SELECT ` + qualified("r", runColumns) + ` FROM run_order o JOIN runs r ON r.id = o.id WHERE true`
		if f.Job != "" {
			q += ` AND o.job = ` + arg(f.Job)
		}
		if f.Status != "" {
			q += ` AND r.status = '` + string(f.Status) + `'`
		}
		q += bounds("o.created_at", "o.id")
		return q + ` ORDER BY o.created_at DESC, o.id DESC LIMIT ` + arg(f.ListLimit()), args
	}
	q := `SELECT ` + runColumns + ` FROM runs WHERE status = '` + string(f.Status) + `'`
	if f.Job != "" {
		q += ` AND job = ` + arg(f.Job)
	}
	q += bounds("created_at", "id")
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(f.ListLimit()), args
}

// runsStatsQuery is the statement of RunsStats: the runs of the range,
// from run_order (of f.Job, or of all jobs) in its indexes, each then by
// its id, counted by status, with the percentiles (percentile_disc: the
// nearest rank, store.PercentileRank) and the longest of the durations of
// the completed ones.
func runsStatsQuery(f store.RunStatsFilter) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var cols []string
	for _, st := range jobs.Statuses {
		cols = append(cols, `count(*) FILTER (WHERE r.status = '`+string(st)+`')`)
	}
	const d = `greatest(r.finished_at - r.started_at, interval '0')`
	q := `SELECT ` + strings.Join(cols, ", ") + `, count(*) FILTER (WHERE r.status = 'cancelled' AND r.reason = 'expired'),
		coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY ` + d + `) FILTER (WHERE r.status = 'completed'), interval '0'),
		coalesce(percentile_disc(0.95) WITHIN GROUP (ORDER BY ` + d + `) FILTER (WHERE r.status = 'completed'), interval '0'),
		coalesce(max(` + d + `) FILTER (WHERE r.status = 'completed'), interval '0')
	FROM run_order o JOIN runs r ON r.id = o.id WHERE true`
	if f.Job != "" {
		q += ` AND o.job = ` + arg(f.Job)
	}
	if !f.Since.IsZero() {
		q += ` AND o.created_at >= ` + arg(f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q += ` AND o.created_at < ` + arg(f.Until.UTC())
	}
	return q, args
}

// RunsStats summarises the runs of f in one statement (store.RunStats).
func (s *Store) RunsStats(ctx context.Context, f store.RunStatsFilter) (*store.RunStats, error) {
	q, args := runsStatsQuery(f)
	counts := make([]int64, len(jobs.Statuses))
	st := &store.RunStats{Counts: make(map[jobs.Status]int64, len(counts))}
	var dest []any
	for i := range counts {
		dest = append(dest, &counts[i])
	}
	if err := s.read().queryRow(ctx, q, args...).Scan(append(dest, &st.Expired, &st.P50, &st.P95, &st.Max)...); err != nil {
		return nil, fail("run stats", err)
	}
	for i, status := range jobs.Statuses {
		st.Counts[status] = counts[i]
	}
	return st, nil
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
