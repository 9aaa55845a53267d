package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestProgressOfAnotherRunRefused: a job reports its own progress with the
// token the daemon gave its attempt, but cannot write progress into
// another run by naming that run (its token is not that run's), nor by
// leaving the token out.
func TestProgressOfAnotherRunRefused(t *testing.T) {
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf(`[[job]]
name = "victim"
shell = 'exec sleep 600'
kill_grace = "1s"

[[job]]
name = "forger"
shell = '''
"$SD_BIN" progress 10 mine && echo own=ok
SCHEDULERD_RUN_ID="$SCHEDULERD_PAYLOAD" "$SD_BIN" progress 99 forged || echo other=refused
SCHEDULERD_RUN_ID="$SCHEDULERD_PAYLOAD" SCHEDULERD_ATTEMPT_TOKEN= "$SD_BIN" progress 99 forged || echo notoken=refused
'''
env = { SD_BIN = %q }
`, binary))
	d := e.start(true)
	defer d.stop()
	victim := jsonOne(t, e.ok("trigger", "victim", "--json"))["id"].(string)
	waitFor(t, "the victim runs", 30e9, func() bool {
		return jsonOne(t, e.ok("runs", "show", victim, "--json"))["status"] == "running"
	})
	forger := jsonLines(t, e.ok("trigger", "forger", "--payload", victim, "--wait", "--json"))[0]["id"].(string)
	show := jsonOne(t, e.ok("runs", "show", forger, "--json"))
	out := fmt.Sprint(show["attempts"])
	for _, want := range []string{"own=ok", "other=refused", "notoken=refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("the forger's output lacks %q: %s", want, out)
		}
	}
	if show["progress"] != 10.0 {
		t.Errorf("the forger's own progress is %v, want 10", show["progress"])
	}
	v := jsonOne(t, e.ok("runs", "show", victim, "--json"))
	if v["progress"] != nil && v["progress"] != 0.0 || v["progress_message"] != nil && v["progress_message"] != "" {
		t.Errorf("another job wrote the victim's progress: %v %q", v["progress"], v["progress_message"])
	}
	e.ok("cancel", victim)
}
