package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/internal/testtool"
)

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, alone
// and with the drop-in root.conf, with ExecStart pointed at the binary
// under test. The man pages that Documentation= names are not installed
// here (--man=no); TestMakeInstall and the package test verify the
// installed unit with them.
// CI installs systemd-analyze; elsewhere the test is skipped when the tool
// is missing.
func TestUnitVerifies(t *testing.T) {
	for _, root := range []bool{false, true} {
		tool, path := unitUnderTest(t, root)
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Type=notify", "ExecReload=", "StateDirectory=schedulerd", "RuntimeDirectory=schedulerd",
			"StateDirectoryMode=0750", "RuntimeDirectoryMode=0750", "KillMode=mixed", "WatchdogSec=", "Restart=on-failure",
			"User=schedulerd", "Documentation=man:schedulerd(8)"} {
			if !strings.Contains(string(text), want) {
				t.Errorf("unit lacks %s", want)
			}
		}
		out, err := exec.Command(tool, "verify", "--man=no", path).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze verify (root.conf %v): %v\n%s", root, err, out)
		}
		// verify exits 0 on some warnings; treat any line about our unit as a failure.
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "schedulerd.service") {
				t.Errorf("systemd-analyze (root.conf %v): %s", root, l)
			}
		}
	}
}

// unitUnderTest returns systemd-analyze and a copy of the shipped unit
// whose ExecStart runs the binary under test; withRoot appends the drop-in
// root.conf, as systemd reads a drop-in after the unit. CI installs
// systemd-analyze; elsewhere the test is skipped when the tool is missing.
func unitUnderTest(t *testing.T, withRoot bool) (tool, path string) {
	t.Helper()
	tool = testtool.Path(t, "systemd", "systemd-analyze")
	unit, err := os.ReadFile("../../systemd/schedulerd.service")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/schedulerd", binary)
	if withRoot {
		dropIn, err := os.ReadFile("../../systemd/root.conf")
		if err != nil {
			t.Fatal(err)
		}
		text += "\n" + string(dropIn)
	}
	path = filepath.Join(t.TempDir(), "schedulerd.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return tool, path
}

// exposure is systemd-analyze's overall exposure level of a unit.
func exposure(t *testing.T, tool, path string) float64 {
	t.Helper()
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
	if level > 2.5 {
		t.Errorf("exposure %.1f, want at most 2.5:\n%s", level, out)
	}
	return level
}

// TestUnitSecurityExposure: systemd-analyze rates the shipped unit (the
// daemon as the user schedulerd, no capabilities) lower than with the
// drop-in root.conf (root, with the capabilities that jobs of other users
// need: switch users, signal their groups, give the socket away), and
// both at most 2.5, with NoNewPrivileges and ProcSubset=pid among the
// hardening.
func TestUnitSecurityExposure(t *testing.T) {
	tool, path := unitUnderTest(t, false)
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NoNewPrivileges=yes", "ProcSubset=pid", "User=schedulerd", "\nCapabilityBoundingSet=\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	user := exposure(t, tool, path)
	tool, path = unitUnderTest(t, true)
	text, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"User=root", "CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("root.conf lacks %s", want)
		}
	}
	root := exposure(t, tool, path)
	t.Logf("exposure %.1f as schedulerd, %.1f as root", user, root)
	if user >= root {
		t.Errorf("exposure as schedulerd %.1f, not below %.1f as root", user, root)
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

// TestMakeInstall: `make install DESTDIR=...` installs the binary, the
// unit, root.conf, the config, and what the unit's Documentation= names
// (the two man pages) and the completion scripts where the packages put
// them, under PREFIX; systemd-analyze verify of the installed unit then
// passes with its man pages checked (MANPATH points into DESTDIR, as
// /usr/local/share/man is on man's path after a real install). A second
// install keeps an edited config.
func TestMakeInstall(t *testing.T) {
	proctest.Long(t, "make install builds the binary")
	mk := testtool.Path(t, "make", "make")
	analyze := testtool.Path(t, "systemd", "systemd-analyze")
	testtool.Path(t, "man-db", "man")
	testtool.Path(t, "bash", "bash")
	tmp := t.TempDir()
	dest := filepath.Join(tmp, "root")
	install := func() {
		t.Helper()
		cmd := exec.Command(mk, "-C", filepath.Join("..", ".."), "install", "DESTDIR="+dest, "BIN="+filepath.Join(tmp, "bin", "schedulerd"))
		cmd.Env = append(os.Environ(), "MAKEFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
	}
	install()
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{"usr/local/bin/schedulerd", 0o755},
		{"etc/systemd/system/schedulerd.service", 0o644},
		{"usr/local/share/schedulerd/root.conf", 0o644},
		{"etc/schedulerd/schedulerd.toml", 0o640},
		{"usr/local/share/man/man8/schedulerd.8.gz", 0o644},
		{"usr/local/share/man/man5/schedulerd.toml.5.gz", 0o644},
		{"usr/local/share/bash-completion/completions/schedulerd", 0o644},
		{"usr/local/share/zsh/site-functions/_schedulerd", 0o644},
		{"usr/local/share/fish/vendor_completions.d/schedulerd.fish", 0o644},
	} {
		fi, err := os.Stat(filepath.Join(dest, f.path))
		if err != nil {
			t.Errorf("make install: %v", err)
			continue
		}
		if fi.Mode() != f.mode {
			t.Errorf("%s has mode %v, want %v", f.path, fi.Mode(), f.mode)
		}
	}
	for page, want := range map[string]string{"man8/schedulerd.8.gz": `.TH "SCHEDULERD" 8`, "man5/schedulerd.toml.5.gz": `.TH "SCHEDULERD.TOML" 5`} {
		out, err := exec.Command("gzip", "-dc", filepath.Join(dest, "usr/local/share/man", page)).Output()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, no %q in %.200s", page, err, want, out)
		}
	}
	if out, err := exec.Command("bash", "-c", "source "+filepath.Join(dest, "usr/local/share/bash-completion/completions/schedulerd")+
		" && complete -p schedulerd").CombinedOutput(); err != nil || !strings.Contains(string(out), "_schedulerd") {
		t.Errorf("the installed bash completion: %v\n%s", err, out)
	}

	// The installed unit, its ExecStart at the installed binary.
	unit, err := os.ReadFile(filepath.Join(dest, "etc/systemd/system/schedulerd.service"))
	if err != nil {
		t.Fatal(err)
	}
	verified := filepath.Join(t.TempDir(), "schedulerd.service")
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/schedulerd", filepath.Join(dest, "usr/local/bin/schedulerd"))
	if err := os.WriteFile(verified, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=yes", verified)
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(dest, "usr/local/share/man"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "schedulerd") {
		t.Errorf("systemd-analyze verify --man=yes of the installed unit: %v\n%s", err, out)
	}

	// A second install keeps the operator's config.
	cfg := filepath.Join(dest, "etc/schedulerd/schedulerd.toml")
	if err := os.WriteFile(cfg, []byte("# edited\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	install()
	if b, _ := os.ReadFile(cfg); string(b) != "# edited\n" {
		t.Errorf("a second make install replaced the config: %q", b)
	}
}
