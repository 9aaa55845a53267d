package wallclock

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// stepped is a wall clock that a test steps: the bubble's time moved by an
// offset.
type stepped struct {
	off   atomic.Int64
	steps Steps
}

func (c *stepped) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *stepped) step(d time.Duration) {
	c.off.Add(int64(d))
	c.steps.Notify()
}

func fired(t *Timer) bool {
	select {
	case <-t.C():
		return true
	default:
		return false
	}
}

// TestTimerAtDeadline: a timer fires when its clock reaches the deadline,
// once, and a deadline that has come fires it at once.
func TestTimerAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &stepped{}
		start := c.now()
		tm := NewTimer(c.now, &c.steps, start.Add(time.Minute))
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if fired(tm) {
			t.Fatal("fired before its deadline")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !fired(tm) {
			t.Fatal("did not fire at its deadline")
		}
		if tm.Stop() {
			t.Fatal("Stop of a fired timer reported that it stopped it")
		}
		if n := c.steps.Pending(); n != 0 {
			t.Fatalf("%d timers still pending", n)
		}
		if past := NewTimer(c.now, &c.steps, start); !fired(past) {
			t.Fatal("a timer for a past deadline did not fire at once")
		}
	})
}

// TestTimerFiresOnStep: a step of the clock fires a pending timer at once,
// forward or back, so that its holder looks at the clock again; a stopped
// timer does not fire and leaves nothing behind.
func TestTimerFiresOnStep(t *testing.T) {
	for _, d := range []time.Duration{time.Hour, -time.Hour} {
		synctest.Test(t, func(t *testing.T) {
			c := &stepped{}
			tm := NewTimer(c.now, &c.steps, c.now().Add(10*time.Second))
			stopped := NewTimer(c.now, &c.steps, c.now().Add(10*time.Second))
			if !stopped.Stop() {
				t.Fatal("Stop of a pending timer reported that it had fired")
			}
			time.Sleep(time.Second)
			c.step(d)
			synctest.Wait()
			got, ok := <-tm.C(), true
			if want := c.now(); !got.Equal(want) || !ok {
				t.Fatalf("fired with %s, want the stepped clock's %s", got, want)
			}
			if fired(stopped) {
				t.Fatal("a stopped timer fired on a step")
			}
			if n := c.steps.Pending(); n != 0 {
				t.Fatalf("%d timers still pending", n)
			}
		})
	}
}

// TestStepsRace: timers made, stopped and fired while the clock is stepped
// from other goroutines (run with -race) each fire at most once.
func TestStepsRace(t *testing.T) {
	c := &stepped{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
				c.steps.Notify()
			}
		}
	}()
	for i := range 2000 {
		tm := NewTimer(c.now, &c.steps, c.now().Add(time.Duration(i%3)*time.Microsecond))
		if i%2 == 0 {
			// Stopped, it has fired or it never will: at most one value.
			tm.Stop()
			fired(tm)
		} else {
			<-tm.C() // a step or the deadline fires it
		}
		if fired(tm) {
			t.Fatalf("timer %d fired twice", i)
		}
	}
	close(done)
	wg.Wait()
}
