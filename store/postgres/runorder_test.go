package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// runOrderDiff counts the runs that run_order lacks or has wrong and the
// rows of run_order without a run, and the runs there are.
func runOrderDiff(t *testing.T, dsn string) (diff, runs int) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	err = conn.QueryRow(t.Context(), `SELECT
		(SELECT count(*) FROM runs r FULL JOIN run_order o ON o.id = r.id
			WHERE r.id IS NULL OR o.id IS NULL OR o.job <> r.job OR o.created_at <> r.created_at),
		(SELECT count(*) FROM runs)`).Scan(&diff, &runs)
	if err != nil {
		t.Fatal(err)
	}
	return diff, runs
}

// TestRunOrderFollowsRuns: run_order holds exactly each run's id, job and
// creation time through every way runs are made and removed: one run, a
// batch, a statement of SQL (also from a session whose search_path lacks
// the tables), pruning, a DELETE, a TRUNCATE.
func TestRunOrderFollowsRuns(t *testing.T) {
	s, dsn := openTest(t)
	ctx := t.Context()
	check := func(step string, wantRuns int) {
		t.Helper()
		if diff, runs := runOrderDiff(t, dsn); diff != 0 || runs != wantRuns {
			t.Fatalf("%s: %d runs (want %d), %d differ from run_order", step, runs, wantRuns, diff)
		}
	}
	if _, err := s.RunInsert(ctx, manual("one")); err != nil {
		t.Fatal(err)
	}
	check("one run", 1)
	var ps []store.RunInsertParams
	for i := range 50 {
		p := manual(fmt.Sprintf("batch-%d", i%3))
		p.Now = t0.Add(time.Duration(i) * time.Second)
		ps = append(ps, p)
	}
	if _, err := s.RunInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	check("a batch", 51)
	admin(t, dsn, `INSERT INTO runs (id, job, status, max_attempts, trigger_kind, scheduled_at, not_before, created_at, updated_at, retry)
		SELECT 'sql-' || g, 'sql', 'pending', 1, 'manual', now(), now(), now(), now(), '{}' FROM generate_series(1, 20) g`)
	check("SQL", 71)
	// A session whose search_path does not find the tables.
	admin(t, dsn, `SET search_path = pg_catalog`,
		`INSERT INTO public.runs (id, job, status, max_attempts, trigger_kind, scheduled_at, not_before, created_at, updated_at, retry)
		VALUES ('other-path', 'sql', 'pending', 1, 'manual', now(), now(), now(), now(), '{}')`,
		`DELETE FROM public.runs WHERE id = 'other-path'`,
		`INSERT INTO public.runs (id, job, status, max_attempts, trigger_kind, scheduled_at, not_before, created_at, updated_at, retry)
		VALUES ('other-path', 'sql', 'pending', 1, 'manual', now(), now(), now(), now(), '{}')`)
	check("another search_path", 72)

	// Finish the batch's runs and prune them.
	claimed, err := s.RunsClaim(ctx, store.ClaimParams{Jobs: store.NewJobLimits(map[string]int{"batch-0": 0, "batch-1": 0, "batch-2": 0}),
		Limit: 100, Node: "n", Incarnation: "i", Due: true})
	if err != nil || len(claimed) != 50 {
		t.Fatalf("claim: %v, %d runs", err, len(claimed))
	}
	var ts []jobs.Transition
	for _, r := range claimed {
		ts = append(ts, jobs.Transition{RunID: r.ID, To: jobs.StatusCompleted, Reason: jobs.ReasonSucceeded, Node: "n",
			Fence: &jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}})
	}
	if _, err := s.RunTransitionMany(ctx, ts); err != nil {
		t.Fatal(err)
	}
	check("finished", 72)
	if n, err := s.RunsPrune(ctx, time.Now().Add(time.Hour)); err != nil || n != 50 {
		t.Fatalf("prune: %d runs, %v", n, err)
	}
	check("pruned", 22)
	admin(t, dsn, `DELETE FROM runs WHERE job = 'sql' AND id < 'sql-2'`) // other-path, sql-1, sql-10 .. sql-19
	check("DELETE", 10)
	admin(t, dsn, `TRUNCATE runs CASCADE`)
	check("TRUNCATE", 0)
}

// TestRunOrderLists: the runs a store makes are in run_order, and are
// listed from it newest first, of one job and as each job's newest run.
func TestRunOrderLists(t *testing.T) {
	s, dsn := openTest(t)
	var ids []string
	for i := range 30 {
		p := manual(fmt.Sprintf("job-%d", i%4))
		p.Now = t0.Add(time.Duration(i) * time.Minute)
		r, err := s.RunInsert(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if diff, runs := runOrderDiff(t, dsn); diff != 0 || runs != 30 {
		t.Fatalf("%d runs, %d differ from run_order", runs, diff)
	}
	listed, err := s.RunsList(t.Context(), store.RunFilter{Job: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := len(ids) - 1; i >= 0; i-- {
		if i%4 == 1 {
			want = append(want, ids[i])
		}
	}
	var got []string
	for _, r := range listed {
		got = append(got, r.ID)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %v, want %v", got, want)
	}
	last, err := s.JobsLastRun(t.Context(), []string{"job-0", "job-3", "none"})
	if err != nil || len(last) != 2 || last["job-0"].ID != ids[28] || last["job-3"].ID != ids[27] {
		t.Fatalf("last runs %v: %v", last, err)
	}
}
