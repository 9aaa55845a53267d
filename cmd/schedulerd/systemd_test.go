package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, with
// ExecStart pointed at the binary under test. CI installs systemd-analyze;
// elsewhere the test is skipped when the tool is missing.
func TestUnitVerifies(t *testing.T) {
	tool, path := unitUnderTest(t)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "ExecReload=", "StateDirectory=schedulerd", "RuntimeDirectory=schedulerd",
		"KillMode=mixed", "WatchdogSec=", "Restart=on-failure"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("unit lacks %s", want)
		}
	}
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify exits 0 on some warnings; treat any line about our unit as a failure.
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "schedulerd.service") {
			t.Errorf("systemd-analyze: %s", l)
		}
	}
}

// unitUnderTest returns systemd-analyze and a copy of the shipped unit
// whose ExecStart runs the binary under test. CI installs systemd-analyze;
// elsewhere the test is skipped when the tool is missing.
func unitUnderTest(t *testing.T) (tool, path string) {
	t.Helper()
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is required on CI")
		}
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile("../../systemd/schedulerd.service")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/schedulerd", binary)
	path = filepath.Join(t.TempDir(), "schedulerd.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return tool, path
}

// TestUnitSecurityExposure: systemd-analyze rates the unit's exposure at
// most 2.5, with the options that keep jobs of other users working (the
// capabilities to switch users and signal their groups) and
// NoNewPrivileges and ProcSubset=pid among the hardening.
func TestUnitSecurityExposure(t *testing.T) {
	tool, path := unitUnderTest(t)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivileges=yes", "ProcSubset=pid", "CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("unit lacks %s", want)
		}
	}
	out, err := exec.Command(tool, "security", "--offline=true", "--no-pager", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure level in:\n%s", out)
	}
	level, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure %.1f", level)
	if level > 2.5 {
		t.Errorf("exposure %.1f, want at most 2.5:\n%s", level, out)
	}
}

// TestInstalledConfigUsesUnitDirectories: the config that `make install`
// puts in /etc keeps the database and the socket in the unit's
// StateDirectory and RuntimeDirectory, whatever the working directory (/
// under systemd) and whether or not systemd sets $STATE_DIRECTORY (a
// command run by hand does not).
func TestInstalledConfigUsesUnitDirectories(t *testing.T) {
	dest := t.TempDir()
	// -o build: install the binary under test rather than build another.
	install := exec.Command("make", "-C", "../..", "-o", "build", "install", "DESTDIR="+dest, "BIN="+binary)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	cfg := filepath.Join(dest, "etc", "schedulerd", "schedulerd.toml")
	st, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o007 != 0 {
		t.Errorf("installed config mode %v: readable by others", st.Mode().Perm())
	}
	for _, env := range [][]string{
		{"STATE_DIRECTORY=/var/lib/schedulerd", "RUNTIME_DIRECTORY=/run/schedulerd"},
		{"STATE_DIRECTORY=", "RUNTIME_DIRECTORY="},
	} {
		cmd := exec.Command(binary, "check-config", "--config", cfg)
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("check-config of the installed config (%v): %v\n%s", env, err, out)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		want := "store sqlite /var/lib/schedulerd/schedulerd.db, socket /run/schedulerd/schedulerd.sock"
		if !strings.Contains(first, want) {
			t.Errorf("check-config (%v) from /: %q, want %q", env, first, want)
		}
	}
}

// TestRelativeStateDirIsBesideTheConfig: a relative state_dir is taken from
// the config file's directory, not from the working directory, so a daemon
// started from / never writes /var/schedulerd.db.
func TestRelativeStateDirIsBesideTheConfig(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.config, []byte("[daemon]\nstate_dir = \"./var\"\n[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "check-config", "--config", e.config)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "STATE_DIRECTORY=", "RUNTIME_DIRECTORY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check-config: %v\n%s", err, out)
	}
	want := "store sqlite " + filepath.Join(e.dir, "var", "schedulerd.db")
	if !strings.Contains(string(out), want) {
		t.Errorf("check-config from /: %q, want %q", out, want)
	}
}
