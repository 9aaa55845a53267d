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
