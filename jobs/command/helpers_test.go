package command

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hangLimit is the generous bound used to detect a Run that hangs: a Run
// that hangs never returns, and one that drains 1 GiB under -race on a
// machine whose cores are busy with other work took more than 10s.
const hangLimit = 2 * time.Minute

func TestMain(m *testing.M) {
	// The test binary re-executed by a test plays a part instead of testing.
	if part, ok := helperParts[os.Getenv(helperEnv)]; ok {
		os.Exit(part())
	}
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
