package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// BenchmarkWriteJobMetrics: a scrape of the per-job families of a node
// that declares 100,000 jobs and ran each once (as figure 5 of
// BENCHMARKS.md): each job has the cluster's last success, a completed
// run, and one observation in each histogram.
func BenchmarkWriteJobMetrics(b *testing.B) {
	const n = 100_000
	defs := make([]*jobs.Definition, n)
	for i := range defs {
		defs[i] = job(fmt.Sprintf("ran-%06d", i), func(context.Context) error { return nil })
	}
	s, err := New(nil, Config{NodeID: "bench"}, defs)
	if err != nil {
		b.Fatal(err)
	}
	s.mu.Lock()
	for i, j := range s.declared.all {
		j.succeeded = t0.Add(time.Duration(i) * time.Microsecond).UnixMicro()
		js := s.perJob.of(j.def.Name)
		as := js.attempted()
		as.startLag.observe(0.002)
		as.duration.observe(0.0003)
		js.runEnded(jobs.StatusCompleted)
	}
	s.mu.Unlock()
	w := &byteCounter{}
	b.ReportAllocs()
	for b.Loop() {
		s.WriteJobMetrics(w)
	}
	b.ReportMetric(float64(w.n)/float64(b.N)/(1<<20), "MiB/op")
}

// byteCounter counts the bytes written to it.
type byteCounter struct{ n int64 }

func (w *byteCounter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
