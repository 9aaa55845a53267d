package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestClientFlagsBeforeCommand: the client flags (--socket, --config,
// --api, --token-file, --json) work before the command as after it, in the
// forms README and docs/operations.md print (`schedulerd --api URL
// --token-file F runs`), with one dash or two and with =VALUE. Other flags
// before the command, and client flags before a command that does not take
// them, get a short error that says where they go, without the usage text.
func TestClientFlagsBeforeCommand(t *testing.T) {
	ae := startAPIDaemon(t, "")
	socket := filepath.Join(ae.dir, "state", "schedulerd.sock")
	url := "http://" + ae.addr
	ae.ok("trigger", "ok", "--wait")
	want := ae.ok("runs", "--json")
	for _, args := range [][]string{
		{"--api", url, "--token-file", ae.read.file, "runs", "--json"},
		{"--api", url, "--token-file", ae.read.file, "--json", "runs"},
		{"--api=" + url, "-token-file=" + ae.read.file, "-json", "runs"},
		{"--api", url, "runs", "--token-file", ae.read.file, "--json"},
		{"--socket", socket, "--json", "runs"},
		{"--config", ae.config, "--json", "runs"},
		{"--config=" + ae.config, "runs", "--json=true"},
	} {
		r := runBinary(t, "", "", args...)
		if r.code != 0 || r.stdout != want {
			t.Errorf("schedulerd %s: exit %d\nstdout %s\nstderr %s\nwant %s", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
		}
	}
	// A command's own argument and flags after the leading ones.
	run := jsonOne(t, want)
	if r := runBinary(t, "", "", "--socket", socket, "--json", "runs", "show", run["id"].(string)); r.code != 0 || jsonOne(t, r.stdout)["id"] != run["id"] {
		t.Errorf("--socket S --json runs show ID: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, "", "", "--api", url, "--token-file", ae.operate.file, "trigger", "ok", "--wait"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Errorf("--api URL --token-file F trigger ok --wait: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	// Offline commands take the client flags that they parse.
	if r := runBinary(t, "", "", "--config", ae.config, "check-config"); r.code != 0 || !strings.Contains(r.stdout, "tick") {
		t.Errorf("--config F check-config: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, "", "", "--json", "version"); r.code != 0 || jsonOne(t, r.stdout)["version"] == nil {
		t.Errorf("--json version: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait", "trigger", "ok"}, "--wait before the command: only the client flags (--socket, --config, --api, --token-file, --json) may come before it"},
		{[]string{"--json", "completion", "bash"}, "--json: the command completion does not take it"},
		{[]string{"--api", url, "token", "new", "x", "--role", "read"}, "--api: the command token does not take it"},
		{[]string{"--config"}, "--config needs a value"},
		{[]string{"--socket", socket}, "no command after --socket " + socket},
	} {
		r := runBinary(t, "", "", tt.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "schedulerd: ") || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("schedulerd %s: exit %d, stderr %q; want exit %d and one line with %q", strings.Join(tt.args, " "), r.code, r.stderr, exitUsage, tt.want)
		}
	}
}
