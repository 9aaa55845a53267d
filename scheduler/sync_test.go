package scheduler

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// startReads is a store that records what the reads of a start ask for:
// how many jobs each read of cursors or results names at most, and how
// often each job is named.
type startReads struct {
	store.Store
	mu               sync.Mutex
	most             int
	cursors, results map[string]int
}

func newStartReads(st store.Store) *startReads {
	return &startReads{Store: st, cursors: map[string]int{}, results: map[string]int{}}
}

func (s *startReads) note(named map[string]int, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.most = max(s.most, len(names))
	for _, n := range names {
		named[n]++
	}
}

func (s *startReads) ScheduleCursors(ctx context.Context, names []string) (map[string]*store.Cursor, error) {
	s.note(s.cursors, names)
	return s.Store.ScheduleCursors(ctx, names)
}

func (s *startReads) JobsResults(ctx context.Context, names []string) (map[string]store.JobResult, error) {
	s.note(s.results, names)
	return s.Store.JobsResults(ctx, names)
}

// TestStartReadsInBatches: a start reads the cursors and the results of
// its jobs syncBatch jobs at a time, never all at once, and every job
// gets what the store holds: the cursors made at the first start, one
// paused since, a result written while the node was down.
func TestStartReadsInBatches(t *testing.T) {
	n := 2*syncBatch + 7
	daily := func(h *harness) []*jobs.Definition {
		defs := make([]*jobs.Definition, n)
		for i := range defs {
			defs[i] = job(fmt.Sprintf("job-%05d", i), h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "0 13 * * *") })
		}
		return defs
	}
	var reads *startReads
	wrap := func(st store.Store) store.Store {
		reads = newStartReads(st)
		return reads
	}
	check := func(what string) {
		t.Helper()
		if reads.most > syncBatch || len(reads.cursors) != n || len(reads.results) != n {
			t.Fatalf("%s: a read named up to %d jobs (want at most %d); cursors of %d jobs read, results of %d (want %d)",
				what, reads.most, syncBatch, len(reads.cursors), len(reads.results), n)
		}
	}
	h := newHarnessWith(t, func(h *harness) { h.wrap = wrap }, daily)
	check("first start")
	for _, d := range h.s.Jobs() {
		if got := h.s.NextFire(d.Name); !got.Equal(t0.Add(time.Hour)) {
			t.Fatalf("first start: %s fires next at %v, want 13:00", d.Name, got)
		}
	}
	paused, succeeded := "job-00003", fmt.Sprintf("job-%05d", n-2)
	if _, err := h.s.Pause(context.Background(), paused, ""); err != nil {
		t.Fatal(err)
	}
	h.stop()

	// A run of another node ended while this one was down.
	done := t0.Add(-time.Hour)
	db, err := sql.Open("sqlite", "file:"+h.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO job_results (job, last_success_at) VALUES (?, ?)`, succeeded, done.UnixMicro())
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	h.start(daily(h))
	check("restart")
	for _, d := range h.s.Jobs() {
		want := t0.Add(time.Hour)
		if d.Name == paused {
			want = time.Time{}
		}
		if got := h.s.NextFire(d.Name); !got.Equal(want) {
			t.Errorf("restart: %s fires next at %v, want %v", d.Name, got, want)
		}
	}
	if got := h.s.lastSuccess(succeeded); !got.Equal(done) {
		t.Errorf("restart: last success of %s %v, want %v", succeeded, got, done)
	}
}

// TestJobSetChecksInDeclarationOrder: the first problem in declaration
// order is the one reported, a job declared twice at its second
// declaration; and a valid set finds each job by name, with its limit.
func TestJobSetChecksInDeclarationOrder(t *testing.T) {
	ok := func(name string, mod ...func(*jobs.Definition)) *jobs.Definition {
		return job(name, func(context.Context) error { return nil }, mod...)
	}
	bad := func(name string) *jobs.Definition {
		return ok(name, func(d *jobs.Definition) { d.MaxConcurrency = -1 })
	}
	for _, c := range []struct {
		name string
		defs []*jobs.Definition
		want string
	}{
		{"twice", []*jobs.Definition{ok("b"), ok("a"), ok("c"), ok("a"), ok("b")}, `job "a": declared twice`},
		{"invalid before twice", []*jobs.Definition{ok("a"), bad("z"), ok("a")}, `job "z": max_concurrency: must not be negative`},
		{"twice before invalid", []*jobs.Definition{ok("a"), ok("a"), bad("z")}, `job "a": declared twice`},
		{"invalid second", []*jobs.Definition{ok("a"), bad("a")}, `job "a": max_concurrency: must not be negative`},
	} {
		if _, err := newJobSet(c.defs); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	set, err := newJobSet([]*jobs.Definition{ok("b"), ok("c", func(d *jobs.Definition) { d.MaxConcurrency = 3; d.Overlap = jobs.OverlapAllow }), ok("a")})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"b", "c", "a"} {
		if j := set.job(name); j != set.all[i] {
			t.Errorf("job(%q) = %v, want the state of declaration %d", name, j, i)
		}
	}
	if set.job("d") != nil || set.limits.Len() != 3 {
		t.Errorf("job(d) = %v; %d limits", set.job("d"), set.limits.Len())
	}
	if limit, ok := set.limits.Limit("c"); limit != 3 || !ok {
		t.Errorf("limit of c: %d, %v", limit, ok)
	}
}
