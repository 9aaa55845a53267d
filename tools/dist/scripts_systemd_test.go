package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptsUnderSystemd runs the packages' maintainer scripts as dpkg and
// rpm would on a machine booted with systemd, which CI is not: in a mount
// namespace whose /run has /run/systemd/system, with systemctl,
// deb-systemd-invoke and the user and file commands replaced by ones that
// record their arguments. It proves the policy: an upgrade restarts a
// running service (try-restart: systemd sends SIGTERM, so running attempts
// get shutdown_grace and are retried), a fresh install starts and enables
// nothing, and a removal, not an upgrade, stops the service.
func TestScriptsUnderSystemd(t *testing.T) {
	if !packageTestsEnabled() {
		skip(t, "the maintainer scripts' test runs them in a mount namespace as root: set CI or SCHEDULERD_TEST_PACKAGES=1")
	}
	tools(t, "unshare", "mount")
	fake := t.TempDir()
	calls := filepath.Join(fake, "calls")
	for _, name := range []string{"systemctl", "deb-systemd-invoke", "addgroup", "adduser", "chown", "chmod"} {
		writeFake(t, fake, name, `echo "`+name+` $*" >> "$CALLS"`)
	}
	// The user and group exist, and the config's mode is the operator's.
	writeFake(t, fake, "getent", "exit 0")
	writeFake(t, fake, "dpkg-statoverride", "exit 0")

	root := filepath.Join("..", "..", "packaging")
	tests := []struct {
		script string
		args   []string
		want   []string // calls, in order
	}{
		{"deb/postinst", []string{"configure"}, []string{"systemctl --system daemon-reload"}},
		{"deb/postinst", []string{"configure", "0.0.0~git1.abc"}, []string{"systemctl --system daemon-reload", "deb-systemd-invoke try-restart schedulerd.service"}},
		{"deb/prerm", []string{"remove"}, []string{"deb-systemd-invoke stop schedulerd.service"}},
		{"deb/prerm", []string{"upgrade", "0.0.1"}, nil},
		{"deb/postrm", []string{"remove"}, []string{"systemctl --system daemon-reload"}},
		{"rpm/post", []string{"1"}, []string{"systemctl daemon-reload"}},
		{"rpm/post", []string{"2"}, []string{"systemctl daemon-reload", "systemctl try-restart schedulerd.service"}},
		{"rpm/preun", []string{"0"}, []string{"systemctl --no-reload disable --now schedulerd.service"}},
		{"rpm/preun", []string{"1"}, nil},
		{"rpm/postun", []string{"1"}, []string{"systemctl daemon-reload"}},
	}
	for _, tt := range tests {
		os.Remove(calls)
		script, err := filepath.Abs(filepath.Join(root, tt.script))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", append([]string{"-m", "sh", "-c",
			`mount -t tmpfs none /run && mkdir -p /run/systemd/system && exec sh "$@"`, "sh", script}, tt.args...)...)
		cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "CALLS="+calls)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", tt.script, tt.args, err, out)
		}
		b, err := os.ReadFile(calls)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var got []string
		if text := strings.TrimSpace(string(b)); text != "" {
			got = strings.Split(text, "\n")
		}
		if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
			t.Errorf("%s %v under systemd called\n%q\nwant\n%q", tt.script, tt.args, got, tt.want)
		}
		for _, c := range got {
			if strings.Contains(c, " enable") || strings.Contains(c, " start ") || strings.HasSuffix(c, " start") {
				t.Errorf("%s %v enables or starts the service: %q", tt.script, tt.args, c)
			}
		}
	}
}

// writeFake writes an executable sh script name into dir.
func writeFake(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
