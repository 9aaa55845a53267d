package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDescribe: describe.sh gives the version of a tree from VERSION and
// the history alone, tags or none: the commit that sets VERSION is the
// release, later ones say how far past it they are, a shallow clone never
// claims to be the release unless its HEAD has the release's tag, and
// `describe.sh check` refuses a tag at HEAD that VERSION does not match.
// Every answer is a valid input of packageVersion.
func TestDescribe(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is required")
	}
	script, err := filepath.Abs("describe.sh")
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	run := func(dir string, name string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := run(repo, gitPath, args...)
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(msg string) {
		t.Helper()
		git("add", "-A")
		git("commit", "-q", "-m", msg)
	}
	describe := func(dir string, want string) {
		t.Helper()
		got, err := run(dir, script)
		if err != nil || !regexp.MustCompile("^"+want+"$").MatchString(got) {
			t.Fatalf("describe.sh: %q, %v; want %s", got, err, want)
		}
		if _, err := packageVersion(got, time.Now()); err != nil {
			t.Errorf("packageVersion(%q): %v", got, err)
		}
	}
	hash := "[0-9a-f]{12}"

	git("init", "-q")
	write("main.go", "package main\n")
	commit("before VERSION")
	write("VERSION", "0.1.0\n")
	describe(repo, `v0\.1\.0-1-g`+hash) // VERSION not committed yet: not the release
	commit("release 0.1.0")
	describe(repo, `v0\.1\.0`)
	write("main.go", "package main // 2\n")
	describe(repo, `v0\.1\.0-dirty`)
	commit("two")
	write("main.go", "package main // 3\n")
	commit("three")
	describe(repo, `v0\.1\.0-2-g`+hash)
	if h := git("rev-parse", "--short=12", "HEAD"); !strings.Contains(mustRun(t, run, repo, script), h) {
		t.Errorf("describe.sh does not name HEAD %s", h)
	}
	write("main.go", "package main // 4\n")
	describe(repo, `v0\.1\.0-2-g`+hash+`-dirty`)
	commit("four")

	// A release: VERSION changes, the commit is tagged.
	write("VERSION", "0.2.0-rc1\n")
	commit("release 0.2.0-rc1")
	describe(repo, `v0\.2\.0-rc1`)
	git("tag", "-a", "v0.2.0-rc1", "-m", "rc1")
	if out, err := run(repo, script, "check"); err != nil {
		t.Errorf("check of a tagged release: %v\n%s", err, out)
	}
	git("tag", "-a", "v0.3.0", "-m", "wrong")
	if out, err := run(repo, script, "check"); err == nil || !strings.Contains(out, "HEAD is tagged v0.3.0 but VERSION says 0.2.0-rc1") {
		t.Errorf("check with a tag that VERSION does not match: %v\n%s", err, out)
	}
	git("tag", "-d", "v0.3.0")

	// A clone has no tags of its own making; a shallow one cannot count.
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := run(repo, gitPath, "clone", "-q", "--no-tags", "file://"+repo, clone); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	describe(clone, `v0\.2\.0-rc1`)
	write("main.go", "package main // 5\n")
	commit("five")
	shallow := filepath.Join(t.TempDir(), "shallow")
	if out, err := run(repo, gitPath, "clone", "-q", "--depth", "1", "--no-tags", "file://"+repo, shallow); err != nil {
		t.Fatalf("shallow clone: %v\n%s", err, out)
	}
	describe(shallow, `v0\.2\.0-rc1-0-g`+hash)
	describe(repo, `v0\.2\.0-rc1-1-g`+hash)

	// Without git, and with a VERSION that is no version.
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "VERSION"), []byte("1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	describe(plain, `v1\.0\.0`)
	for _, bad := range []string{"1.0\n", "v1.0.0\n", "1.0.0-\n", ""} {
		if err := os.WriteFile(filepath.Join(plain, "VERSION"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := run(plain, script); err == nil || !strings.Contains(out, "want X.Y.Z") {
			t.Errorf("VERSION %q: %v, %s", bad, err, out)
		}
	}
}

func mustRun(t *testing.T, run func(string, string, ...string) (string, error), dir, name string, args ...string) string {
	t.Helper()
	out, err := run(dir, name, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return out
}
