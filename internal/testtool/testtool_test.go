package testtool

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMissingRecordsTheSkip: off CI, a missing program skips the test and
// appends one line to $SCHEDULERD_TEST_SKIPS; an installed one is found.
func TestMissingRecordsTheSkip(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipsEnv, skips)
	t.Setenv("CI", "")
	if p := Path(t, "coreutils", "no-such-program-x", "true"); filepath.Base(p) != "true" {
		t.Fatalf("Path found %q, want true", p)
	}
	t.Run("missing", func(t *testing.T) {
		Path(t, "nosuch-pkg", "no-such-program-x")
		t.Error("not skipped")
	})
	b, err := os.ReadFile(skips)
	if err != nil || string(b) != "no-such-program-x not installed (apt-get install nosuch-pkg)\n" {
		t.Fatalf("recorded %q, %v", b, err)
	}
}
