package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// hardenProcess shuts two ways by which a job could reach into the daemon
// that runs it. cmdRun calls it once its flags are parsed, before it opens
// anything or starts a job:
//
//   - Every descriptor from 3 up is marked close-on-exec. Go opens its own
//     descriptors that way, but one the daemon inherited without the flag
//     (from an operator's shell, a wrapper script) would otherwise be open
//     in every job, whatever user the job runs as. The daemon itself keeps
//     using whatever it inherited.
//   - The daemon becomes non-dumpable. Its /proc/<pid> entries then belong
//     to root, so a process of the daemon's own user, such as a job without
//     `user`, can read neither its environment (a store password) nor its
//     memory, nor ptrace it. Nor is a core dump, which would hold the same
//     secrets, written.
//
// A step that fails is a warning on stderr and the daemon starts anyway. In
// practice neither fails: the first needs close_range or a mounted /proc,
// the second nothing.
func hardenProcess(stderr io.Writer) {
	if err := closeOnExecFrom(3); err != nil {
		fmt.Fprintf(stderr, "schedulerd: warning: jobs may inherit the daemon's descriptors: %v\n", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "schedulerd: warning: make the daemon non-dumpable: %v\n", err)
	}
}

// closeOnExecFrom marks every open descriptor numbered first or higher
// close-on-exec, with close_range when the kernel has it (CLOSE_RANGE_CLOEXEC
// since Linux 5.11) and else one by one from /proc/self/fd. Any close_range
// error falls back: ENOSYS and EINVAL on older kernels, EPERM from some
// seccomp filters.
func closeOnExecFrom(first int) error {
	if unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	return closeOnExecListed(first)
}

// closeOnExecListed is closeOnExecFrom without close_range: it sets
// FD_CLOEXEC on each descriptor /proc/self/fd lists from first up. A
// descriptor closed meanwhile (the listing's own among them) is skipped.
func closeOnExecListed(first int) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open descriptors: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < first {
			continue
		}
		if err := setCloseOnExec(fd); err != nil {
			return err
		}
	}
	return nil
}

// setCloseOnExec adds FD_CLOEXEC to the flags of fd; a descriptor that is
// no longer open is not an error.
func setCloseOnExec(fd int) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if errors.Is(err, unix.EBADF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("descriptor %d: get flags: %w", fd, err)
	}
	if flags&unix.FD_CLOEXEC != 0 {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
		return fmt.Errorf("descriptor %d: set close-on-exec: %w", fd, err)
	}
	return nil
}
