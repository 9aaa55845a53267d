package scheduler

import (
	"time"

	"github.com/schedulerd/schedulerd/internal/wallclock"
)

// Clock is the engine's source of time.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// TimerAt returns a timer that fires once the clock reaches deadline,
	// at once if it has. The loops wait on absolute deadlines with it: a
	// duration computed from an earlier Now would be late by as much as
	// the clock moved between that Now and the timer's start. It may also
	// fire early, when the clock is stepped: its holder reads the clock
	// again and waits again if the deadline has not come.
	TimerAt(deadline time.Time) Timer
	// AfterFunc calls f in its own goroutine after d, unless stop is
	// called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Timer is a stoppable one-shot timer. It is an alias of an interface
// literal so that a Clock can be written in a package that does not import
// this one: schedulertest.FakeClock, which this package's own tests use.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// TimerAt returns a timer that fires when the wall clock reaches
// deadline, or when the system clock is stepped (wallclock): a Go timer
// alone counts elapsed time, and would wake the loop an hour late for a
// tick the clock was stepped an hour towards.
func (RealClock) TimerAt(deadline time.Time) Timer {
	return wallclock.NewTimer(time.Now, wallclock.System(), deadline)
}

// AfterFunc is time.AfterFunc: no goroutine waits for it.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
