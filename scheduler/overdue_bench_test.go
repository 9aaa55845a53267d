package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// BenchmarkCheckOverdueAtRest: the dead man's switch of a node that
// declares 10,000 jobs with expect_success_within, none near its end (as
// figure 3 of BENCHMARKS.md): what every iteration of an idle loop pays.
func BenchmarkCheckOverdueAtRest(b *testing.B) {
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
	for b.Loop() {
		it.now = it.now.Add(time.Second) // past the check's once a second
		if next := s.checkOverdue(it); next.IsZero() {
			b.Fatal("no next check")
		}
	}
}
