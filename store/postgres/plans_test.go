package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestPlansWithoutHotPathIndexes checks that the statements that have no
// index of their own, so that a claim and a completion add fewer index
// entries (the running runs of a node, and listings of running and
// completed runs, which runs_status_created leaves out), read indexes, not
// the whole table, on a history of 30,000 runs; and that a job's active
// runs are read from runs_active; that a claim reads no more than its
// runs; and that listings of all runs, of completed runs and of each job's
// newest run read run_order in its order, not the whole of runs or
// run_order, and sort nothing; and that the counts by status read the
// partial indexes alone.
func TestPlansWithoutHotPathIndexes(t *testing.T) {
	_, dsn := openTest(t)
	admin(t, dsn,
		// 30,000 runs of 30 jobs: most completed, then every status.
		`INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, finished_at, node, retry)
		SELECT lpad(g::text, 12, '0'), 'job-' || (g % 30),
			CASE WHEN g % 1000 = 1 THEN 'pending' WHEN g % 1000 = 2 THEN 'running'
				WHEN g % 1000 = 3 THEN 'retrying' WHEN g % 1000 = 4 THEN 'dead_letter'
				WHEN g % 1000 = 5 THEN 'cancelled' ELSE 'completed' END,
			1, 3, 'manual', now(), now(), now() - g * interval '1 second', now(),
			CASE WHEN g % 1000 IN (1, 2, 3) THEN NULL ELSE now() END,
			CASE WHEN g % 1000 = 2 THEN 'node-' || (g % 3) ELSE '' END, '{}'
		FROM generate_series(1, 30000) g`,
		`ANALYZE runs`, `ANALYZE run_order`)

	plans := map[string]struct {
		sql   string
		args  []any
		index []string // the plan reads one of them
	}{
		"lock active runs":  {sqlLockActiveRuns, []any{[]string{"job-1", "job-2"}}, []string{"runs_active"}},
		"running of a node": {sqlRunsRunning, []any{"node-1"}, []string{"runs_running"}},
		// A claim as large as a node's slots: the candidates of several jobs
		// are looked up by id, and the claimed runs by the row versions the
		// claim locked, whatever their number.
		"claim": {sqlClaim, []any{[]string{"job-1", "job-2"}, nil, 5000, []int32{0, 2}, "node-1", "inc", []int32{5000, 5000}},
			[]string{"runs_pkey"}},
		"claim of one job": {sqlClaimOne, []any{[]string{"job-1"}, nil, 5000, []int32{0}, "node-1", "inc", []int32{5000}},
			[]string{"Tid Scan on runs"}},
	}
	for _, st := range []jobs.Status{jobs.StatusPending, jobs.StatusRetrying, jobs.StatusDeadLetter,
		jobs.StatusCancelled, jobs.StatusRunning, jobs.StatusCompleted} {
		for _, job := range []string{"", "job-7"} {
			q, args := runsListQuery(store.RunFilter{Job: job, Status: st}, nil)
			index := []string{"runs_status_created"}
			switch {
			case st == jobs.StatusCompleted && job == "":
				index = []string{"run_order_created"}
			case st == jobs.StatusCompleted:
				index = []string{"run_order_job_created"}
			case st == jobs.StatusRunning:
				index = []string{"runs_running"}
			}
			if job != "" && st != jobs.StatusCompleted { // the job's own runs may come first
				index = append(index, "runs_claim", "runs_active")
			}
			plans["list "+string(st)+" of "+job] = struct {
				sql   string
				args  []any
				index []string
			}{q, args, index}
		}
	}
	// A later page of a range, and the stats of a range.
	since := time.Now().Add(-29000 * time.Second)
	cursor := &listCursor{createdAt: time.Now().Add(-15000 * time.Second), id: fmt.Sprintf("%012d", 15000)}
	for _, job := range []string{"", "job-7"} {
		q, args := runsListQuery(store.RunFilter{Job: job}, nil)
		index := "run_order_created"
		if job != "" {
			index = "run_order_job_created"
		}
		plans["list all of "+job] = struct {
			sql   string
			args  []any
			index []string
		}{q, args, []string{index}}
		q, args = runsListQuery(store.RunFilter{Job: job, Since: since, Until: time.Now()}, cursor)
		plans["list a page of all of "+job] = struct {
			sql   string
			args  []any
			index []string
		}{q, args, []string{index}}
		q, args = runsListQuery(store.RunFilter{Job: job, Status: jobs.StatusDeadLetter, Since: since}, cursor)
		plans["list a page of dead_letter of "+job] = struct {
			sql   string
			args  []any
			index []string
		}{q, args, []string{"runs_status_created"}}
	}
	plans["last runs"] = struct {
		sql   string
		args  []any
		index []string
	}{sqlJobsLastRun, []any{[]string{"job-1", "job-2"}}, []string{"run_order_job_created"}}

	explain := explainer(t, dsn)
	// The counts of the dashboard read both partial indexes, not the history.
	if plan := explain(sqlRunsCount); strings.Contains(plan, "Seq Scan on run") ||
		!strings.Contains(plan, "runs_status_created") || !strings.Contains(plan, "runs_running") {
		t.Errorf("count: want a plan that reads runs_status_created and runs_running and no sequential scan of runs, got\n%s", plan)
	}
	// The stats of a range read the range of run_order from its index,
	// then the runs: of a job by id; of all jobs, as the planner finds
	// cheaper (here, with a range of 1% of a small table, in one pass
	// over runs).
	for _, job := range []string{"", "job-7"} {
		index := "run_order_created"
		if job != "" {
			index = "run_order_job_created"
		}
		q, args := runsStatsQuery(store.RunStatsFilter{Job: job, Since: time.Now().Add(-300 * time.Second)})
		plan := explain(q, args...)
		if !strings.Contains(plan, "Index Scan on "+index) || strings.Contains(plan, "Seq Scan on run_order") ||
			(job != "" && strings.Contains(plan, "Seq Scan on runs")) {
			t.Errorf("stats of %q: want a plan that reads a range of %s, got\n%s", job, index, plan)
		}
	}
	for name, p := range plans {
		plan := explain(p.sql, p.args...)
		// A listing from run_order reads it in its order: no sort.
		ordered := strings.HasPrefix(p.index[0], "run_order") && strings.Contains(plan, "Sort")
		if strings.Contains(plan, "Seq Scan on run") || ordered || !slices.ContainsFunc(p.index, func(ix string) bool { return strings.Contains(plan, ix) }) {
			t.Errorf("%s: want a plan that reads %s and no sequential scan of runs, got\n%s", name, p.index, plan)
		}
	}
}

// explainer connects to dsn until the test ends (30 s at most) and
// returns a function that gives the plan of sql with args, as EXPLAIN
// prints it.
func explainer(t *testing.T, dsn string) func(sql string, args ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return func(sql string, args ...any) string {
		t.Helper()
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatalf("explain %.60q: %v", sql, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("explain %.60q: %v", sql, err)
		}
		return strings.Join(lines, "\n")
	}
}

// TestClaimPlansWithStaleStatistics: the claim of many jobs' due runs (a
// round of ticks fired ahead, claimed at its tick in parts) reads each
// job's runs from runs_claim and looks the candidates up by id, also when
// the statistics were taken while few or no runs waited: 10,000 runs then
// wait, one per job, which the planner does not know. With such
// statistics it read, for each job, runs_due (every due run of every
// job), or, for the candidates, every waiting run through runs_active and
// runs_due. With a condition on the
// status alone on runs_due or on runs_active (without sqlWaitingOfAll or
// sqlNamedJobs), one of the two cases failed, and so did the second
// without sqlPickedDue. The reads of all jobs' first due runs read
// runs_due only.
func TestClaimPlansWithStaleStatistics(t *testing.T) {
	for _, waiting := range []int{0, 100} {
		t.Run(fmt.Sprintf("%d waiting when analyzed", waiting), func(t *testing.T) {
			testClaimPlansWithStaleStatistics(t, waiting)
		})
	}
}

func testClaimPlansWithStaleStatistics(t *testing.T, waiting int) {
	_, dsn := openTest(t)
	admin(t, dsn,
		// The history: 30,000 completed runs of 10,000 jobs, and runs that
		// wait for a later time, analyzed and vacuumed.
		`INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, finished_at, node, retry)
		SELECT 'h' || lpad(g::text, 12, '0'), 'job-' || lpad((g % 10000)::text, 5, '0'),
			CASE WHEN g % 30 = 0 THEN 'cancelled' ELSE 'completed' END,
			1, 1, 'schedule', now() - g * interval '1 minute', now() - g * interval '1 minute',
			now() - g * interval '1 minute', now(), now(), 'node-1', '{}'
		FROM generate_series(1, 30000) g`,
		fmt.Sprintf(`INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, node, retry)
		SELECT 'w' || lpad(g::text, 12, '0'), 'job-' || lpad(g::text, 5, '0'), 'pending',
			0, 1, 'schedule', now(), now() + interval '1 hour', now(), now(), '', '{}'
		FROM generate_series(1, %d) g`, waiting),
		`VACUUM ANALYZE runs`,
		// Then a round: one waiting run per job, due now.
		`INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, node, retry)
		SELECT 'r' || lpad(g::text, 12, '0'), 'job-' || lpad(g::text, 5, '0'), 'pending',
			0, 1, 'schedule', now(), now() - interval '1 second', now(), now(), '', '{}'
		FROM generate_series(0, 9999) g`)

	part := make([]string, 500)
	limits, caps := make([]int32, len(part)), make([]int32, len(part))
	for i := range part {
		part[i], limits[i], caps[i] = fmt.Sprintf("job-%05d", 2*i), 1, int32(len(part))
	}
	explain := explainer(t, dsn)
	plan := explain(sqlClaim, part, nil, len(part), limits, "node-1", "inc", caps)
	for _, ix := range []string{"runs_due", "runs_active", "runs_status_created", "Seq Scan on runs"} {
		if strings.Contains(plan, ix) {
			t.Errorf("the claim's plan reads %s; want each job's due runs from runs_claim and the candidates by id:\n%s", ix, plan)
		}
	}
	for _, ix := range []string{"runs_claim", "runs_pkey"} {
		if !strings.Contains(plan, ix) {
			t.Errorf("the claim's plan does not read %s:\n%s", ix, plan)
		}
	}

	// The reads of all jobs' first due runs read runs_due only (its
	// condition, sqlWaitingOfAll): with a condition on the status alone and
	// 100 runs waiting when analyzed, they read every waiting run through
	// runs_active and runs_status_created, and sorted them.
	for name, sql := range map[string]string{
		"heads of a claim": explain(sqlDueHeads, 2064, nil),
		"next due run":     explain(sqlFirstWaiting, 256, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	} {
		for _, ix := range []string{"runs_active", "runs_claim", "runs_status_created", "Seq Scan on runs"} {
			if strings.Contains(sql, ix) || !strings.Contains(sql, "runs_due") {
				t.Errorf("the %s: want a plan that reads runs_due only, got\n%s", name, sql)
				break
			}
		}
	}
}
