package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, with
// ExecStart pointed at the binary under test. CI installs systemd-analyze;
// elsewhere the test is skipped when the tool is missing.
func TestUnitVerifies(t *testing.T) {
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
	for _, want := range []string{"Type=notify", "ExecReload=", "StateDirectory=schedulerd", "RuntimeDirectory=schedulerd",
		"KillMode=mixed", "WatchdogSec=", "Restart=on-failure"} {
		if !strings.Contains(text, want) {
			t.Errorf("unit lacks %s", want)
		}
	}
	path := filepath.Join(t.TempDir(), "schedulerd.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
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
