// Package proctest holds what tests of real processes share: whether a
// process has exited, from /proc (a zombie, which only waits for whoever
// inherited it to reap it, counts as exited), and Long, which leaves the
// long process tests out of `go test -short`. Linux only.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/schedulerd/schedulerd/internal/procfs"
)

// State returns the state letter of pid from /proc and its process group,
// or "" if there is no such process.
func State(pid int) (state string, pgrp int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0
	}
	pgrp, _ = strconv.Atoi(f[2])
	return f[0], pgrp
}

// Alive reports whether pid names a process that has not exited. Zombies
// count as gone: whoever inherited them may not reap them promptly. It is
// the daemon's own test (procfs.Gone), so that tests and the daemon's
// start-up checks agree on what has exited.
func Alive(pid int) bool { return !procfs.Gone(pid) }

// GroupAlive reports whether any non-exited process is in group pgid.
func GroupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, pg := State(pid); pg == pgid && st != "" && st != "Z" && st != "X" {
			return true
		}
	}
	return false
}
