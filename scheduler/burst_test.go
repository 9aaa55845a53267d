package scheduler

import (
	"context"
	"fmt"
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
	wrote   chan struct{} // receives at each RunTransitions
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

func (s *heldBurst) ScheduleFires(ctx context.Context, ps []store.FireParams) ([]*store.FireResult, error) {
	if s.note("fire") == 2 {
		s.held <- struct{}{}
		<-s.release
	}
	return s.Store.ScheduleFires(ctx, ps)
}

func (s *heldBurst) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	s.note("claim")
	return s.Store.RunsClaim(ctx, p)
}

func (s *heldBurst) RunTransitions(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	s.note("results")
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.Store.RunTransitions(ctx, ts)
}

func (s *heldBurst) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// burstHarness starts n cron jobs that all fire every minute, on a store
// that holds the burst's second fire transaction.
func burstHarness(t *testing.T, n, concurrency int) (*harness, *heldBurst) {
	var st *heldBurst
	h := newHarnessWith(t, func(h *harness) {
		h.cfg.Concurrency = concurrency
		h.wrap = func(s store.Store) store.Store {
			st = &heldBurst{Store: s, held: make(chan struct{}), release: make(chan struct{}), wrote: make(chan struct{}, 1)}
			return st
		}
	}, func(h *harness) []*jobs.Definition {
		defs := make([]*jobs.Definition, n)
		for i := range defs {
			defs[i] = job(fmt.Sprintf("cron-%04d", i), h.succeed, func(d *jobs.Definition) {
				d.Schedule = mustSchedule(t, "* * * * *")
			})
		}
		return defs
	})
	st.armed.Store(true)
	t.Cleanup(st.releaseFires) // before the harness stops, should the test fail
	return h, st
}

// TestBurstStartsItsRunsBeforeResultsAreWritten: while the ticks of a burst
// (more than one fire transaction of them) are fired, the results of the
// attempts it has started already wait: the fires and claims that start
// the rest of the burst are not queued behind them. They are written once
// the burst's runs are claimed.
func TestBurstStartsItsRunsBeforeResultsAreWritten(t *testing.T) {
	n := fireBatch + 100
	h, st := burstHarness(t, n, 2*n)
	tick := t0.Add(time.Minute)
	h.clock.Set(tick)
	h.s.Wake()
	<-st.held
	// The first fire's runs are claimed and ended; their results wait.
	h.handled(fireBatch)
	deadline := time.Now().Add(10 * time.Second)
	for h.s.finishing.Load() < fireBatch {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d attempts ended with their results unwritten", h.s.finishing.Load(), fireBatch)
		}
		select {
		case <-st.wrote:
			t.Fatal("results written while the burst's second fire waits")
		case <-time.After(time.Millisecond):
		}
	}
	st.releaseFires()
	h.handled(n - fireBatch)
	h.attemptsDone(n)

	// The burst: fire, claim, fire (held), and the claim after it; no
	// result written before that last claim.
	calls := st.calls()
	second, last := -1, -1
	fires := 0
	for i, c := range calls {
		if c == "fire" {
			if fires++; fires == 2 {
				second = i
			}
		}
		if c == "claim" && second >= 0 && last < 0 {
			last = i
		}
	}
	if second < 2 || calls[second-1] != "claim" || calls[second-2] != "fire" || last < 0 {
		t.Fatalf("store calls %v: want fire, claim, fire, claim for the burst", calls)
	}
	for i, c := range calls[:last] {
		if c == "results" {
			t.Fatalf("store call %d of %v writes results before the burst's last claim (call %d)", i, calls, last)
		}
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
	h, st := burstHarness(t, n, concurrency)
	h.clock.Set(t0.Add(time.Minute))
	h.s.Wake()
	<-st.held
	h.handled(concurrency)
	select {
	case <-st.wrote:
	case <-time.After(10 * time.Second):
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
