package control

import (
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/procfs"
)

// orphanHelper plays a daemon killed while it forks a job: it listens on
// sock, starts a child that holds a copy of the listening socket (as a
// forked child does until its exec closes it; here for two seconds),
// prints the child's pid and exits at once.
func orphanHelper(sock string) int {
	ln, err := bindUmask(sock)
	if err != nil {
		return 1
	}
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		return 1
	}
	child := exec.Command("/bin/sleep", "2")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		return 1
	}
	os.Stdout.WriteString(strconv.Itoa(child.Process.Pid) + "\n")
	return 0
}

// TestStaleSocketHeldByAnOrphan: a daemon killed while it started a job
// leaves a child that still holds the listening socket for an instant. The
// next daemon's check must not take that for a live daemon: it waits for
// the socket to be let go (the listener's process is gone), then takes the
// path. On the previous code it refused at once ("another schedulerd is
// listening"), which failed restarts in tests on a busy machine.
func TestStaleSocketHeldByAnOrphan(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "CONTROL_TEST_HELPER=orphan", "CONTROL_TEST_SOCKET="+sock)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper printed %q", out)
	}
	if procfs.Gone(orphan) {
		t.Skip("the orphan ended before the check; nothing was held")
	}
	start := time.Now()
	if err := clearPath(sock, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("clearPath with the socket held by an orphan of a dead daemon: %v", err)
	}
	if !procfs.Gone(orphan) {
		t.Errorf("clearPath took the path %s after the start while the orphan still held the socket", time.Since(start))
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the stale socket is still there: %v", err)
	}
}
