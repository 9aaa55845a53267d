package schedulertest

import (
	"sort"
	"sync"
	"time"
)

// Timer is scheduler.Timer: an alias of the same interface literal, so
// that FakeClock implements scheduler.Clock without importing the package
// (whose own tests use it).
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
}

// FakeClock is a Clock that moves only when told to. Timers fire when
// Advance or Set moves the time past their deadline.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// added is signalled whenever a timer is created, so tests can wait for
	// a loop to go to sleep before they advance the clock.
	added chan struct{}
}

// NewFakeClock returns a FakeClock set to now.
func NewFakeClock(now time.Time) *FakeClock {
	return &FakeClock{now: now, added: make(chan struct{}, 1024)}
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// TimerAdded fires each time a timer is created.
func (c *FakeClock) TimerAdded() <-chan struct{} { return c.added }

// NewTimer returns a timer on the fake time.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAt(c.now.Add(d))
}

// TimerAt returns a timer that fires once the fake time reaches deadline.
func (c *FakeClock) TimerAt(deadline time.Time) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAt(deadline)
}

// timerAt makes a timer for at; c.mu is held.
func (c *FakeClock) timerAt(at time.Time) Timer {
	t := &fakeTimer{c: c, at: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.fired = true
		t.ch <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	select {
	case c.added <- struct{}{}:
	default:
	}
	return t
}

// AfterFunc calls f in its own goroutine once Advance or Set moves the
// time past d from now.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	t := c.NewTimer(d).(*fakeTimer)
	done := make(chan struct{})
	go func() {
		select {
		case <-t.ch:
			f()
		case <-done:
		}
	}()
	return func() bool {
		stopped := t.Stop()
		if stopped {
			close(done)
		}
		return stopped
	}
}

// Advance moves the time forward by d.
func (c *FakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the time to t (never backwards) and fires the due timers.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(c.now) {
			tm.fired = true
			tm.ch <- c.now
		} else {
			keep = append(keep, tm)
		}
	}
	c.timers = keep
	c.mu.Unlock()
}

// NextTimer returns the deadline of the earliest pending timer.
func (c *FakeClock) NextTimer() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best time.Time
	for _, t := range c.timers {
		if best.IsZero() || t.at.Before(best) {
			best = t.at
		}
	}
	return best, !best.IsZero()
}

// HasTimerAt reports whether a pending timer is due at t.
func (c *FakeClock) HasTimerAt(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tm := range c.timers {
		if tm.at.Equal(t) {
			return true
		}
	}
	return false
}

type fakeTimer struct {
	c     *FakeClock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
