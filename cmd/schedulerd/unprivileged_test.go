package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnprivilegedDaemon: a daemon run as an unprivileged user, as the
// packaged unit runs it (as schedulerd), runs a job without `user` as
// itself; it refuses to start with a job whose user it cannot switch to,
// rather than failing every attempt of it, and rejects a reload that adds
// one, keeping its running config.
func TestUnprivilegedDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running the daemon as another user needs root")
	}
	const nobody = 65534
	bin := publicBinary(t)
	e := newEnv(t)
	for _, dir := range []string{filepath.Dir(e.dir), e.dir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The state directory, as systemd's StateDirectory= makes it for the
	// unit's user.
	state := filepath.Join(e.dir, "state")
	if err := os.Mkdir(state, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	const whoami = "[[job]]\nname = \"whoami\"\ncommand = [\"/usr/bin/id\", \"-u\"]\n"
	const asRoot = "[[job]]\nname = \"as-root\"\ncommand = [\"/bin/true\"]\nuser = \"root\"\n"
	daemon := func() *exec.Cmd {
		cmd := exec.Command(bin, "run", "--config", e.config)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		return cmd
	}

	e.writeConfig(whoami + asRoot)
	out, err := daemon().CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), `job "as-root": user: the daemon runs as uid 65534, not root`) ||
		!strings.Contains(string(out), "root.conf") {
		t.Fatalf("start with a job of another user: %v\n%s", err, out)
	}

	e.writeConfig(whoami)
	logf, err := os.Create(filepath.Join(e.dir, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	d := &proc{t: t, log: logf.Name(), exited: make(chan struct{})}
	d.cmd = daemon()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.kill)
	for deadline := time.Now().Add(30 * time.Second); e.cli("health").code != 0; time.Sleep(100 * time.Millisecond) {
		select {
		case <-d.exited:
			t.Fatalf("daemon exited: %s\n%s", d.cmd.ProcessState, d.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not healthy within 30s\n%s", d.logText())
		}
	}
	id := jsonField(t, e.ok("trigger", "whoami", "--wait", "--json"), "id")
	show := jsonOne(t, e.ok("runs", "show", id, "--json"))
	if a := show["attempts"].([]any)[0].(map[string]any); a["output"] != "65534\n" {
		t.Errorf("the job ran as %q, want the daemon's user 65534", a["output"])
	}

	e.writeConfig(whoami + asRoot)
	e.fails(exitUsage, "not root", "reload")
	e.fails(exitUnknownJob, "unknown job", "trigger", "as-root")
	e.ok("trigger", "whoami", "--wait")
	d.stop()
}
