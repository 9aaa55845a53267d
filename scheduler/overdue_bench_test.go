package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// BenchmarkCheckOverdue: a pass of the dead man's switch over a node's
// 10,000 jobs with expect_success_within, none near its end (as figure 3
// of BENCHMARKS.md), after something changed (a result came in): what a
// busy node pays at most once a second. An idle node makes no pass until
// a job's window ends or something changes.
func BenchmarkCheckOverdue(b *testing.B) {
	const n = 10_000
	defs := make([]*jobs.Definition, n)
	for i := range defs {
		defs[i] = job(fmt.Sprintf("idle-%06d", i), func(context.Context) error { return nil },
			func(d *jobs.Definition) { d.ExpectSuccessWithin = 48 * time.Hour })
	}
	s, err := New(nil, Config{NodeID: "bench"}, defs)
	if err != nil {
		b.Fatal(err)
	}
	it := &iteration{ctx: b.Context(), now: t0}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Past the check's once a second, and within a day of t0.
		it.now = t0.Add(time.Duration(1+i%86400) * time.Second)
		s.mu.Lock()
		s.overdueChanged = true
		s.mu.Unlock()
		if next := s.checkOverdue(it); next.IsZero() {
			b.Fatal("no next check")
		}
	}
}
