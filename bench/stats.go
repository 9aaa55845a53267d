package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// durations summarizes a sample of durations.
type durations []time.Duration

// quantile returns the q-quantile (0 <= q <= 1) by the nearest-rank method;
// zero for an empty sample. The sample is sorted in place.
func (d durations) quantile(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// max returns the largest value; zero for an empty sample.
func (d durations) max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

// summary is "n=..., p50=..., p99=..., max=...".
func (d durations) summary() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(d), ms(d.quantile(0.5)), ms(d.quantile(0.9)),
		ms(d.quantile(0.99)), ms(d.max()))
}

// msf is a duration in milliseconds as a float, for figures.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate is n per second over d.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// median is the middle value of vs (the mean of the two middle ones for
// an even count).
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
