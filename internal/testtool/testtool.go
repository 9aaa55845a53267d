// Package testtool finds the programs that tests run besides Go (a shell,
// a browser, systemd-analyze, promtool) and decides what a missing one
// means: on CI ($CI set) the test fails, since CI installs them all
// (.ci/run); elsewhere the test is skipped, and the skip is appended to
// the file that $SCHEDULERD_TEST_SKIPS names, from which `make test`
// prints a summary at its end.
package testtool

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// SkipsEnv names the file that skips are recorded in.
const SkipsEnv = "SCHEDULERD_TEST_SKIPS"

// Path returns the path of the first of names that is installed. pkg is
// the Debian package that has it, for the message of a missing one
// (Missing).
func Path(t testing.TB, pkg string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	Missing(t, names[0], pkg)
	return ""
}

// Missing ends t for want of what, which the Debian package pkg
// provides: it fails on CI, and is skipped and recorded elsewhere.
func Missing(t testing.TB, what, pkg string) {
	t.Helper()
	msg := fmt.Sprintf("%s not installed (apt-get install %s)", what, pkg)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: it is required on CI", msg)
	}
	Skip(t, msg)
}

// Skip skips t for a reason that make test's summary lists: a missing
// program or server, or a test that must be asked for.
func Skip(t testing.TB, reason string) {
	t.Helper()
	Record(reason)
	t.Skip(reason)
}

// Record appends reason, a line, to the file $SCHEDULERD_TEST_SKIPS names
// (nothing when it is unset). Each test process appends with one write,
// so the lines of packages tested at once do not mix.
func Record(reason string) {
	path := os.Getenv(SkipsEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(reason + "\n")
}
