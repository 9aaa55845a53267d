package control

import (
	"context"
	"sync"
	"time"
)

// healthTTL is how long a health result is served to the requests that
// follow it. The node's health check costs a store query; with the cache
// a flood of health requests costs at most one query per healthTTL on each
// listener, and a store that goes down is reported at most healthTTL after
// the check would see it.
const healthTTL = 250 * time.Millisecond

// healthTimeout bounds one health check run on behalf of many requests.
// The scheduler bounds its store ping far below it.
const healthTimeout = 10 * time.Second

// healthGate shares the engine's health check among requests: the requests
// that come while a check runs wait for it (one in flight at a time), and
// those of the next healthTTL get its result without running another.
type healthGate struct {
	engine Engine

	mu     sync.Mutex
	flight *healthFlight // the check in progress, nil when none
	last   Health
	lastAt time.Time // when last was made; zero before the first check
}

// healthFlight is one check that several requests wait for.
type healthFlight struct {
	done chan struct{}
	h    Health // set before done is closed
}

func newHealthGate(engine Engine) *healthGate { return &healthGate{engine: engine} }

// health returns the node's health: a result younger than healthTTL, or
// that of the check in flight, or of a new one. A request whose ctx ends
// first gets an unhealthy reply saying so; the check goes on for the
// others.
func (g *healthGate) health(ctx context.Context) Health {
	g.mu.Lock()
	if !g.lastAt.IsZero() && time.Since(g.lastAt) < healthTTL {
		h := g.last
		g.mu.Unlock()
		return h
	}
	f := g.flight
	if f == nil {
		f = &healthFlight{done: make(chan struct{})}
		g.flight = f
		go g.check(f)
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.h
	case <-ctx.Done():
		return Health{Problems: []string{"the health check did not finish in time"}}
	}
}

// check runs one health check for flight f. Its context is its own, not
// a request's: the request that started it may go away while others wait.
func (g *healthGate) check(f *healthFlight) {
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	f.h = g.engine.Health(ctx)
	g.mu.Lock()
	g.last, g.lastAt, g.flight = f.h, time.Now(), nil
	g.mu.Unlock()
	close(f.done)
}
