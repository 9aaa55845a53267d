package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fspermJobs is a job whose output is a secret that the database keeps.
const fspermJobs = `[[job]]
name = "secret"
shell = "echo the-secret-token"
`

// waitRefusal waits for a daemon that must refuse to start, and returns
// what it logged. One that starts instead (READY=1) is an error, and is
// killed so that the test can look at what it did.
func (d *proc) waitRefusal() string {
	d.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case <-d.exited:
			if d.cmd.ProcessState.Success() {
				d.t.Errorf("the daemon exited with success\n%s", d.logText())
			}
			return d.logText()
		case s := <-d.states:
			if strings.Contains(s, "READY=1") {
				d.t.Errorf("the daemon started")
				d.kill()
				return d.logText()
			}
		case <-timeout:
			d.t.Fatalf("the daemon did not exit\n%s", d.logText())
		}
	}
}

// TestUnsafeDirs: `schedulerd run` refuses to start
// when its state or socket directory could be planted or swapped by another
// local user, says which path and why, and touches nothing there, nor what
// a planted symlink points at.
func TestUnsafeDirs(t *testing.T) {
	tests := []struct {
		name string // short: the test's directory holds sockets
		root bool
		// setup prepares e.dir and returns more [daemon] lines and the
		// directory that must stay as it was.
		setup func(t *testing.T, e *env) (daemon, untouched string)
		want  string // in the error; %s is e.dir
	}{
		{
			name: "state 0777",
			setup: func(t *testing.T, e *env) (string, string) {
				return "", mkdirExactly(t, filepath.Join(e.dir, "state"), 0o777)
			},
			want: "schedulerd: open store: open sqlite store: state directory %s/state is writable by its group and others (mode 0777)",
		},
		{
			name: "lock symlink",
			setup: func(t *testing.T, e *env) (string, string) {
				state := mkdirExactly(t, filepath.Join(e.dir, "state"), 0o700)
				if err := os.Symlink(filepath.Join(e.dir, "secret"), filepath.Join(state, "schedulerd.db.lock")); err != nil {
					t.Fatal(err)
				}
				return "", state
			},
			want: "state directory %[1]s/state: %[1]s/state/schedulerd.db.lock is a symlink",
		},
		{
			name: "socket dir symlink",
			setup: func(t *testing.T, e *env) (string, string) {
				elsewhere := mkdirExactly(t, filepath.Join(e.dir, "elsewhere"), 0o755)
				if err := os.Symlink(elsewhere, filepath.Join(e.dir, "sock")); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("socket = %q", filepath.Join(e.dir, "sock", "schedulerd.sock")), elsewhere
			},
			want: "schedulerd: control socket: socket directory %s/sock is a symlink",
		},
		{
			name: "state nobody",
			root: true,
			setup: func(t *testing.T, e *env) (string, string) {
				state := mkdirExactly(t, filepath.Join(e.dir, "state"), 0o700)
				if err := os.Chown(state, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				return "", state
			},
			want: "state directory %s/state is owned by uid 65534",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("not checked: giving the directory to another user (nobody) needs root")
			}
			e := newEnv(t)
			secret := filepath.Join(e.dir, "secret")
			if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			daemon, untouched := tt.setup(t, e)
			e.writeConfigWith(2, daemon, fspermJobs)
			before := listing(t, untouched)
			log := e.start(false).waitRefusal()
			if want := fmt.Sprintf(tt.want, e.dir); !strings.Contains(log, want) {
				t.Errorf("the daemon's error does not say %q:\n%s", want, log)
			}
			if after := listing(t, untouched); after != before {
				t.Errorf("%s changed: %s, then %s", untouched, before, after)
			}
			if b, err := os.ReadFile(secret); err != nil || string(b) != "root only\n" {
				t.Errorf("the root-only file changed: %q %v", b, err)
			}
		})
	}
}

// mkdirExactly makes dir with mode, whatever the umask.
func mkdirExactly(t *testing.T, dir string, mode fs.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listing describes dir and its entries: names and modes.
func listing(t *testing.T, dir string) string {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := fi.Mode().String()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		s += " " + de.Name()
	}
	return s
}

// TestUmask0Files: a daemon started under the umask 0 makes its
// database, WAL, shared-memory and lock files 0600 (the database was 0644,
// so any local user could read a job's output), its socket 0660 and the
// state directory 0750. As root, the test opens the directories up and
// reads each file as nobody: every read is refused.
func TestUmask0Files(t *testing.T) {
	e := newEnv(t)
	e.writeConfigWith(2, "", fspermJobs)
	d := e.startUmask("000")
	e.ok("trigger", "secret", "--wait")

	state := filepath.Join(e.dir, "state")
	want := map[string]fs.FileMode{
		"schedulerd.db": 0o600, "schedulerd.db-wal": 0o600, "schedulerd.db-shm": 0o600,
		"schedulerd.db.lock": 0o600, "schedulerd.sock": fs.ModeSocket | 0o660,
	}
	des, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[de.Name()]
		if !ok || fi.Mode() != w {
			t.Errorf("%s has mode %v, want %v", de.Name(), fi.Mode(), w)
		}
		delete(want, de.Name())
	}
	if len(want) != 0 {
		t.Errorf("missing from the state directory: %v", want)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("state directory %v %v, want 0750", fi.Mode(), err)
	}

	if os.Geteuid() != 0 {
		t.Log("not checked: reading the files as another user needs root")
		d.stop()
		return
	}
	// Let nobody get to the files; their own modes must keep it out.
	for _, dir := range []string{filepath.Dir(e.dir), e.dir, state} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"schedulerd.db", "schedulerd.db-wal", "schedulerd.db-shm", "schedulerd.db.lock"} {
		cmd := exec.Command("/bin/cat", filepath.Join(state, n))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), "Permission denied") {
			t.Errorf("nobody read %s: %v, %d bytes, the secret in them: %v", n, err, len(out), strings.Contains(string(out), "the-secret-token"))
		}
	}
	d.stop()
}

// startUmask starts `schedulerd run` under the umask mask (a shell sets it
// and execs the daemon) and waits for READY=1.
func (e *env) startUmask(mask string) *proc {
	e.t.Helper()
	return e.launch(true, exec.Command("/bin/sh", "-c", `umask "$0" && exec "$1" run --config "$2"`, mask, binary, e.config), false)
}
