package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// BenchmarkClaimComplete: claim 1,000 runs of one job, then complete them
// in one RunTransitionMany, per iteration; runs/s is the engine's bound.
func BenchmarkClaimComplete(b *testing.B) {
	s, err := Open(b.Context(), Options{DSN: srv.NewDatabase(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchClaimComplete(b, s, 1000, true)
}

// BenchmarkClaimScale measures the latency of a claim of one run while the
// table holds a backlog and a history: rows runs, half of them pending a
// day ahead and half finished, and 20,000 due runs, over ten jobs. A claim
// should cost the same whatever rows is, and whichever plan the server
// picks: plans=custom plans each execution with its parameters, as the
// server does for the first executions on each connection. Run it by hand
// (it seeds a million rows), with at most 20,000 iterations:
//
//	go test ./store/postgres -run '^$' -bench ClaimScale -benchtime 2000x
func BenchmarkClaimScale(b *testing.B) {
	for _, rows := range []int{10_000, 1_000_000} {
		for _, limited := range []bool{false, true} {
			for _, plans := range []string{"auto", "custom"} {
				b.Run(fmt.Sprintf("rows=%d/limited=%t/plans=%s", rows, limited, plans), func(b *testing.B) {
					benchClaimScale(b, rows, limited, plans)
				})
			}
		}
	}
}

// seedHistory makes $1 runs of $2 jobs: the even ones pending a day
// ahead, the odd ones finished. seedDue makes $1 due runs of $2 jobs.
const (
	seedHistory = `INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, finished_at, retry)
		SELECT 'h' || lpad(g::text, 9, '0'), 'job-' || (g % $2), CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'completed' END,
			g % 2, 3, 'manual', now() - interval '2 days',
			CASE WHEN g % 2 = 0 THEN now() + interval '1 day' ELSE now() - interval '2 days' END,
			now() - interval '2 days', now() - interval '2 days',
			CASE WHEN g % 2 = 1 THEN now() - interval '1 day' END, '{"max_attempts": 3}'
		FROM generate_series(1, $1::int) AS g`
	seedDue = `INSERT INTO runs (id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
			created_at, updated_at, retry)
		SELECT 'd' || lpad(g::text, 9, '0'), 'job-' || (g % $2), 'pending', 0, 3, 'manual', now() - interval '1 hour',
			now() - interval '1 hour' + g * interval '1 ms', now() - interval '1 hour', now() - interval '1 hour',
			'{"max_attempts": 3}'
		FROM generate_series(1, $1::int) AS g`
)

func benchClaimScale(b *testing.B, rows int, limited bool, plans string) {
	ctx := b.Context()
	dsn := srv.NewDatabase(b)
	if plans == "custom" {
		// A setting that the connection string carries to the server.
		sep := " "
		if strings.Contains(dsn, "://") {
			sep = "&"
			if !strings.Contains(dsn, "?") {
				sep = "?"
			}
		}
		dsn += sep + "plan_cache_mode=force_custom_plan"
	}
	s, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const jobCount, due = 10, 20_000
	if _, err := s.pool.Exec(ctx, seedHistory, rows, jobCount); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, seedDue, due, jobCount); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE runs`); err != nil {
		b.Fatal(err)
	}
	limits := map[string]int{}
	for i := range jobCount {
		limits[fmt.Sprintf("job-%d", i)] = 0
		if limited {
			limits[fmt.Sprintf("job-%d", i)] = due
		}
	}
	jobLimits := store.NewJobLimits(limits)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		got, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: jobLimits, Limit: 1})
		lat = append(lat, time.Since(start))
		if err != nil || len(got) != 1 {
			b.Fatalf("RunsClaim = %d runs, %v", len(got), err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
	b.ReportMetric(0, "ns/op")
}
