package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
)

// TestTimeoutStopsProcessGroup: a real daemon runs a command job past its
// timeout. The attempt ends with the reason timeout, and the job's process
// group is gone: the shell, which ignores SIGTERM, by SIGKILL after
// kill_grace, and a grandchild in the group with it.
func TestTimeoutStopsProcessGroup(t *testing.T) {
	e := newEnv(t)
	pids := filepath.Join(e.dir, "pids")
	e.writeConfig(fmt.Sprintf(`[[job]]
name = "hang"
shell = 'trap "" TERM; sleep 600 & echo "$$ $!" > "$PIDS"; wait'
env = { PIDS = %q }
timeout = "1s"
kill_grace = "1s"
retry = { max_attempts = 1 }
`, pids))
	d := e.start(true)
	id := jsonOne(t, e.ok("trigger", "hang", "--json"))["id"].(string)
	var fin map[string]any
	waitFor(t, "the run to end", 20*time.Second, func() bool {
		fin = jsonOne(t, e.ok("runs", "show", id, "--json"))
		return fin["status"] != "pending" && fin["status"] != "running"
	})
	if fin["status"] != "dead_letter" || fin["reason"] != "timeout" {
		t.Fatalf("run ended %v", fin)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		t.Fatalf("pids file %q", b)
	}
	for _, f := range fields {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "process "+f+" of the job to be gone", 10*time.Second, func() bool { return !proctest.Alive(pid) })
	}
	d.stop()
}

// TestTimeoutNone: with a [defaults] timeout of 1s, a real daemon stops
// the job that inherits it, and lets the job with timeout = "none" run
// past it to completion.
func TestTimeoutNone(t *testing.T) {
	e := newEnv(t)
	e.writeConfig(`[defaults]
timeout = "1s"
kill_grace = "1s"
retry = { max_attempts = 1 }

[[job]]
name = "unbounded"
shell = "sleep 3"
timeout = "none"

[[job]]
name = "bounded"
shell = "sleep 3"
`)
	d := e.start(true)
	ids := map[string]string{}
	for _, job := range []string{"unbounded", "bounded"} {
		ids[job] = jsonOne(t, e.ok("trigger", job, "--json"))["id"].(string)
	}
	end := func(job string) map[string]any {
		var fin map[string]any
		waitFor(t, job+"'s run to end", 30*time.Second, func() bool {
			fin = jsonOne(t, e.ok("runs", "show", ids[job], "--json"))
			return fin["status"] != "pending" && fin["status"] != "running"
		})
		return fin
	}
	if fin := end("bounded"); fin["status"] != "dead_letter" || fin["reason"] != "timeout" {
		t.Fatalf("the job with the defaults' timeout ended %v", fin)
	}
	if fin := end("unbounded"); fin["status"] != "completed" || fin["reason"] != "succeeded" {
		t.Fatalf("the job with timeout none ended %v", fin)
	}
	d.stop()
}
