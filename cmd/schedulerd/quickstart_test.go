package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecondShellOfQuickStart: the quick start as a newcomer follows it.
// The daemon runs on a copy of the repository's schedulerd.toml, started
// from its directory as `make run` does; in a second shell, from the same
// directory, `schedulerd jobs` with no flag (and no $SCHEDULERD_SOCKET)
// finds its socket through ./schedulerd.toml, since there is no
// /etc/schedulerd/schedulerd.toml; so do check-config and next --job.
// run and migrate never fall back on it. A ./schedulerd.toml of another
// user, or one every user may write, is refused: its socket could be
// anyone's.
func TestSecondShellOfQuickStart(t *testing.T) {
	if _, err := os.Lstat(defaultConfig); err == nil {
		t.Skipf("%s exists on this machine: the fallback is for machines without it", defaultConfig)
	}
	e := newEnv(t)
	copyTo(t, filepath.Join("..", "..", "schedulerd.toml"), e.config)
	if err := os.Chmod(e.config, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", "schedulerd.toml")
	cmd.Dir = e.dir
	cmd.Env = withoutSocketEnv(os.Environ())
	d := e.launch(true, cmd, false)

	r := runBinary(t, e.dir, "", "jobs")
	if r.code != 0 || !strings.Contains(r.stdout, "hello") || !strings.Contains(r.stdout, "always-fails") {
		t.Fatalf("jobs in the second shell: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, e.dir, "", "trigger", "reindex", "--wait"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Errorf("trigger reindex --wait in the second shell: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, e.dir, "", "check-config"); r.code != 0 || !strings.HasPrefix(r.stdout, "schedulerd.toml: ok, 4 jobs") {
		t.Errorf("check-config in the second shell: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, e.dir, "", "next", "--job", "hello", "-n", "2"); r.code != 0 || strings.Count(r.stdout, "\n") != 2 {
		t.Errorf("next --job hello in the second shell: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	// Elsewhere there is no config to find, and the error says what to give.
	if r := runBinary(t, t.TempDir(), "", "jobs"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "there is no "+defaultConfig+", nor a ./schedulerd.toml here: give --config F, --socket PATH or $SCHEDULERD_SOCKET") {
		t.Errorf("jobs where there is no config: exit %d, %s", r.code, r.stderr)
	}
	// The daemon does not guess its config.
	for _, c := range []string{"run", "migrate"} {
		if r := runBinary(t, e.dir, "", c); r.code != exitUsage || !strings.Contains(r.stderr, "there is no "+defaultConfig+": give --config F") {
			t.Errorf("%s without --config: exit %d, %s", c, r.code, r.stderr)
		}
	}

	// A file every user may write: refused, nothing is sent.
	if err := os.Chmod(e.config, 0o666); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, e.dir, "", "jobs"); r.code != exitUsage || !strings.Contains(r.stderr, "not using ./schedulerd.toml") ||
		!strings.Contains(r.stderr, "every user may write it (mode 0666)") {
		t.Errorf("jobs with a world-writable ./schedulerd.toml: exit %d, %s", r.code, r.stderr)
	}
	if err := os.Chmod(e.config, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Another user's file, as one planted in a shared directory.
		if err := os.Chown(e.config, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"jobs"}, {"trigger", "reindex", "--payload", "secret"}, {"check-config"}} {
			if r := runBinary(t, e.dir, "", args...); r.code != exitUsage || !strings.Contains(r.stderr, "not using ./schedulerd.toml") ||
				!strings.Contains(r.stderr, "it belongs to uid 65534, not to you or root; give --config") {
				t.Errorf("%s with another user's ./schedulerd.toml: exit %d, %s", strings.Join(args, " "), r.code, r.stderr)
			}
		}
		// Given by name, it is read: the operator chose it.
		if r := runBinary(t, e.dir, "", "jobs", "--config", "schedulerd.toml"); r.code != 0 {
			t.Errorf("jobs --config schedulerd.toml of another user: exit %d, %s", r.code, r.stderr)
		}
	}
	d.stop()
}
