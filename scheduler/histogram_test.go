package scheduler

import (
	"math"
	"strings"
	"testing"
)

// TestHistogramExposition: a histogram's lines, exactly, for the values
// at the edges of its le buckets.
func TestHistogramExposition(t *testing.T) {
	for _, c := range []struct {
		what   string
		family *histFamily
		values []float64
		want   string
	}{
		{"none yet (an attempt claimed, not started)", &startLagFamily, nil, `
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="0.01"} 0
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="0.1"} 0
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="1"} 0
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="10"} 0
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="100"} 0
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="+Inf"} 0
schedulerd_job_start_lag_seconds_sum{job="a\"b"} 0
schedulerd_job_start_lag_seconds_count{job="a\"b"} 0
`},
		{"each bound counts in its own bucket", &startLagFamily, []float64{0.01, 0.1, 1, 10, 100}, `
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="0.01"} 1
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="0.1"} 2
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="1"} 3
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="10"} 4
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="100"} 5
schedulerd_job_start_lag_seconds_bucket{job="a\"b",le="+Inf"} 5
schedulerd_job_start_lag_seconds_sum{job="a\"b"} 111.11
schedulerd_job_start_lag_seconds_count{job="a\"b"} 5
`},
		{"0 in the first, above the last bound in +Inf only, negative and NaN not at all", &durationFamily,
			[]float64{0, 1e-12, 0.05, 10000.5, 3e20, -1, math.NaN()}, `
schedulerd_job_duration_seconds_bucket{job="a\"b",le="0.1"} 3
schedulerd_job_duration_seconds_bucket{job="a\"b",le="1"} 3
schedulerd_job_duration_seconds_bucket{job="a\"b",le="10"} 3
schedulerd_job_duration_seconds_bucket{job="a\"b",le="100"} 3
schedulerd_job_duration_seconds_bucket{job="a\"b",le="1000"} 3
schedulerd_job_duration_seconds_bucket{job="a\"b",le="10000"} 3
schedulerd_job_duration_seconds_bucket{job="a\"b",le="+Inf"} 5
schedulerd_job_duration_seconds_sum{job="a\"b"} 3e+20
schedulerd_job_duration_seconds_count{job="a\"b"} 5
`},
		{"just above a bound in the next bucket; several in one", &durationFamily,
			[]float64{1 + 1.0/1024, 2, 9.5, 10 + 1.0/1024, 0.25}, `
schedulerd_job_duration_seconds_bucket{job="a\"b",le="0.1"} 0
schedulerd_job_duration_seconds_bucket{job="a\"b",le="1"} 1
schedulerd_job_duration_seconds_bucket{job="a\"b",le="10"} 4
schedulerd_job_duration_seconds_bucket{job="a\"b",le="100"} 5
schedulerd_job_duration_seconds_bucket{job="a\"b",le="1000"} 5
schedulerd_job_duration_seconds_bucket{job="a\"b",le="10000"} 5
schedulerd_job_duration_seconds_bucket{job="a\"b",le="+Inf"} 5
schedulerd_job_duration_seconds_sum{job="a\"b"} 22.751953125
schedulerd_job_duration_seconds_count{job="a\"b"} 5
`},
	} {
		var h histogram
		for _, v := range c.values {
			h.observe(v)
		}
		if got := string(c.family.appendSeries(nil, `job="`+escapeLabel(`a"b`)+`"`, &h)); got != c.want[1:] {
			t.Errorf("%s: %v gives\n%swant\n%s", c.what, c.values, got, c.want[1:])
		}
	}
}

// TestHistogramLeBuckets: across the whole range of the metrics
// library's buckets, each value counts in the le bucket that Prometheus
// would count it in (the first whose bound is at least the value), for
// both families: their bounds are bounds of the library's buckets, and
// its bucket ranges read as they should.
func TestHistogramLeBuckets(t *testing.T) {
	var values []float64
	for e := -11.0; e <= 19; e += 1.0 / 54 { // three values in each of the library's buckets
		values = append(values, math.Pow(10, e))
	}
	for _, hf := range []*histFamily{&durationFamily, &startLagFamily} {
		for _, b := range hf.bounds {
			values = append(values, b, math.Nextafter(b, 0), b*(1+1e-9), b*(1-1e-9))
		}
	}
	for _, hf := range []*histFamily{&durationFamily, &startLagFamily} {
		for _, v := range values {
			want := len(hf.bounds)
			for i, b := range hf.bounds {
				if v <= b {
					want = i
					break
				}
			}
			var h histogram
			h.observe(v)
			got := -1
			h.counts.VisitNonZeroBuckets(func(vmrange string, n uint64) { got = hf.slot(vmrange) })
			if got != want {
				t.Errorf("%s: %g counts in le=%q, want le=%q", hf.name, v, leOf(hf, got), leOf(hf, want))
			}
		}
	}
}

// leOf returns the le label of bucket i of hf.
func leOf(hf *histFamily, i int) string {
	if i < 0 || i >= len(hf.le) {
		return "none"
	}
	_, le, _ := strings.Cut(hf.le[i], `le="`)
	return strings.TrimSuffix(le, `"} `)
}
