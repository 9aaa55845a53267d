// Package wallclock gives timers for instants of the wall clock that keep
// to the wall clock when it is stepped (by an operator, or by NTP at boot):
// a Go timer counts elapsed time, so one set for 03:00 an hour ahead still
// fires an hour later when the clock is stepped an hour on in between.
//
// A Timer fires when the wall clock reaches its deadline, or at once when
// the clock is stepped (Steps.Notify): the holder reads the clock again and
// waits again if its instant has not come, as a reader of a Linux timerfd
// with TFD_TIMER_CANCEL_ON_SET does (systemd's timers wait so). On Linux,
// once WatchSystem is called, System learns of the system clock's steps
// from such a timerfd; elsewhere a step is seen when a timer fires or the
// engine next polls.
package wallclock

import (
	"sync"
	"time"
)

// Steps tells the timers of one clock that it was stepped.
type Steps struct {
	mu     sync.Mutex
	timers map[*Timer]struct{}
}

// Notify fires every pending timer of the clock: it was stepped.
func (s *Steps) Notify() {
	s.mu.Lock()
	ts := make([]*Timer, 0, len(s.timers))
	for t := range s.timers {
		ts = append(ts, t)
	}
	s.mu.Unlock()
	for _, t := range ts {
		t.fire()
	}
}

// Pending returns how many timers wait on the clock.
func (s *Steps) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.timers)
}

func (s *Steps) add(t *Timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timers == nil {
		s.timers = map[*Timer]struct{}{}
	}
	s.timers[t] = struct{}{}
}

func (s *Steps) remove(t *Timer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.timers, t)
}

// Timer fires once, on C, when its clock reaches its deadline or is
// stepped, whichever comes first.
type Timer struct {
	c     chan time.Time
	now   func() time.Time
	steps *Steps
	once  sync.Once
	mu    sync.Mutex
	t     *time.Timer // under mu: set as the timer is made
}

// NewTimer returns a timer for deadline on the clock that now reads and
// steps tells of steps. A deadline that has come fires it at once.
func NewTimer(now func() time.Time, steps *Steps, deadline time.Time) *Timer {
	t := &Timer{c: make(chan time.Time, 1), now: now, steps: steps}
	d := deadline.Sub(now())
	if d <= 0 {
		t.fire()
		return t
	}
	// A step between add and AfterFunc fires the timer once it is made.
	t.mu.Lock()
	defer t.mu.Unlock()
	steps.add(t)
	t.t = time.AfterFunc(d, t.fire)
	return t
}

// C is the channel the timer fires on.
func (t *Timer) C() <-chan time.Time { return t.c }

// Stop keeps the timer from firing; it reports whether it did (false: it
// had fired, or was stopped).
func (t *Timer) Stop() bool {
	stopped := false
	t.once.Do(func() {
		stopped = true
		t.release()
	})
	return stopped
}

func (t *Timer) fire() {
	t.once.Do(func() {
		t.release()
		t.c <- t.now()
	})
}

func (t *Timer) release() {
	t.mu.Lock()
	tt := t.t
	t.mu.Unlock()
	if tt != nil {
		tt.Stop()
		t.steps.remove(t)
	}
}

// System is the system clock's Steps: WatchSystem makes the platform's
// news of steps fire its timers.
func System() *Steps { return &system }

// WatchSystem starts, once per process, watching the system clock for
// steps where the platform tells of them (Linux). The daemon calls it as
// it starts; a library does not, since the watch is a goroutine for the
// life of the process (which a testing/synctest bubble must not start).
func WatchSystem() {
	systemOnce.Do(func() { watchSystem(&system) })
}

var (
	system     Steps
	systemOnce sync.Once
)
