package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv names the variable that makes the test binary play one of
// helperParts instead of running the tests.
const helperEnv = "SCHEDULERD_COMMAND_TEST_PART"

// quickExit is the GORACE that keeps a re-executed race-enabled test binary
// from sleeping a second at exit.
const quickExit = "atexit_sleep_ms=0"

// helperParts are the parts the re-executed test binary can play, by the
// value of helperEnv; each returns the exit code.
var helperParts = map[string]func() int{
	"terminal-daemon": terminalDaemon,
	"session-probe":   sessionProbe,
}

// terminalDaemon plays a daemon started from a terminal: it checks that it
// has a controlling terminal, runs sessionProbe as a job, and prints the
// job's output.
func terminalDaemon() int {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "the daemon part has no controlling terminal: %v\n", err)
		return 2
	}
	tty.Close()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	res := Run(ctx, Spec{Argv: []string{exe}, Env: map[string]string{
		helperEnv: "session-probe",
		"GORACE":  quickExit,
	}})
	if res.StartErr != nil || res.ExitCode != 0 {
		fmt.Fprintf(os.Stderr, "job: exit %d, start error %v, output %q\n", res.ExitCode, res.StartErr, res.Output.String())
		return 1
	}
	fmt.Print(res.Output.String())
	return 0
}

// sessionProbe plays a job that looks for a terminal. It prints
// "tty=<how opening /dev/tty went> pid=<its pid> pgrp=<its group> sid=<its
// session>", the last two from /proc/self/stat.
func sessionProbe() int {
	tty := "opened"
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|syscall.O_NOCTTY, 0)
	var errno syscall.Errno
	switch {
	case err == nil:
		f.Close()
	case errors.As(err, &errno):
		tty = unix.ErrnoName(errno)
	default:
		tty = strconv.Quote(err.Error())
	}
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// After the command name in parentheses: state, ppid, pgrp, session.
	rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	fmt.Printf("tty=%s pid=%d pgrp=%s sid=%s\n", tty, os.Getpid(), rest[2], rest[3])
	return 0
}

// openPty opens a new pseudo-terminal and returns its master and slave
// sides. Neither becomes the test process's controlling terminal.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("number of the pseudo-terminal: %v", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal's slave: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// TestJobHasNoControllingTerminal proves that a job of a daemon started from
// a terminal cannot reach that terminal: the job leads a session of its own
// (its session and group IDs are its pid), which has no controlling
// terminal, so opening /dev/tty fails with ENXIO. Before jobs got their own
// session, the open succeeded, and with it TIOCSTI into the operator's shell.
func TestJobHasNoControllingTerminal(t *testing.T) {
	t.Parallel()
	_, slave := openPty(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangLimit)
	defer cancel()
	// The daemon part leads a session whose controlling terminal is the
	// pseudo-terminal, as a shell on a terminal would.
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=terminal-daemon", "GORACE="+quickExit)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("daemon part: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	got := map[string]string{}
	for _, kv := range strings.Fields(stdout.String()) {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["tty"] != "ENXIO" {
		t.Errorf("the job's open of /dev/tty: %s, want ENXIO (no controlling terminal)", got["tty"])
	}
	if got["pid"] == "" || got["sid"] != got["pid"] || got["pgrp"] != got["pid"] {
		t.Errorf("job pid %s, session %s, group %s; want a job that leads its session and group",
			got["pid"], got["sid"], got["pgrp"])
	}
}
