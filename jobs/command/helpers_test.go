package command

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangLimit is the generous bound used to detect a Run that hangs.
const hangLimit = 10 * time.Second

func TestMain(m *testing.M) {
	// Keep the background-process pipe wait short; set before any test runs.
	pipeWait = 200 * time.Millisecond
	os.Exit(m.Run())
}

// runBounded runs spec and fails the test if Run does not return within
// hangLimit.
func runBounded(t *testing.T, ctx context.Context, spec Spec) Result {
	t.Helper()
	done := make(chan Result, 1)
	go func() { done <- Run(ctx, spec) }()
	select {
	case res := <-done:
		return res
	case <-time.After(hangLimit):
		t.Fatalf("Run(%+v) did not return within %v", spec, hangLimit)
		return Result{}
	}
}

// procState returns the state letter of pid from /proc, or "" if there is
// no such process.
func procState(pid int) (state string, pgrp int) {
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

// alive reports whether pid names a process that has not exited. Zombies
// count as gone: whoever inherited them may not reap them promptly.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	st, _ := procState(pid)
	return st != "" && st != "Z" && st != "X"
}

// groupAlive reports whether any non-exited process is in group pgid.
func groupAlive(pgid int) bool {
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
		if st, pg := procState(pid); pg == pgid && st != "" && st != "Z" && st != "X" {
			return true
		}
	}
	return false
}

// eventually polls cond until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pidFile is a file a job appends "<tag> <pid>" lines to.
type pidFile string

func newPidFile(t *testing.T) pidFile {
	return pidFile(filepath.Join(t.TempDir(), "pids"))
}

// pids returns the pids recorded so far by tag.
func (f pidFile) pids() map[string]int {
	b, _ := os.ReadFile(string(f))
	m := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		tag, pid, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil {
			m[tag] = n
		}
	}
	return m
}

// waitPids waits until every tag has been recorded.
func (f pidFile) waitPids(t *testing.T, tags ...string) map[string]int {
	t.Helper()
	var m map[string]int
	ok := eventually(hangLimit, func() bool {
		m = f.pids()
		for _, tag := range tags {
			if m[tag] == 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("job did not record pids %v (got %v)", tags, m)
	}
	return m
}
