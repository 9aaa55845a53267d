package schedulertest

import (
	"testing"
	"time"
)

func TestFakeClockAfterFunc(t *testing.T) {
	c := NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	called := make(chan string, 2)
	c.AfterFunc(time.Minute, func() { called <- "first" })
	stop := c.AfterFunc(2*time.Minute, func() { called <- "stopped" })

	c.Advance(59 * time.Second)
	select {
	case s := <-called:
		t.Fatalf("%s called before its time", s)
	default:
	}
	c.Advance(time.Second)
	if s := <-called; s != "first" {
		t.Fatalf("called %s, want first", s)
	}
	if !stop() {
		t.Fatal("stop of a pending call reported false")
	}
	if stop() {
		t.Fatal("second stop reported true")
	}
	c.Advance(time.Hour)
	if _, ok := c.NextTimer(); ok {
		t.Fatal("a stopped call left a timer")
	}
	select {
	case s := <-called:
		t.Fatalf("%s called after stop", s)
	default:
	}
}

// TestTimerAtIsAbsolute: a timer for a deadline fires when the clock
// reaches it, however far the clock moved before the timer was made;
// one made for a deadline already passed fires at once.
func TestTimerAtIsAbsolute(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFakeClock(t0)
	deadline := t0.Add(30 * time.Second)
	c.Set(t0.Add(10 * time.Second)) // the clock moves before the timer is made
	tm := c.TimerAt(deadline)
	c.Set(deadline.Add(-time.Nanosecond))
	select {
	case <-tm.C():
		t.Fatal("fired before its deadline")
	default:
	}
	c.Set(deadline)
	select {
	case at := <-tm.C():
		if !at.Equal(deadline) {
			t.Fatalf("fired with %v, want %v", at, deadline)
		}
	default:
		t.Fatal("did not fire at its deadline")
	}
	late := c.TimerAt(deadline.Add(-time.Second))
	select {
	case <-late.C():
	default:
		t.Fatal("a timer for a passed deadline did not fire at once")
	}
	if late.Stop() {
		t.Fatal("Stop of a fired timer reported that it stopped it")
	}
}
