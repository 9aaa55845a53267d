package store

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// JobResult is when a job's runs last ended well and badly, by the time
// the run finished, on any node. The store keeps it for each job whose run
// ever ended so (RunsPrune does not remove it), written in the transaction
// that ends the run.
type JobResult struct {
	Job string
	// LastSuccess is when the newest run that completed finished; zero if
	// none did.
	LastSuccess time.Time
	// LastFailure is when the newest run that ended dead_letter (failed
	// after its last attempt) finished; zero if none did.
	LastFailure time.Time
}

// Merge takes into r the newer of each of its times and o's.
func (r *JobResult) Merge(o JobResult) {
	if o.LastSuccess.After(r.LastSuccess) {
		r.LastSuccess = o.LastSuccess
	}
	if o.LastFailure.After(r.LastFailure) {
		r.LastFailure = o.LastFailure
	}
}

// ResultsOf returns the results that runs, as a batch of transitions left
// them, give their jobs: one per job that has a run completed or ended
// dead_letter, with the newest finish times, in the order of the job
// names (the order in which a store locks their rows, so that two batches
// never wait for each other's rows in turn).
func ResultsOf(runs []*jobs.Run) []JobResult {
	var out []JobResult
	for _, r := range runs {
		var res JobResult
		switch {
		case r == nil:
			continue
		case r.Status == jobs.StatusCompleted:
			res = JobResult{Job: r.Job, LastSuccess: r.FinishedAt}
		case r.Status == jobs.StatusDeadLetter:
			res = JobResult{Job: r.Job, LastFailure: r.FinishedAt}
		default:
			continue
		}
		if i := slices.IndexFunc(out, func(o JobResult) bool { return o.Job == r.Job }); i >= 0 {
			out[i].Merge(res)
		} else {
			out = append(out, res)
		}
	}
	slices.SortFunc(out, func(a, b JobResult) int { return strings.Compare(a.Job, b.Job) })
	return out
}

// ResultFeed carries to the engine of a node the results of runs that end
// anywhere in the cluster, as the store learns of them: from its own
// commits (SQLite, whose one process is the cluster), or from the
// notifications that every node's commits send (PostgreSQL). A node then
// knows every job's last success without asking the store, and an idle
// cluster sends nothing. The store publishes; the engine waits on Changed
// and takes what came. Results are merged by job as they wait, so a feed
// holds at most one entry per job, however long nobody takes them.
type ResultFeed struct {
	mu      sync.Mutex
	pending map[string]JobResult
	missed  bool
	changed chan struct{}
}

// NewResultFeed returns an empty feed.
func NewResultFeed() *ResultFeed {
	return &ResultFeed{pending: map[string]JobResult{}, changed: make(chan struct{}, 1)}
}

// Publish adds results that the store committed.
func (f *ResultFeed) Publish(rs []JobResult) {
	if len(rs) == 0 {
		return
	}
	f.mu.Lock()
	for _, r := range rs {
		cur := f.pending[r.Job]
		cur.Job = r.Job
		cur.Merge(r)
		f.pending[r.Job] = cur
	}
	f.mu.Unlock()
	f.signal()
}

// Lost says that results may have been committed that the feed did not
// see (a listener that was not connected): the next Take reports missed,
// and the engine reads the results of its jobs again.
func (f *ResultFeed) Lost() {
	f.mu.Lock()
	f.missed = true
	f.mu.Unlock()
	f.signal()
}

func (f *ResultFeed) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// Changed receives a value, coalesced, after Publish or Lost.
func (f *ResultFeed) Changed() <-chan struct{} { return f.changed }

// Take returns the results published since the last Take, and whether
// some may have been missed since then (see Lost).
func (f *ResultFeed) Take() (rs []JobResult, missed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) > 0 {
		rs = make([]JobResult, 0, len(f.pending))
		for _, r := range f.pending {
			rs = append(rs, r)
		}
		clear(f.pending)
	}
	missed, f.missed = f.missed, false
	return rs, missed
}
