package dashboard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// The geometry of the history chart of a job's page, in pixels (its
// width is the page's, and each bar's place a percentage of it): the
// durations are bars up from the axis, over chartTop to chartAxis, and
// the start lags bars down from it, to chartHeight. The labels of the
// scales, beside the chart in the page, are placed by app.css at these
// heights.
const (
	chartTop    = 8
	chartAxis   = 118
	chartLag    = 40
	chartHeight = chartAxis + 2 + chartLag
	// chartSlots is the fewest bars the width is divided in, so that a
	// job with few runs gets thin bars on the right, not wide blocks.
	chartSlots = 30
	// minBarPx is the height of the bar of a run that took no time.
	minBarPx = 2
)

// history is the chart of a job's last runs: one bar per run, the oldest
// on the left, as high as the run took (its last attempt, from its start
// to its end or to now), coloured by its outcome, with its start lag (how
// late its last attempt started after it was due, as the metric
// schedulerd_job_start_lag_seconds counts it) below the axis. Every bar is
// a link to its run, with a title that says all of it in words.
type history struct {
	Bars []historyBar
	// MaxDuration and MaxLag are the tops of the two scales.
	MaxDuration, MaxLag time.Duration
	// From and To are when the oldest and the newest run were made.
	From, To time.Time
	// Counts are the runs by outcome, in the order of the legend.
	Counts []outcomeCount
	// Completed is how many completed; P50, P95 and Max their durations
	// (store.PercentileRank), LagP50 and LagMax the start lags of the
	// runs that started.
	Completed     int
	P50, P95, Max time.Duration
	Started       int
	LagP50        time.Duration
	LagMax        time.Duration
	// The geometry, for the template (chartTop and the others).
	Top, Axis, LagTop, Height int
}

// historyBar is one run of the chart.
type historyBar struct {
	Run     *jobs.Run
	Outcome outcome
	// Started: the run has a duration and a lag; otherwise it is a mark
	// on the axis.
	Started       bool
	Duration, Lag time.Duration
	// X and Width place the bars, in percent of the chart's width; Y and
	// Height the duration's bar, in pixels, and LagHeight the lag's,
	// below the axis.
	X, Width  float64
	Y, Height float64
	LagHeight float64
	Title     string
	Failed    bool
}

// outcome is how a run ended, or that it has not: its status, and
// expired apart from cancelled.
type outcome struct {
	Key  string // the class of its bars: st-completed, st-expired, ...
	Text string // its words with their symbol
}

// outcomeOf is the outcome of a run.
func outcomeOf(r *jobs.Run) outcome {
	if r.Status == jobs.StatusCancelled && r.Reason == jobs.ReasonExpired {
		return outcome{"st-expired", "⊘ expired"}
	}
	return outcome{"st-" + strings.ReplaceAll(string(r.Status), "_", "-"), statusText(r.Status)}
}

// outcomeCount is how many runs of the chart had an outcome.
type outcomeCount struct {
	outcome
	N int
}

// legend is the order of the outcomes in the legend and the summary.
var legend = []string{"st-completed", "st-dead-letter", "st-expired", "st-cancelled", "st-retrying", "st-running", "st-pending"}

// newHistory makes the chart of runs, newest first as a listing gives
// them, at now.
func newHistory(runs []*jobs.Run, now time.Time) history {
	h := history{Top: chartTop, Axis: chartAxis, LagTop: chartAxis + 2, Height: chartHeight}
	counts := map[string]*outcomeCount{}
	var durations, lags []time.Duration
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		b := historyBar{Run: r, Outcome: outcomeOf(r),
			Failed: r.Status == jobs.StatusDeadLetter || (r.Status == jobs.StatusCancelled && r.Reason == jobs.ReasonExpired)}
		if !r.StartedAt.IsZero() {
			end := r.FinishedAt
			if end.IsZero() {
				end = now
				if end.Before(r.StartedAt) {
					end = r.StartedAt
				}
			}
			b.Started, b.Duration, b.Lag = true, end.Sub(r.StartedAt), max(r.StartedAt.Sub(r.NotBefore), 0)
			h.MaxDuration, h.MaxLag = max(h.MaxDuration, b.Duration), max(h.MaxLag, b.Lag)
			lags = append(lags, b.Lag)
			if r.Status == jobs.StatusCompleted {
				durations = append(durations, b.Duration)
			}
		}
		if c := counts[b.Outcome.Key]; c != nil {
			c.N++
		} else {
			counts[b.Outcome.Key] = &outcomeCount{b.Outcome, 1}
		}
		b.Title = barTitle(b)
		h.Bars = append(h.Bars, b)
	}
	if len(runs) == 0 {
		return h
	}
	h.From, h.To = runs[len(runs)-1].CreatedAt, runs[0].CreatedAt
	for _, key := range legend {
		if c := counts[key]; c != nil {
			h.Counts = append(h.Counts, *c)
		}
	}
	h.Completed, h.Started = len(durations), len(lags)
	h.P50, h.P95, h.Max = percentile(durations, 50), percentile(durations, 95), percentile(durations, 100)
	h.LagP50, h.LagMax = percentile(lags, 50), percentile(lags, 100)

	slots := max(len(h.Bars), chartSlots)
	slot := 100 / float64(slots)
	first := slots - len(h.Bars) // the bars are on the right
	for i := range h.Bars {
		b := &h.Bars[i]
		b.X, b.Width = float64(first+i)*slot+slot*0.15, slot*0.7
		if !b.Started {
			// A mark on the axis: the run has no duration yet, or never will.
			b.Y, b.Height = chartAxis-4, 4
			continue
		}
		b.Height = minBarPx
		if h.MaxDuration > 0 {
			b.Height = max(float64(chartAxis-chartTop)*float64(b.Duration)/float64(h.MaxDuration), minBarPx)
		}
		b.Y = chartAxis - b.Height
		if h.MaxLag > 0 && b.Lag > 0 {
			b.LagHeight = max(float64(chartLag)*float64(b.Lag)/float64(h.MaxLag), 1)
		}
	}
	return h
}

// Ends are the labels of the chart's two ends: when the oldest and the
// newest run were made, short enough for a phone's width: to the minute
// on two days, to the second on one day, without the date.
func (h history) Ends() [2]string {
	from, to := h.From.UTC(), h.To.UTC()
	if from.Format(time.DateOnly) == to.Format(time.DateOnly) {
		return [2]string{from.Format(time.TimeOnly), to.Format(time.TimeOnly) + " UTC"}
	}
	return [2]string{from.Format("2006-01-02 15:04"), to.Format("2006-01-02 15:04") + " UTC"}
}

// percentile is the p-th percentile of ds by the nearest rank, as the
// stores compute theirs (store.PercentileRank); zero for none.
func percentile(ds []time.Duration, p int64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[store.PercentileRank(int64(len(s)), p)-1]
}

// barTitle is the title of a bar: the run in words, for its tooltip and
// for a screen reader.
func barTitle(b historyBar) string {
	r := b.Run
	parts := []string{fmt.Sprintf("Run %s, made %s: %s", shortID(r.ID), utcText(r.CreatedAt), b.Outcome.Text)}
	switch {
	case b.Started && r.FinishedAt.IsZero():
		parts = append(parts, "running for "+durText(b.Duration)+" so far")
	case b.Started:
		parts = append(parts, "took "+durText(b.Duration))
	case r.Status == jobs.StatusPending || r.Status == jobs.StatusRetrying:
		parts = append(parts, "not started yet")
	default:
		parts = append(parts, "never started")
	}
	if b.Started {
		parts = append(parts, "started "+durText(b.Lag)+" after it was due")
	}
	if r.ExitCode != nil && *r.ExitCode != 0 {
		parts = append(parts, fmt.Sprintf("exit %d", *r.ExitCode))
	}
	return strings.Join(parts, "; ")
}
