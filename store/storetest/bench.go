package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// BenchClaimComplete measures the path of runs that a node claims and
// completes at once (no-op handlers): each iteration makes n runs (not
// timed), claims them in one RunsClaim and completes them, in one
// RunTransitionMany when batch is set and one RunTransition each otherwise.
// It reports runs/s (claim and completion) and completions/s (the
// completion alone).
func BenchClaimComplete(b *testing.B, s store.Store, n int, batch bool) {
	ctx := b.Context()
	limits := store.NewJobLimits(map[string]int{"bench": 0})
	at := time.Now()
	var completing time.Duration
	runs := 0
	for b.Loop() {
		b.StopTimer()
		ps := make([]store.RunInsertParams, n)
		for i := range ps {
			ps[i] = store.RunInsertParams{Job: "bench", Trigger: jobs.TriggerManual, Retry: retry3, Node: nodeA, Now: at}
		}
		if _, err := s.RunInsertMany(ctx, ps); err != nil {
			b.Fatalf("RunInsertMany: %v", err)
		}
		b.StartTimer()

		claimed, err := s.RunsClaim(ctx, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: limits, Limit: n, Now: at})
		if err != nil || len(claimed) != n {
			b.Fatalf("RunsClaim: %d runs, %v; want %d", len(claimed), err, n)
		}
		start := time.Now()
		ts := make([]jobs.Transition, n)
		for i, r := range claimed {
			ts[i] = jobs.Complete(fenceOf(r), nodeA, jobs.Result{}, at)
		}
		if batch {
			results, err := s.RunTransitionMany(ctx, ts)
			if err != nil {
				b.Fatalf("RunTransitionMany: %v", err)
			}
			for _, r := range results {
				if r.Err != nil {
					b.Fatalf("RunTransitionMany: %v", r.Err)
				}
			}
		} else {
			for _, t := range ts {
				if _, err := s.RunTransition(ctx, t); err != nil {
					b.Fatalf("RunTransition: %v", err)
				}
			}
		}
		completing += time.Since(start)
		runs += n
		at = at.Add(time.Millisecond)
	}
	b.ReportMetric(float64(runs)/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(runs)/completing.Seconds(), "completions/s")
	b.ReportMetric(0, "ns/op")
}

// BenchFires measures the ticks of many cron jobs due at the same second:
// each iteration fires one tick of each of n jobs (one run each, cursors
// made in the first iteration and advanced after), in ScheduleFireMany calls
// of batch fires, or one ScheduleFire each when batch is 0. It reports
// fires/s and the time to fire all n jobs.
func BenchFires(b *testing.B, s store.Store, n, batch int) {
	ctx := b.Context()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cron-%05d", i)
	}
	tick := time.Now().UTC().Truncate(time.Second)
	var last time.Time
	fires := 0
	for b.Loop() {
		ps := make([]store.FireParams, n)
		for i, job := range names {
			ps[i] = store.FireParams{Job: job, Expect: last, Cursor: tick, Overlap: jobs.OverlapAllow, Node: nodeA,
				Runs: []store.RunInsertParams{{Trigger: jobs.TriggerSchedule, ScheduledAt: tick, Retry: retry3}}}
		}
		if batch == 0 {
			for _, p := range ps {
				if res, err := s.ScheduleFire(ctx, p); err != nil || !res.Advanced {
					b.Fatalf("ScheduleFire: %+v, %v", res, err)
				}
			}
		} else {
			for chunk := range slices.Chunk(ps, batch) {
				results, err := s.ScheduleFireMany(ctx, chunk)
				if err != nil {
					b.Fatalf("ScheduleFireMany: %v", err)
				}
				for _, res := range results {
					if !res.Advanced || len(res.Created) != 1 {
						b.Fatalf("ScheduleFireMany: %+v", res)
					}
				}
			}
		}
		fires += n
		last, tick = tick, tick.Add(time.Second)
	}
	b.ReportMetric(float64(fires)/b.Elapsed().Seconds(), "fires/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(fires/n), "s/all-jobs")
	b.ReportMetric(0, "ns/op")
}
