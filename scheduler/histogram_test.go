package scheduler

import (
	"math"
	"strings"
	"sync"
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
		h := histogram{hf: c.family}
		for _, v := range c.values {
			h.observe(v)
		}
		if got := string(c.family.appendSeries(nil, `job="`+escapeLabel(`a"b`)+`"`, &h)); got != c.want[1:] {
			t.Errorf("%s: %v gives\n%swant\n%s", c.what, c.values, got, c.want[1:])
		}
	}
}

// TestHistogramLeBuckets: across a range far wider than the bounds, and
// at each bound and the values next to it, each value counts in the le
// bucket that Prometheus would count it in (the first whose bound is at
// least the value), for both families.
func TestHistogramLeBuckets(t *testing.T) {
	var values []float64
	for e := -11.0; e <= 19; e += 1.0 / 54 {
		values = append(values, math.Pow(10, e))
	}
	for _, hf := range []*histFamily{&durationFamily, &startLagFamily} {
		for _, b := range hf.bounds {
			values = append(values, b, math.Nextafter(b, 0), math.Nextafter(b, math.Inf(1)), b*(1+1e-9), b*(1-1e-9))
		}
	}
	for _, hf := range []*histFamily{&durationFamily, &startLagFamily} {
		for _, v := range values {
			want := len(hf.bounds)
			for i := len(hf.bounds) - 1; i >= 0 && v <= hf.bounds[i]; i-- {
				want = i
			}
			h := histogram{hf: hf}
			h.observe(v)
			got := -1
			for i := range hf.le {
				if h.counts[i].Load() > 0 {
					got = i
				}
			}
			if got != want {
				t.Errorf("%s: %g counts in le=%q, want le=%q", hf.name, v, leOf(hf, got), leOf(hf, want))
			}
		}
	}
}

// TestHistogramConcurrentObservations: observations from many goroutines
// at once are all counted, and the sum holds every value (each a binary
// fraction, so that the sum is exact in any order).
func TestHistogramConcurrentObservations(t *testing.T) {
	h := histogram{hf: &durationFamily}
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				h.observe(float64((w+i)%4) * 0.25) // 0, 0.25, 0.5, 0.75
			}
		})
	}
	wg.Wait()
	got := string(durationFamily.appendSeries(nil, `job="j"`, &h))
	for _, want := range []string{
		`schedulerd_job_duration_seconds_bucket{job="j",le="0.1"} 4000` + "\n",
		`schedulerd_job_duration_seconds_bucket{job="j",le="1"} 16000` + "\n",
		`schedulerd_job_duration_seconds_sum{job="j"} 6000` + "\n",
		`schedulerd_job_duration_seconds_count{job="j"} 16000` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
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
