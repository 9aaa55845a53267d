package wallclock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// watchSystem calls s.Notify whenever the system clock is stepped, from a
// timerfd on CLOCK_REALTIME armed with TFD_TIMER_CANCEL_ON_SET for an
// instant that never comes: the kernel cancels it, and its read fails with
// ECANCELED, when the clock is set. Without a timerfd (a sandbox that
// forbids it) steps are seen as on other platforms.
func watchSystem(s *Steps) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return
	}
	if arm(fd) != nil {
		unix.Close(fd)
		return
	}
	// Nonblocking, the file's reads wait in the runtime's poller, not on
	// a thread of their own.
	f := os.NewFile(uintptr(fd), "timerfd")
	go func() {
		var buf [8]byte
		for {
			_, err := f.Read(buf[:])
			switch {
			case errors.Is(err, unix.ECANCELED):
				if arm(fd) != nil {
					return
				}
				s.Notify()
			case err != nil:
				return
			}
		}
	}()
}

// arm sets the timerfd to expire at the largest instant it takes, cancelled
// when the clock is set.
func arm(fd int) error {
	spec := unix.ItimerSpec{Value: unix.Timespec{Sec: 1 << 62}}
	return unix.TimerfdSettime(fd, unix.TFD_TIMER_ABSTIME|unix.TFD_TIMER_CANCEL_ON_SET, &spec, nil)
}
