package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func clockGettime(ts *syscall.Timespec) error {
	var t unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &t); err != nil {
		return err
	}
	ts.Sec, ts.Nsec = t.Sec, t.Nsec
	return nil
}
