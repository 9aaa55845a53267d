package scheduler

import (
	"math"
	"strconv"
	"sync/atomic"
)

// histogram is a histogram of seconds that a scrape exposes with
// Prometheus le buckets: a count per bucket of its family's bounds (a
// value counts in the first whose bound is at least the value, +Inf
// last), and the sum. It is 88 bytes, made whole when a job's first
// attempt is claimed: a node that runs 100,000 jobs holds two per job.
// (The metrics library's Histogram, used before, counts in buckets of its
// own, 18 a decade, and allocates an array per decade of values it sees:
// several times the memory per job.) Counts and sum are atomic; a scrape
// during an observation may see the one and not yet the other.
type histogram struct {
	hf     *histFamily
	counts [maxBounds + 1]atomic.Uint64
	sum    atomic.Uint64 // float64 bits
}

// observe counts v. Negative values and NaN are ignored.
func (h *histogram) observe(v float64) {
	if !(v >= 0) {
		return
	}
	h.counts[h.hf.slot(v)].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// histFamily is a family of histograms with the same le bounds.
type histFamily struct {
	family
	// bounds are the upper bounds of the le buckets below +Inf, in
	// increasing order.
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
// counts v: the first whose bound is at least v.
func (hf *histFamily) slot(v float64) int {
	for i, b := range hf.bounds {
		if v <= b {
			return i
		}
	}
	return len(hf.bounds)
}

// appendSeries appends the lines of h, whose labels are label (escaped):
// its cumulative le buckets, then _sum and _count.
func (hf *histFamily) appendSeries(b []byte, label string, h *histogram) []byte {
	var total uint64
	for i, le := range hf.le {
		total += h.counts[i].Load()
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
	b = appendFloat(b, math.Float64frombits(h.sum.Load()))
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
