package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goreleaser/nfpm/v2/files"
)

func TestPackageVersion(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-4-gabc1234", "1.2.3+git4.abc1234"},
		{"v1.2.3-rc.1-4-gabc1234", "1.2.3~rc.1+git4.abc1234"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+git4.abc1234.dirty"},
		{"abc1234", "0.0.0~git20260102T030405.abc1234"},
		{"abc1234-dirty", "0.0.0~git20260102T030405.abc1234.dirty"},
	} {
		got, err := packageVersion(tt.describe, at)
		if err != nil || got != tt.want {
			t.Errorf("packageVersion(%q) = %q, %v; want %q", tt.describe, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "dev", "v1.2", "v1.2.3-", "release-1"} {
		if got, err := packageVersion(bad, at); err == nil {
			t.Errorf("packageVersion(%q) = %q, want an error", bad, got)
		}
	}
}

// TestPackageVersionsSort: the versions sort as the releases they name,
// by dpkg's rules (CI has dpkg; elsewhere the test is skipped without it).
func TestPackageVersionsSort(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dpkg is required on CI")
		}
		skip(t, "dpkg not installed (apt-get install dpkg)")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	order := []string{"abc1234", "v0.1.0-rc1", "v0.1.0", "v0.1.0-dirty", "v0.1.0-3-gabc1234", "v0.1.1"}
	for i := 1; i < len(order); i++ {
		a, _ := packageVersion(order[i-1], at)
		b, _ := packageVersion(order[i], at)
		if err := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg: %s (%s) does not sort before %s (%s)", a, order[i-1], b, order[i])
		}
	}
}

// TestContents: each package holds the binary, the unit, the config as a
// config file that upgrades keep, root.conf, the man pages, completion for
// three shells at their distribution's paths and the docs.
func TestContents(t *testing.T) {
	a := &assets{dir: "/stage", docs: []string{"doc/README.md", "doc/docs/operations.md"}}
	for _, format := range []string{"deb", "rpm"} {
		got := map[string]*files.Content{}
		for _, c := range contents(format, "/bin/schedulerd", a) {
			got[c.Destination] = c
		}
		zsh := map[string]string{"deb": "/usr/share/zsh/vendor-completions/_schedulerd", "rpm": "/usr/share/zsh/site-functions/_schedulerd"}[format]
		for _, dst := range []string{"/usr/bin/schedulerd", "/usr/lib/systemd/system/schedulerd.service", "/etc/schedulerd/schedulerd.toml",
			"/usr/share/schedulerd/root.conf", "/usr/share/man/man8/schedulerd.8.gz", "/usr/share/man/man5/schedulerd.toml.5.gz",
			"/usr/share/bash-completion/completions/schedulerd", zsh, "/usr/share/fish/vendor_completions.d/schedulerd.fish",
			"/usr/share/doc/schedulerd/copyright", "/usr/share/doc/schedulerd/README.md", "/usr/share/doc/schedulerd/docs/operations.md", "/etc/schedulerd"} {
			if got[dst] == nil {
				t.Errorf("%s: no %s", format, dst)
			}
		}
		if c := got["/usr/bin/schedulerd"]; c != nil && (c.Source != "/bin/schedulerd" || c.FileInfo.Mode != 0o755) {
			t.Errorf("%s: binary %+v", format, c)
		}
		cfg := got["/etc/schedulerd/schedulerd.toml"]
		if cfg == nil || cfg.Type != files.TypeConfigNoReplace {
			t.Fatalf("%s: the config is not config|noreplace: %+v", format, cfg)
		}
		wantMode, wantGroup := os.FileMode(0o644), "root" // postinst narrows it
		if format == "rpm" {
			wantMode, wantGroup = 0o640, "schedulerd"
		}
		if cfg.FileInfo.Mode != wantMode || cfg.FileInfo.Group != wantGroup || cfg.FileInfo.Owner != "root" {
			t.Errorf("%s: config %o %s:%s, want %o root:%s", format, cfg.FileInfo.Mode, cfg.FileInfo.Owner, cfg.FileInfo.Group, wantMode, wantGroup)
		}
		if _, ok := got["/usr/share/lintian/overrides/schedulerd"]; ok != (format == "deb") {
			t.Errorf("%s: lintian overrides present: %v", format, ok)
		}
	}
}

// TestScriptsParse: the maintainer scripts and packaging/rpm/lint are
// valid sh.
func TestScriptsParse(t *testing.T) {
	for _, s := range []string{"deb/postinst", "deb/prerm", "deb/postrm", "rpm/pre", "rpm/post", "rpm/preun", "rpm/postun", "rpm/lint"} {
		if out, err := exec.Command("sh", "-n", filepath.Join("..", "..", scriptsDir, s)).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", s, err, out)
		}
	}
}

func TestDebianChangelog(t *testing.T) {
	r := &release{version: "1.2.3+git4.abc1234", commit: strings.Repeat("a", 40), date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	got := debianChangelog(r)
	for _, want := range []string{"schedulerd (1.2.3+git4.abc1234) stable; urgency=medium\n\n  * Built from commit aaaa",
		"\n -- " + maintainer + "  Fri, 02 Jan 2026 03:04:05 +0000\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("changelog lacks %q:\n%s", want, got)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if len(l) > 80 && !strings.HasPrefix(l, " -- ") {
			t.Errorf("changelog line longer than 80: %q", l)
		}
	}
}
