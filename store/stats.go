package store

import (
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// RunStatsFilter selects the runs that RunsStats summarises: of Job (all
// jobs when ""), made at Since or later and before Until (zero: no bound),
// as RunFilter's fields do.
type RunStatsFilter struct {
	Job          string
	Since, Until time.Time
}

// RunStats summarises runs: how many ended how, and how long the completed
// ones took.
type RunStats struct {
	// Counts are the runs by status, every status present (zero
	// included); Expired are those of the cancelled ones that did not
	// start by their not_after (reason expired).
	Counts  map[jobs.Status]int64
	Expired int64
	// P50, P95 and Max are the durations of the completed runs, each from
	// the start of its last attempt to its end: the 50th and the 95th
	// percentile (the nearest rank: the shortest duration that at least
	// that share of them do not exceed) and the longest. Zero when no run
	// completed.
	P50, P95, Max time.Duration
}

// Total is how many runs there are.
func (s *RunStats) Total() int64 {
	var n int64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Failed is how many runs failed: dead_letter, or expired (as on_failure
// and the notifiers count them). A run cancelled by a user did not fail.
func (s *RunStats) Failed() int64 { return s.Counts[jobs.StatusDeadLetter] + s.Expired }

// SuccessRatio is the share of the runs that succeeded or failed which
// succeeded: completed / (completed + Failed), from 0 to 1; ok is false
// when no run did either.
func (s *RunStats) SuccessRatio() (ratio float64, ok bool) {
	done := s.Counts[jobs.StatusCompleted] + s.Failed()
	if done == 0 {
		return 0, false
	}
	return float64(s.Counts[jobs.StatusCompleted]) / float64(done), true
}

// PercentileRank is the rank, from 1, of the p-th percentile (0 < p <= 100)
// of n sorted values by the nearest-rank method: ceil(p*n/100). Both
// stores compute their percentiles with it, or as it does.
func PercentileRank(n int64, p int64) int64 { return (n*p + 99) / 100 }
