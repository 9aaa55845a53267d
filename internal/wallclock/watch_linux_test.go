package wallclock

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSystemStep: the system clock's Steps fire a timer when the clock is
// set. The test sets the clock to the time it reads (off by the time of
// the call, under a microsecond): the kernel cancels the watcher's timerfd
// on any set. Setting the clock needs CAP_SYS_TIME; without it the test
// says so and skips.
func TestSystemStep(t *testing.T) {
	WatchSystem()
	steps := System()
	tm := NewTimer(time.Now, steps, time.Now().Add(time.Hour))
	defer tm.Stop()
	t0 := time.Now()
	ts := unix.NsecToTimespec(t0.Add(time.Since(t0)).UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skip("setting the clock needs CAP_SYS_TIME, which this process lacks")
		}
		t.Fatalf("clock_settime: %v", err)
	}
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a set of the system clock did not fire a pending timer")
	}
}
