package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// packageTestsEnabled: the install test changes the machine (it installs
// and purges a package, adds a system user), so it runs only on CI (CI
// set, as the other tests read it) or when SCHEDULERD_TEST_PACKAGES=1 asks
// for it.
func packageTestsEnabled() bool {
	return os.Getenv("CI") != "" || os.Getenv("SCHEDULERD_TEST_PACKAGES") == "1"
}

// skip skips t and appends reason to the file $SCHEDULERD_TEST_SKIPS
// names, for the summary that make test prints at its end (this module
// cannot import the daemon's internal/testtool, which does the same).
func skip(t *testing.T, reason string) {
	t.Helper()
	if path := os.Getenv("SCHEDULERD_TEST_SKIPS"); path != "" {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, _ = f.WriteString(reason + "\n")
			f.Close()
		}
	}
	t.Skip(reason)
}

// tools returns the paths of the programs the install test needs; a
// missing one fails the test (it runs only where it was asked for).
func tools(t *testing.T, names ...string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			t.Fatalf("%s is required by the package test (.ci/run installs it)", n)
		}
		paths[n] = p
	}
	return paths
}

// sh runs a command and returns its stdout; it fails the test when the
// command fails.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestDebInstallUpgradePurge builds the .deb and .rpm for this machine,
// lints them, installs the .deb with dpkg and checks what an operator
// gets, upgrades it, removes and purges it, and checks what is left.
func TestDebInstallUpgradePurge(t *testing.T) {
	if !packageTestsEnabled() {
		skip(t, "the package test installs a package system-wide: it runs on CI, or as root with SCHEDULERD_TEST_PACKAGES=1")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the package test installs a package: run it as root")
	}
	tool := tools(t, "go", "dpkg", "dpkg-query", "lintian", "rpmlint", "rpm", "systemd-analyze", "man", "bash", "zsh", "fish", "getent", "runuser")
	if err := exec.Command("dpkg-query", "-W", "schedulerd").Run(); err == nil {
		t.Fatal("a schedulerd package is installed on this machine: the test would replace and purge it")
	}
	for _, p := range []string{"/etc/schedulerd", "/var/lib/schedulerd", "/usr/lib/systemd/system/schedulerd.service"} {
		if exists(p) {
			t.Fatalf("%s exists: the test would purge it (a `make install` here?)", p)
		}
	}
	_, userErr := user.Lookup("schedulerd")
	madeUser := userErr != nil
	t.Cleanup(func() {
		_ = exec.Command("dpkg", "--purge", "schedulerd").Run()
		os.RemoveAll("/run/schedulerd")
		os.RemoveAll("/var/lib/schedulerd")
		if madeUser {
			_ = exec.Command("userdel", "schedulerd").Run()
			_ = exec.Command("groupdel", "schedulerd").Run()
		}
	})

	// Build: the binary once, then packages of two versions from it.
	ctx := context.Background()
	out := t.TempDir()
	r := &release{root: "../..", out: out, version: "0.0.1", commit: strings.Repeat("0", 40),
		date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ldflags: "-s -w -X main.version=v0.0.1",
		archs: []string{runtime.GOARCH}, formats: []string{"deb", "rpm"}}
	binaries, host, err := r.buildAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(host)) })
	pkgs, err := r.packages(ctx, binaries, host)
	if err != nil {
		t.Fatal(err)
	}
	deb1, rpm1 := pkgs[0], pkgs[1]
	r2 := *r
	r2.version, r2.out = "0.0.2", filepath.Join(out, "v2")
	if err := os.Mkdir(r2.out, 0o755); err != nil {
		t.Fatal(err)
	}
	pkgs2, err := r2.packages(ctx, binaries, host)
	if err != nil {
		t.Fatal(err)
	}
	deb2 := pkgs2[0]

	t.Run("lintian", func(t *testing.T) {
		cmd := exec.Command(tool["lintian"], "--fail-on", "error,warning", "--display-info", "--pedantic", "--tag-display-limit", "0", deb1)
		b, err := cmd.CombinedOutput()
		t.Logf("lintian:\n%s", b)
		if err != nil {
			t.Errorf("lintian found errors or warnings: %v", err)
		}
	})
	t.Run("rpmlint", func(t *testing.T) {
		// Through packaging/rpm/lint: rpmlint alone would unpack the rpm's
		// absolute paths into / (see there).
		b, err := exec.Command("../../packaging/rpm/lint", rpm1).CombinedOutput()
		t.Logf("rpmlint:\n%s", b)
		if err != nil || !strings.Contains(string(b), " 0 errors, 0 warnings") {
			t.Errorf("rpmlint found errors or warnings: %v", err)
		}
		// The rpm's scripts and config as rpm reads them.
		q := sh(t, tool["rpm"], "-qp", "--scripts", "--qf", "[%{FILEFLAGS:fflags} %{FILEMODES:perms} %{FILEGROUPNAME} %{FILENAMES}\n]", rpm1)
		for _, want := range []string{"groupadd --system schedulerd", "systemctl try-restart schedulerd.service",
			"cn -rw-r----- schedulerd /etc/schedulerd/schedulerd.toml", " /usr/lib/systemd/system/schedulerd.service\n",
			"drwxr-xr-x root /usr/share/schedulerd\n"} {
			if !strings.Contains(q, want) {
				t.Errorf("rpm -qp lacks %q:\n%s", want, q)
			}
		}
	})

	// Install.
	sh(t, tool["dpkg"], "-i", deb1)
	installed := strings.Fields(sh(t, tool["dpkg-query"], "-L", "schedulerd"))
	checkInstalled(t, tool)
	runAsService(t, tool)

	// Upgrade: the operator's edit of the config survives.
	f, err := os.OpenFile("/etc/schedulerd/schedulerd.toml", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "# an operator's edit")
	f.Close()
	sh(t, tool["dpkg"], "-i", deb2)
	if v := sh(t, tool["dpkg-query"], "-W", "-f", "${Version}", "schedulerd"); v != "0.0.2" {
		t.Errorf("after the upgrade: version %q", v)
	}
	if b, _ := os.ReadFile("/etc/schedulerd/schedulerd.toml"); !strings.Contains(string(b), "# an operator's edit") {
		t.Error("the upgrade replaced the edited config")
	}
	checkInstalled(t, tool)

	// Remove: the state and the config stay.
	sh(t, tool["dpkg"], "-r", "schedulerd")
	for _, p := range []string{"/var/lib/schedulerd/schedulerd.db", "/etc/schedulerd/schedulerd.toml"} {
		if !exists(p) {
			t.Errorf("dpkg -r removed %s", p)
		}
	}
	if exists("/usr/bin/schedulerd") {
		t.Error("dpkg -r left /usr/bin/schedulerd")
	}

	// Purge: nothing the package installed or made is left but the user
	// and group, which Debian keeps.
	sh(t, tool["dpkg"], "--purge", "schedulerd")
	for _, p := range installed {
		if fi, err := os.Lstat(p); err == nil && (!fi.IsDir() || strings.Contains(p, "schedulerd")) {
			t.Errorf("after the purge %s is left", p)
		}
	}
	for _, p := range []string{"/var/lib/schedulerd", "/etc/schedulerd"} {
		if exists(p) {
			t.Errorf("after the purge %s is left", p)
		}
	}
	if _, err := user.Lookup("schedulerd"); err != nil {
		t.Errorf("the purge removed the user schedulerd (Debian keeps system users): %v", err)
	}
	if _, err := user.LookupGroup("schedulerd"); err != nil {
		t.Errorf("the purge removed the group schedulerd: %v", err)
	}
}

// checkInstalled checks an installed package: the user and group, the
// config's owner, mode and conffile status, the unit, check-config, the
// man pages and the completion scripts.
func checkInstalled(t *testing.T, tool map[string]string) {
	t.Helper()
	pw := strings.Split(strings.TrimSpace(sh(t, tool["getent"], "passwd", "schedulerd")), ":")
	if len(pw) != 7 {
		t.Fatalf("getent passwd schedulerd: %q", pw)
	}
	if uid, _ := strconv.Atoi(pw[2]); uid == 0 || uid >= 1000 || pw[5] != "/var/lib/schedulerd" || !strings.HasSuffix(pw[6], "/nologin") {
		t.Errorf("user schedulerd is not a system user with home /var/lib/schedulerd and no shell: %q", pw)
	}
	g, err := user.LookupGroup("schedulerd")
	if err != nil {
		t.Fatal(err)
	}
	if pw[3] != g.Gid {
		t.Errorf("schedulerd's group is %s, not schedulerd (%s)", pw[3], g.Gid)
	}
	fi, err := os.Stat("/etc/schedulerd/schedulerd.toml")
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o640 || st.Uid != 0 || strconv.Itoa(int(st.Gid)) != g.Gid {
		t.Errorf("config is %v %d:%d, want 0640 root:schedulerd", fi.Mode().Perm(), st.Uid, st.Gid)
	}
	if c := sh(t, tool["dpkg-query"], "-W", "-f", "${Conffiles}", "schedulerd"); !strings.Contains(c, "/etc/schedulerd/schedulerd.toml") {
		t.Errorf("the config is not a conffile: %q", c)
	}
	if p := "/etc/systemd/system/multi-user.target.wants/schedulerd.service"; exists(p) {
		t.Errorf("the package enabled the service: %s", p)
	}

	// The unit, with the man pages that its Documentation= names.
	unit := "/usr/lib/systemd/system/schedulerd.service"
	b, err := exec.Command(tool["systemd-analyze"], "verify", unit).CombinedOutput()
	if err != nil || bytes.Contains(b, []byte("schedulerd")) {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, b)
	}
	if u, _ := os.ReadFile(unit); !bytes.Contains(u, []byte("\nExecStart=/usr/bin/schedulerd run ")) || !bytes.Contains(u, []byte("\nUser=schedulerd\n")) {
		t.Errorf("installed unit:\n%s", u)
	}

	// The config checks, as root and as the daemon's user.
	out := sh(t, "/usr/bin/schedulerd", "check-config")
	if !strings.Contains(out, "/etc/schedulerd/schedulerd.toml: ok") || !strings.Contains(out, "store sqlite /var/lib/schedulerd/schedulerd.db, socket /run/schedulerd/schedulerd.sock") {
		t.Errorf("check-config:\n%s", out)
	}
	if out, err := exec.Command(tool["runuser"], "-u", "schedulerd", "--", "/usr/bin/schedulerd", "check-config").CombinedOutput(); err != nil {
		t.Errorf("check-config as schedulerd: %v\n%s", err, out)
	}

	// Man pages: found by name, and rendered without a warning.
	for _, page := range [][]string{{"8", "schedulerd"}, {"5", "schedulerd.toml"}} {
		path := strings.TrimSpace(sh(t, tool["man"], "-w", page[0], page[1]))
		if !strings.HasPrefix(path, "/usr/share/man/man"+page[0]+"/") {
			t.Errorf("man -w %s %s: %s", page[0], page[1], path)
		}
		cmd := exec.Command(tool["man"], "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil || stderr.Len() > 0 || len(out) == 0 {
			t.Errorf("man -l %s: %v\n%s", path, err, stderr.String())
		}
	}

	// Completion: bash loads it, zsh and fish parse theirs.
	if out, err := exec.Command(tool["bash"], "-c", "source /usr/share/bash-completion/completions/schedulerd && complete -p schedulerd").CombinedOutput(); err != nil ||
		strings.TrimSpace(string(out)) != "complete -F _schedulerd schedulerd" {
		t.Errorf("bash completion: %v\n%s", err, out)
	}
	if out, err := exec.Command(tool["zsh"], "-n", "/usr/share/zsh/vendor-completions/_schedulerd").CombinedOutput(); err != nil {
		t.Errorf("zsh completion: %v\n%s", err, out)
	}
	if out, err := exec.Command(tool["fish"], "--no-execute", "/usr/share/fish/vendor_completions.d/schedulerd.fish").CombinedOutput(); err != nil {
		t.Errorf("fish completion: %v\n%s", err, out)
	}
}

// runAsService runs the installed daemon as the unit would, without
// systemd: as schedulerd, in the state and runtime directories that
// systemd makes (0750, the user's), on the installed config. A trigger of
// its example job completes, and SIGTERM stops it cleanly.
func runAsService(t *testing.T, tool map[string]string) {
	t.Helper()
	u, err := user.Lookup("schedulerd")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, dir := range []string{"/var/lib/schedulerd", "/run/schedulerd"} {
		if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll("/run/schedulerd")
	logf, err := os.Create(filepath.Join(t.TempDir(), "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	logText := func() string { b, _ := os.ReadFile(logf.Name()); return string(b) }
	d := exec.Command("/usr/bin/schedulerd", "run", "--config", "/etc/schedulerd/schedulerd.toml")
	d.Dir = "/"
	d.Env = []string{"PATH=/usr/bin:/bin", "STATE_DIRECTORY=/var/lib/schedulerd", "RUNTIME_DIRECTORY=/run/schedulerd"}
	d.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = d.Process.Kill()
			<-done
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); exec.Command("/usr/bin/schedulerd", "health").Run() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not become healthy:\n%s", logText())
		}
	}
	out := sh(t, "/usr/bin/schedulerd", "trigger", "hello", "--wait")
	if !strings.Contains(out, "completed (exit code 0)") {
		t.Errorf("trigger hello --wait:\n%s", out)
	}
	_ = d.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Errorf("the daemon did not stop cleanly on SIGTERM: %v\n%s", err, logText())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the daemon did not stop on SIGTERM:\n%s", logText())
	}
	if fi, err := os.Stat("/var/lib/schedulerd/schedulerd.db"); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("the database is not schedulerd's: %v", err)
	}
}
