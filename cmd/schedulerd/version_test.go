package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: `schedulerd version` prints the version, commit, build date
// and Go version, and --json the same as one object.
func TestVersion(t *testing.T) {
	version := func(args ...string) string {
		out, err := exec.Command(binary, append([]string{"version"}, args...)...).Output()
		if err != nil {
			t.Fatalf("schedulerd version %v: %v", args, err)
		}
		return string(out)
	}
	text := version()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "schedulerd ") || !strings.HasPrefix(lines[1], "commit ") ||
		!strings.HasPrefix(lines[2], "built ") || lines[3] != strings.TrimPrefix(runtime.Version(), "go") {
		t.Errorf("version printed %q", text)
	}
	v := jsonOne(t, version("--json"))
	for _, k := range []string{"version", "commit", "build_date", "go_version"} {
		if s, ok := v[k].(string); !ok || s == "" {
			t.Errorf("version --json: %s = %v", k, v[k])
		}
	}
	if v["go_version"] != runtime.Version() {
		t.Errorf("go_version %v, want %s", v["go_version"], runtime.Version())
	}
}
