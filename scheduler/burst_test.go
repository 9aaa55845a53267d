package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// heldBurst is a store that, once armed, holds the second fire
// transaction of a burst until released, and logs the order of fires,
// claims and result writes.
type heldBurst struct {
	store.Store
	armed   atomic.Bool
	mu      sync.Mutex
	log     []string
	fires   int
	held    chan struct{} // receives when the second fire waits
	release chan struct{}
	once    sync.Once
	wrote   chan struct{} // receives at each RunTransitionMany
}

func (s *heldBurst) releaseFires() { s.once.Do(func() { close(s.release) }) }

func (s *heldBurst) note(what string) int {
	if !s.armed.Load() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, what)
	if what == "fire" {
		s.fires++
	}
	return s.fires
}

func (s *heldBurst) ScheduleFireMany(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	if s.note("fire") == 2 {
		s.held <- struct{}{}
		<-s.release
	}
	return s.Store.ScheduleFireMany(ctx, ps)
}

func (s *heldBurst) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	s.note("claim")
	return s.Store.RunsClaim(ctx, p)
}

func (s *heldBurst) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	s.note("results")
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.Store.RunTransitionMany(ctx, ts)
}

func (s *heldBurst) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// concurrentWriter is a store that says its writes run side by side: the
// engine claims a burst's runs while it fires the next part.
type concurrentWriter struct{ *heldBurst }

func (concurrentWriter) ConcurrentWrites() {}

// burstJobs declares n cron jobs that all fire every minute.
func burstJobs(t *testing.T, n int) func(h *harness) []*jobs.Definition {
	return func(h *harness) []*jobs.Definition {
		defs := make([]*jobs.Definition, n)
		for i := range defs {
			defs[i] = job(fmt.Sprintf("cron-%04d", i), h.succeed, func(d *jobs.Definition) {
				d.Schedule = mustSchedule(t, "* * * * *")
			})
		}
		return defs
	}
}

// burstHarness starts n cron jobs that all fire every minute, on a store
// that holds the burst's second fire transaction.
func burstHarness(t *testing.T, n, concurrency int, concurrent bool) (*harness, *heldBurst) {
	var st *heldBurst
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = concurrency
		h.wrap = func(s store.Store) store.Store {
			st = &heldBurst{Store: s, held: make(chan struct{}), release: make(chan struct{}), wrote: make(chan struct{}, 1)}
			if concurrent {
				return concurrentWriter{st}
			}
			return st
		}
	}, burstJobs(t, n))
	st.armed.Store(true)
	t.Cleanup(st.releaseFires) // before the harness stops, should the test fail
	return h, st
}

// TestBurstStartsItsRunsBeforeResultsAreWritten: a round of more than
// splitRound due jobs is fired in more than one transaction, the first
// one's runs claimed before the next is fired. While the rest is fired, the
// results of the attempts started already wait: the fires and claims that
// start the rest of the round are not queued behind them. They are written
// once the round's runs are claimed. A round just over splitRound is fired
// in two halves; a burst of more than fireBatch in transactions of
// fireBatch. On a store whose writes run side by side, each claim runs
// while the next part is fired.
func TestBurstStartsItsRunsBeforeResultsAreWritten(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		for _, n := range []int{splitRound + 8, 2*fireBatch + 100} {
			t.Run(fmt.Sprintf("n=%d,concurrent=%v", n, concurrent), func(t *testing.T) { testBurstStartsItsRuns(t, n, concurrent) })
		}
	}
}

func testBurstStartsItsRuns(t *testing.T, n int, concurrent bool) {
	first := fireSize(n)
	if first >= n {
		t.Fatalf("a round of %d is fired in one transaction", n)
	}
	parts := (n + first - 1) / first
	h, st := burstHarness(t, n, 2*n, concurrent)
	tick := t0.Add(time.Minute)
	h.clock.Set(tick)
	h.s.Wake()
	<-st.held
	// The first fire's runs are claimed and ended; their results wait.
	h.handled(first)
	deadline := time.Now().Add(signalWait)
	for h.s.attempts.finishing.Load() < int64(first) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d attempts ended with their results unwritten", h.s.attempts.finishing.Load(), first)
		}
		select {
		case <-st.wrote:
			t.Fatal("results written while the burst's second fire waits")
		case <-time.After(time.Millisecond):
		}
	}
	st.releaseFires()
	h.handled(n - first)
	h.attemptsDone(n)

	// The burst: each part fired, then claimed (while the next is fired,
	// when concurrent); no result written before the last claim.
	calls := st.calls()
	before := calls
	if i := slices.Index(calls, "results"); i >= 0 {
		before = calls[:i]
	}
	fires, claims := 0, 0
	for i, c := range before {
		switch c {
		case "fire":
			fires++
		case "claim":
			claims++
		}
		if !concurrent && i < 2*parts && c != [2]string{"fire", "claim"}[i%2] {
			t.Fatalf("store call %d of %v is %s: want fire and claim in turn for the burst's %d parts", i, calls, c, parts)
		}
	}
	if len(before) == 0 || before[0] != "fire" || fires != parts || claims < parts {
		t.Fatalf("store calls %v: want the burst's %d parts fired and claimed before results are written", calls, parts)
	}
	for _, r := range h.runs("") {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 || !r.ScheduledAt.Equal(tick) {
			t.Errorf("run %s of %s at %s is %s at attempt %d, want completed at 1", r.ID, r.Job, r.ScheduledAt, r.Status, r.Attempt)
		}
	}
}

// TestBurstWritesResultsThatHoldClaimsBack: with few slots, the results of
// a burst's first runs are written while the burst is still being fired:
// unwritten results (concurrency of them) would hold the next claims back.
func TestBurstWritesResultsThatHoldClaimsBack(t *testing.T) {
	const concurrency = 4
	n := fireBatch + 100
	h, st := burstHarness(t, n, concurrency, false)
	h.clock.Set(t0.Add(time.Minute))
	h.s.Wake()
	<-st.held
	h.handled(concurrency)
	select {
	case <-st.wrote:
	case <-time.After(signalWait):
		t.Fatal("the results of the first attempts were not written while the burst was held")
	}
	st.releaseFires()
	// Every tick of the burst runs in the end, concurrency at a time.
	h.handled(n - concurrency)
	h.attemptsDone(n)
	for _, r := range h.runs("") {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Errorf("run %s of %s is %s at attempt %d, want completed at 1", r.ID, r.Job, r.Status, r.Attempt)
		}
	}
}

// claimHeldStore holds the first claim of a burst until the burst's
// second fire has begun, or gives up after a while.
type claimHeldStore struct {
	store.Store
	armed         atomic.Bool
	fires, claims atomic.Int32
	secondFire    chan struct{}
	overlapped    chan bool // receives once: whether the second fire began during the first claim
}

func (s *claimHeldStore) ConcurrentWrites() {}

func (s *claimHeldStore) ScheduleFireMany(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	if s.armed.Load() && s.fires.Add(1) == 2 {
		close(s.secondFire)
	}
	return s.Store.ScheduleFireMany(ctx, ps)
}

func (s *claimHeldStore) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if s.armed.Load() && s.claims.Add(1) == 1 {
		select {
		case <-s.secondFire:
			s.overlapped <- true
		case <-time.After(2 * time.Second):
			s.overlapped <- false
		}
	}
	return s.Store.RunsClaim(ctx, p)
}

// TestBurstClaimsWhileFiringOnConcurrentStore: on a store whose writes run
// side by side, the claim of a burst's first part runs while the second
// part is fired; every run of the burst then runs once.
func TestBurstClaimsWhileFiringOnConcurrentStore(t *testing.T) {
	n := splitRound + 8
	var st *claimHeldStore
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = 2 * n
		h.wrap = func(s store.Store) store.Store {
			st = &claimHeldStore{Store: s, secondFire: make(chan struct{}), overlapped: make(chan bool, 1)}
			return st
		}
	}, burstJobs(t, n))
	st.armed.Store(true)
	h.clock.Set(t0.Add(time.Minute))
	h.s.Wake()
	if !<-st.overlapped {
		t.Fatal("the second fire of the burst did not begin while the first claim was held")
	}
	h.handled(n)
	h.attemptsDone(n)
	for _, r := range h.runs("") {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Errorf("run %s of %s is %s at attempt %d, want completed at 1", r.ID, r.Job, r.Status, r.Attempt)
		}
	}
}
