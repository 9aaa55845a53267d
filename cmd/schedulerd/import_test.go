package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/crontab"
)

// The translation itself is tested in package crontab; these tests hold the
// command: its arguments, what it reads, prints and exits with.

// checkConfig runs the real check-config on toml and loads it.
func checkConfig(t *testing.T, toml string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "imported.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, dir, "", "check-config", "--config", path); r.code != 0 {
		t.Fatalf("check-config of the import: exit %d\n%s%s\n%s", r.code, r.stdout, r.stderr, toml)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestImportCrontab: import-crontab prints the translation of the crontab
// it reads, which check-config accepts.
func TestImportCrontab(t *testing.T) {
	for _, file := range []string{"../../crontab/testdata/edge-cases", "../../crontab/testdata/debian-etc-crontab"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, err := crontab.Translate(data, crontab.Options{File: file})
		if err != nil {
			t.Fatal(err)
		}
		r := runBinary(t, "", "", "import-crontab", file)
		if r.code != 0 || r.stdout != want.TOML {
			t.Fatalf("import-crontab %s: exit %d, stderr %s\nstdout:\n%s\nwant:\n%s", file, r.code, r.stderr, r.stdout, want.TOML)
		}
		for _, w := range want.Warnings {
			if !strings.Contains(r.stderr, "schedulerd: warning: import-crontab: "+w+"\n") {
				t.Errorf("import-crontab %s: stderr %q lacks the warning %q", file, r.stderr, w)
			}
		}
		checkConfig(t, r.stdout)
	}
}

// TestImportCrontabStandardInput: "-" reads standard input; --user makes
// the crontab NAME's; flags may follow the file.
func TestImportCrontabStandardInput(t *testing.T) {
	crontabText, err := os.ReadFile("../../crontab/testdata/cronie-crontab.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"import-crontab", "--user", "root", "-"}, {"import-crontab", "-", "--user", "root"}} {
		r := runBinary(t, "", string(crontabText), args...)
		if r.code != 0 || !strings.Contains(r.stdout, "# read as the crontab of root: its jobs run as root.") ||
			!strings.Contains(r.stdout, "from a crontab on standard input") {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		cfg := checkConfig(t, r.stdout)
		if len(cfg.Jobs) != 5 {
			t.Fatalf("%d jobs, want 5", len(cfg.Jobs))
		}
		for _, d := range cfg.Jobs {
			if d.User != "root" {
				t.Errorf("%s: user %q, want root", d.Name, d.User)
			}
		}
	}
}

func TestImportCrontabRefusals(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, crontab.MaxSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		stdin string
		code  int
		want  string
	}{
		{[]string{"import-crontab"}, "", exitUsage, "give one crontab FILE, or - for standard input"},
		{[]string{"import-crontab", "a", "b"}, "", exitUsage, "give one crontab FILE"},
		{[]string{"import-crontab", "--user"}, "", exitUsage, "flag needs an argument"},
		{[]string{"import-crontab", "--user", "a\nb", "-"}, "", exitUsage, `--user: "a\nb" is not a user name`},
		{[]string{"import-crontab", "no-such-file"}, "", exitFailure, "no such file"},
		{[]string{"import-crontab", big}, "", exitUsage, "is larger than 4 MiB"},
		// Each job repeats the environment: no config could hold this.
		{[]string{"import-crontab", "-"}, "BIG=" + strings.Repeat("x", 64<<10) + "\n" + strings.Repeat("0 0 * * * /bin/true\n", 300),
			exitUsage, "more than a config may hold"},
	} {
		r := runBinary(t, "", tc.stdin, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, %d bytes on stdout; want exit %d and %q", tc.args, r.code, r.stderr, len(r.stdout), tc.code, tc.want)
		}
	}
	// Lines that cannot be translated are comments, and a warning counts them.
	r := runBinary(t, "", "@reboot /bin/true\nMAILTO=ops\n0 0 * * * /bin/true\n", "import-crontab", "-")
	if r.code != 0 || !strings.Contains(r.stderr, "schedulerd: warning: import-crontab: 2 lines not translated") ||
		!strings.Contains(r.stdout, "# line 1: @reboot /bin/true\n#   not translated: @reboot") {
		t.Errorf("exit %d\nstderr %s\nstdout %s", r.code, r.stderr, r.stdout)
	}
}
