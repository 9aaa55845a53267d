package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// stuckClaim is a store whose RunsClaim blocks while stuck is set: a
// scheduling loop that hangs in the middle of an iteration.
type stuckClaim struct {
	store.Store
	stuck   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *stuckClaim) RunsClaim(ctx context.Context, p store.ClaimParams) ([]*jobs.Run, error) {
	if s.stuck.Load() {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.RunsClaim(ctx, p)
}

// TestWatchdogPingsComeFromTheLoop: OnLoop (the daemon's WATCHDOG=1) runs
// once per loop iteration and never while the loop is stuck, though the
// heartbeat loop goes on: systemd then sees the pings stop.
func TestWatchdogPingsComeFromTheLoop(t *testing.T) {
	var st *stuckClaim
	var pings atomic.Int64
	h := newHarnessWith(t, func(h *harness) {
		h.wrap = func(s store.Store) store.Store {
			st = &stuckClaim{Store: s, entered: make(chan struct{}), release: make(chan struct{})}
			return st
		}
	}, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	h.s.OnLoop = func() { pings.Add(1) } // set after Start for the test; the loop reads it each iteration

	h.loop()
	h.loop()
	if pings.Load() < 2 {
		t.Fatalf("%d pings after two iterations", pings.Load())
	}
	st.stuck.Store(true)
	h.s.Wake()
	<-st.entered // the loop is now stuck inside an iteration
	before := pings.Load()
	for i := 1; i <= 4; i++ {
		h.heartbeatAt(t0.Add(time.Duration(i) * 30 * time.Second)) // other loops go on
	}
	if got := pings.Load(); got != before {
		t.Fatalf("pings went on while the loop was stuck: %d -> %d", before, got)
	}
	st.stuck.Store(false)
	close(st.release)
	h.loop()
	if pings.Load() <= before {
		t.Fatal("pings did not resume with the loop")
	}
}
