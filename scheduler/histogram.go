package scheduler

import (
	"math"
	"strconv"
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// histogram is a histogram of seconds that a scrape exposes with
// Prometheus le buckets. The metrics library's Histogram counts, in
// buckets of its own: 18 a decade, each including its upper bound, so
// that every power of ten from 1e-8 to 1e17 is the upper bound of one of
// them. The exposition adds the count of each of those to the first le
// bucket whose bound is at least that upper bound, which counts each
// value in the le bucket Prometheus would, provided the le bounds are
// such powers of ten (histFamily.bounds). The library's Histogram keeps
// its sum to itself: the sum is a FloatCounter next to it (a scrape
// during an observation may see it in the one and not yet in the other).
type histogram struct {
	counts metrics.Histogram
	sum    metrics.FloatCounter
}

// observe counts v. Negative values and NaN are ignored, as the library
// ignores them.
func (h *histogram) observe(v float64) {
	if !(v >= 0) {
		return
	}
	h.counts.Update(v)
	h.sum.Add(v)
}

// histFamily is a family of histograms with the same le bounds.
type histFamily struct {
	family
	// bounds are the upper bounds of the le buckets below +Inf, in
	// increasing order, each a power of ten.
	bounds []float64
	// le are the label suffixes of the buckets, +Inf last: `,le="0.1"} `.
	le []string
}

func newHistFamily(f family, bounds ...float64) histFamily {
	if len(bounds) > maxBounds {
		panic("histogram " + f.name + " has more than maxBounds bounds")
	}
	hf := histFamily{family: f, bounds: bounds}
	for _, b := range bounds {
		hf.le = append(hf.le, `,le="`+strconv.FormatFloat(b, 'g', -1, 64)+`"} `)
	}
	hf.le = append(hf.le, `,le="+Inf"} `)
	return hf
}

// maxBounds is the most le bounds a histFamily has.
const maxBounds = 8

// slot returns the index of the le bucket, in bounds and then +Inf, that
// takes the library's bucket vmrange ("<lower>...<upper>", the upper
// bound included; "0...1.000e-09" and "1.000e+18...+Inf" at the ends).
// A range it cannot read goes to +Inf: its values are still counted.
func (hf *histFamily) slot(vmrange string) int {
	_, upper, ok := strings.Cut(vmrange, "...")
	end, err := strconv.ParseFloat(upper, 64)
	if !ok || err != nil {
		return len(hf.bounds)
	}
	for i, b := range hf.bounds {
		if end <= b {
			return i
		}
	}
	return len(hf.bounds)
}

// appendSeries appends the lines of h, whose labels are label (escaped):
// its cumulative le buckets, then _sum and _count.
func (hf *histFamily) appendSeries(b []byte, label string, h *histogram) []byte {
	var counts [maxBounds + 1]uint64
	h.counts.VisitNonZeroBuckets(func(vmrange string, n uint64) {
		counts[hf.slot(vmrange)] += n
	})
	var total uint64
	for i, le := range hf.le {
		total += counts[i]
		b = append(b, hf.name...)
		b = append(b, "_bucket{"...)
		b = append(b, label...)
		b = append(b, le...)
		b = strconv.AppendUint(b, total, 10)
		b = append(b, '\n')
	}
	b = append(b, hf.name...)
	b = append(b, "_sum{"...)
	b = append(b, label...)
	b = append(b, "} "...)
	b = appendFloat(b, h.sum.Get())
	b = append(b, '\n')
	b = append(b, hf.name...)
	b = append(b, "_count{"...)
	b = append(b, label...)
	b = append(b, "} "...)
	b = strconv.AppendUint(b, total, 10)
	return append(b, '\n')
}

// appendFloat appends v as the text format takes it: whole numbers
// without an exponent while they are exact.
func appendFloat(b []byte, v float64) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
