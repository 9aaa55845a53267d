package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBadConfigs: every kind of mistake the config can hold is an error
// naming the file, the line and the key, with exit code 2, from both
// check-config and run, and run starts nothing.
func TestBadConfigs(t *testing.T) {
	for _, tc := range []struct {
		name, toml, line, key string
	}{
		{"unknown key", "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\ncolour = \"red\"\n", ":4:", "colour"},
		{"unknown daemon key", "[daemon]\nnod_id = \"x\"\n", ":2:", "nod_id"},
		{"duplicate job names", "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n", ":5:", "name"},
		{"wrong type", "[[job]]\nname = \"a\"\ncommand = \"/bin/true\"\n", ":3:", "command"},
		{"bare integer duration", "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\ntimeout = 30\n", ":4:", "timeout"},
		{"empty command", "[[job]]\nname = \"a\"\ncommand = []\n", ":3:", "command"},
		{"unknown user", "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\nuser = \"no-such-user-here\"\n", ":4:", "user"},
		{"unknown time zone", "[[job]]\nname = \"a\"\nschedule = \"0 3 * * *\"\ntimezone = \"Mars/Olympus\"\ncommand = [\"/bin/true\"]\n", ":4:", "timezone"},
		{"not_after before not_before", "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\nnot_before = 2026-06-01T00:00:00Z\nnot_after = 2026-05-01T00:00:00Z\n", ":5:", "not_after"},
		{"impossible schedule", "[[job]]\nname = \"a\"\nschedule = \"0 0 30 2 *\"\ncommand = [\"/bin/true\"]\n", ":3:", "schedule"},
		{"zero @every", "[[job]]\nname = \"a\"\nschedule = \"@every 0s\"\ncommand = [\"/bin/true\"]\n", ":3:", "schedule"},
		{"TZ prefix without fields", "[[job]]\nname = \"a\"\nschedule = \"TZ=Europe/Berlin\"\ncommand = [\"/bin/true\"]\n", ":3:", "schedule"},
		{"syntax error", "[[job]]\nname = \"a\n", ":2:", "TOML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "schedulerd.toml")
			cfg := "[daemon]\nstate_dir = \"" + filepath.Join(dir, "state") + "\"\n"
			if strings.HasPrefix(tc.toml, "[daemon]") {
				cfg = strings.Replace(tc.toml, "[daemon]\n", "[daemon]\nstate_dir = \""+filepath.Join(dir, "state")+"\"\n", 1)
				tc.line = ":3:"
			} else {
				cfg += tc.toml
				// the two daemon lines come first
				n := strings.Count(cfg[:len(cfg)-len(tc.toml)], "\n")
				tc.line = ":" + itoa(atoi(strings.Trim(tc.line, ":"))+n) + ":"
			}
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range []string{"check-config", "run"} {
				out, err := exec.Command(binary, cmd, "--config", path).CombinedOutput()
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != 2 {
					t.Fatalf("%s: exit %v, want 2\n%s", cmd, err, out)
				}
				if !strings.Contains(string(out), path+tc.line) || !strings.Contains(string(out), tc.key) {
					t.Fatalf("%s: the error does not name %s%s and %s:\n%s", cmd, path, tc.line, tc.key, out)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
				t.Fatalf("run made its state directory for a bad config: %v", err)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
