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
