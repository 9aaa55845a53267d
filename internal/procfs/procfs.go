// Package procfs tells, from /proc, whether a process has exited, for the
// daemon's start-up checks of what a previous daemon may still hold. Linux
// only.
package procfs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Gone reports whether no live process has the id pid: there is none, or
// it is a zombie waiting to be reaped. An id of 0 or less is never a live
// process.
func Gone(pid int) bool {
	if pid <= 0 {
		return true
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state == 'Z' || state == 'X'
}

// Linger is how long the start-up checks wait for what a dead daemon's
// descriptors still hold to be let go. A daemon killed while it starts a
// job leaves, for an instant, a forked child that has not yet run the
// job's program: it holds copies of every descriptor of the daemon (the
// control socket, the database lock) until its exec closes them. On a
// busy machine that instant can last a while.
const Linger = 10 * time.Second

// WaitWhile calls held every pause until it returns false or Linger has
// passed, and returns its last answer.
func WaitWhile(held func() bool) bool {
	const pause = 20 * time.Millisecond
	deadline := time.Now().Add(Linger)
	for held() {
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(pause)
	}
	return false
}
