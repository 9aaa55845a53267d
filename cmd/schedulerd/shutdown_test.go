package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// TestShutdownGraceZero: with shutdown_grace = "0s" a SIGTERM stops the
// running attempt at once (reason shutdown, through the retry flow); the
// daemon does not wait the default 30s, which is what it did when the
// engine took a zero grace for "unset".
func TestShutdownGraceZero(t *testing.T) {
	e := newEnv(t)
	cfg := fmt.Sprintf(`[daemon]
state_dir = %q
node_id = "test-node"
shutdown_grace = "0s"
log_format = "json"

[[job]]
name = "hang"
command = ["sleep", "600"]
kill_grace = "1s"
`, filepath.Join(e.dir, "state"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d := e.start(true)
	id := jsonOne(t, e.ok("trigger", "hang", "--json"))["id"].(string)
	waitFor(t, "the run to start", 20*time.Second, func() bool {
		return jsonOne(t, e.ok("runs", "show", id, "--json"))["status"] == "running"
	})
	d.signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(25 * time.Second):
		t.Fatalf("the daemon still waits for its attempt 25s after SIGTERM with shutdown_grace 0s\n%s", d.logText())
	}
	// JSON logs write a duration in nanoseconds.
	waited := "none"
	for _, l := range strings.Split(d.logText(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "waiting for running attempts" {
			waited = fmt.Sprint(m["shutdown_grace"])
		}
	}
	if waited != "0" {
		t.Errorf("the daemon waited for its attempt with shutdown_grace %sns, want 0", waited)
	}
	st := e.openStore()
	r, err := st.RunGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != jobs.StatusRetrying || r.Reason != jobs.ReasonShutdown {
		t.Fatalf("run %s ended %s (%s), want retrying (shutdown)", id, r.Status, r.Reason)
	}
}
