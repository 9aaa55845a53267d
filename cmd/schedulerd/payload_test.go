package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPayloadFile: --payload-file - reads the payload from standard input,
// so a secret never shows in ps; --payload-file F reads a file; both reach
// the job byte for byte. Too large a payload, or both flags, is refused.
func TestPayloadFile(t *testing.T) {
	e := newEnv(t)
	out := filepath.Join(e.dir, "payload.out")
	e.writeConfig("[[job]]\nname = \"p\"\nshell = 'printf %s \"$SCHEDULERD_PAYLOAD\" > " + out + "'\n")
	d := e.start(true)
	defer d.stop()

	trigger := func(in string, args ...string) cliResult {
		return runBinary(t, "", in, append(append([]string{"trigger", "p", "--wait"}, args...), "--config", e.config)...)
	}
	const secret = "s3cret from stdin\nsecond line"
	if r := trigger(secret, "--payload-file", "-"); r.code != 0 {
		t.Fatalf("trigger --payload-file -: exit %d: %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(out); string(got) != secret {
		t.Errorf("the job got payload %q, want %q", got, secret)
	}

	file := filepath.Join(e.dir, "payload.txt")
	if err := os.WriteFile(file, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := trigger("", "--payload-file", file); r.code != 0 {
		t.Fatalf("trigger --payload-file F: exit %d: %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(out); string(got) != "from a file" {
		t.Errorf("the job got payload %q, want %q", got, "from a file")
	}

	for _, tt := range []struct {
		in   string
		args []string
		want string
	}{
		{strings.Repeat("x", 32<<10+1), []string{"--payload-file", "-"}, "larger than 32768 bytes"},
		{"", []string{"--payload", "a", "--payload-file", "-"}, "not both"},
		{"", []string{"--payload-file", filepath.Join(e.dir, "missing")}, "no such file"},
	} {
		if r := trigger(tt.in, tt.args...); r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("trigger %v: exit %d, stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
	}
}
