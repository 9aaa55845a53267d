package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCloseOnExec: both ways of marking descriptors close-on-exec, the
// close_range one and the /proc/self/fd fallback, set FD_CLOEXEC on a
// descriptor opened without it.
func TestCloseOnExec(t *testing.T) {
	for name, mark := range map[string]func(first int) error{
		"close_range":   closeOnExecFrom,
		"/proc/self/fd": closeOnExecListed,
	} {
		t.Run(name, func(t *testing.T) {
			fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // no O_CLOEXEC
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if cloexec(t, fd) {
				t.Fatalf("descriptor %d is close-on-exec before the test", fd)
			}
			// From fd up: the test process's own inherited descriptors
			// below it are left as they are.
			if err := mark(fd); err != nil {
				t.Fatal(err)
			}
			if !cloexec(t, fd) {
				t.Errorf("descriptor %d is not close-on-exec", fd)
			}
		})
	}
}

// cloexec reports whether fd has FD_CLOEXEC.
func cloexec(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.FD_CLOEXEC != 0
}

// TestJobInheritsNoDescriptors: a real daemon that inherited an open file
// without close-on-exec (as from an operator's shell) runs a job that lists
// its descriptors. The job has 0, 1 and 2 and the one its listing opens,
// and not the daemon's file.
func TestJobInheritsNoDescriptors(t *testing.T) {
	e := newEnv(t)
	inherited, err := os.Create(filepath.Join(e.dir, "inherited-by-the-daemon"))
	if err != nil {
		t.Fatal(err)
	}
	defer inherited.Close()
	e.writeConfig(`[[job]]
name = "fds"
command = ["ls", "-l", "/proc/self/fd"]
retry = { max_attempts = 1 }
`)
	// ExtraFiles are dup2'd to 3 and up in the daemon, without FD_CLOEXEC.
	d := startDaemon(e, os.Environ(), func(cmd *exec.Cmd) { cmd.ExtraFiles = []*os.File{inherited} })
	status, out := runJob(e, "fds")
	if status != "completed" {
		t.Fatalf("job ended %s, output:\n%s", status, out)
	}
	listing := regexp.MustCompile(`^/proc/\d+/fd$`) // ls's own directory
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		fd, target := f[len(f)-3], f[len(f)-1]
		seen[fd] = true
		if fd != "0" && fd != "1" && fd != "2" && !listing.MatchString(target) {
			t.Errorf("the job has descriptor %s -> %s", fd, target)
		}
	}
	if !seen["0"] || !seen["1"] || !seen["2"] {
		t.Errorf("the job's listing lacks 0, 1 or 2:\n%s", out)
	}
	d.stop()
}

// TestJobCannotReadDaemonEnviron: a real daemon runs as an unprivileged
// user with a secret in its environment, and a job without `user` (so as
// the same user) reads /proc/<its parent>/environ. The daemon is
// non-dumpable, so that file belongs to root and the read fails.
func TestJobCannotReadDaemonEnviron(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting the daemon as another user needs root; CI runs these tests as root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no unprivileged user to run the daemon as: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// A directory outside the test's root-only one, with a copy of the
	// binary that user can execute and a state directory of its own. The
	// directory is root's and others cannot write to it: a root client
	// refuses to reach a socket through a directory of another user in one
	// that user (or anyone, like /tmp) could change.
	dir, err := os.MkdirTemp("", "schedulerd-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "state"), uid, gid); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "schedulerd")
	copyFile(t, binary, bin, 0o755)
	e := &env{t: t, dir: dir, config: filepath.Join(dir, "schedulerd.toml")}
	e.writeConfig(`[[job]]
name = "peek"
shell = 'echo "parent $PPID"; cat "/proc/$PPID/environ"'
retry = { max_attempts = 1 }
`)
	secret := "schedulerd-test-secret-" + rand.Text()
	// The daemon gets the secret and nothing of the test's environment.
	d := startDaemon(e, []string{"PGPASSWORD=" + secret}, func(cmd *exec.Cmd) {
		cmd.Path = bin
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	})
	pid := d.cmd.Process.Pid
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil || !bytes.Contains(environ, []byte(secret)) {
		t.Fatalf("the daemon's environment, read as root, does not hold the secret: %v", err)
	}
	_, out := runJob(e, "peek")
	if !strings.HasPrefix(out, fmt.Sprintf("parent %d\n", pid)) {
		t.Fatalf("the job's parent is not the daemon (pid %d):\n%s", pid, out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("a job of the daemon's user read the daemon's environment, secret included")
	}
	d.stop()
}

// copyFile copies the file src to dst with mode perm.
func copyFile(t *testing.T, src, dst string, perm os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// runJob triggers job, waits for its run to end and returns the run's
// status and the output of its last attempt.
func runJob(e *env, job string) (status, output string) {
	e.t.Helper()
	id := jsonOne(e.t, e.ok("trigger", job, "--json"))["id"].(string)
	var run map[string]any
	waitFor(e.t, job+"'s run to end", 30*time.Second, func() bool {
		run = jsonOne(e.t, e.ok("runs", "show", id, "--json"))
		return run["status"] != "pending" && run["status"] != "running" && run["status"] != "retrying"
	})
	attempts, _ := run["attempts"].([]any)
	if len(attempts) == 0 {
		e.t.Fatalf("run %s ended %v without an attempt", id, run["status"])
	}
	last, _ := attempts[len(attempts)-1].(map[string]any)
	output, _ = last["output"].(string)
	return run["status"].(string), output
}

// startDaemon is env.start with the environment environ (and NOTIFY_SOCKET)
// and setup applied to the command before it starts. The notify socket is
// writable by any user, for a daemon that setup makes run as another one.
// It waits for READY=1.
func startDaemon(e *env, environ []string, setup func(cmd *exec.Cmd)) *proc {
	e.t.Helper()
	cmd := exec.Command(binary, "run", "--config", e.config)
	cmd.Env = slices.Clip(environ)
	setup(cmd)
	return e.launch(true, cmd, true)
}
