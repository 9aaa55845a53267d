package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestActorsOverSocketAndAPI: a run made, cancelled or rerun through the
// control API records who asked, in its JSON (actor, cancelled_by) and on
// its events: "socket:USER" for a user of the socket, "api:TOKEN" for a
// token of the HTTP API. What the engine does on its own (a claim, the
// end of an attempt that succeeded) has no actor. Trigger, rerun, pause
// and reload are logged with the actor, and over the API with the
// client's address.
func TestActorsOverSocketAndAPI(t *testing.T) {
	ae := startAPIDaemon(t, "")
	ok := func(tok cliToken, args ...string) string {
		t.Helper()
		r := ae.api(tok, args...)
		if r.code != 0 {
			t.Fatalf("schedulerd %s over the API: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	me := fmt.Sprintf("uid %d", os.Getuid())
	if u, err := user.LookupId(fmt.Sprint(os.Getuid())); err == nil && u.Username != "" {
		me = u.Username
	}
	sock, ci := "socket:"+me, "api:"+ae.operate.name
	if ci != "api:ci" {
		t.Fatalf("the operate token is %q, want ci", ae.operate.name)
	}

	// events returns the (to, reason, actor) of each event of run id, and
	// the run's JSON, as runs show --json prints them on the socket.
	events := func(id string) (map[string]any, []string) {
		t.Helper()
		show := jsonOne(t, ae.ok("runs", "show", id, "--json"))
		var out []string
		for _, e := range show["events"].([]any) {
			ev := e.(map[string]any)
			out = append(out, fmt.Sprintf("%v/%v/%v", ev["to"], ev["reason"], ev["actor"]))
		}
		return show, out
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: events\n got %v\nwant %v", what, got, want)
		}
	}

	// Made on the socket.
	viaSocket := jsonOne(t, ae.ok("trigger", "ok", "--wait", "--json"))
	id := viaSocket["id"].(string)
	run, evs := events(id)
	if viaSocket["actor"] != sock || run["actor"] != sock || run["cancelled_by"] != "" {
		t.Errorf("run triggered on the socket: trigger printed actor %v, runs show actor %v cancelled_by %v; want %q",
			viaSocket["actor"], run["actor"], run["cancelled_by"], sock)
	}
	want("trigger on the socket", evs, "pending/created/"+sock, "running/claimed/", "completed/succeeded/")

	// Rerun through the API: the new run is the token's.
	rerun := jsonOne(t, ok(ae.operate, "rerun", id, "--wait", "--json"))
	run, evs = events(rerun["id"].(string))
	if rerun["actor"] != ci || run["actor"] != ci || run["rerun_of"] != id {
		t.Errorf("rerun through the API: %v, runs show %v; want actor %q", rerun, run, ci)
	}
	want("rerun through the API", evs, "pending/created/"+ci, "running/claimed/", "completed/succeeded/")

	// Triggered through the API and cancelled while it runs; the end of
	// the stopped attempt says who asked.
	slow := jsonOne(t, ok(ae.operate, "trigger", "slow", "--json"))
	slowID := slow["id"].(string)
	if slow["actor"] != ci {
		t.Errorf("trigger through the API printed actor %v, want %q", slow["actor"], ci)
	}
	waitFor(t, "the slow job to start", 30*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(ae.dir, "slow.pid"))
		return err == nil && strings.TrimSpace(string(b)) != ""
	})
	cancelled := jsonOne(t, ok(ae.operate, "cancel", slowID, "--wait", "--json"))
	run, evs = events(slowID)
	if cancelled["status"] != "cancelled" || cancelled["cancelled_by"] != ci || run["cancelled_by"] != ci || run["actor"] != ci {
		t.Errorf("cancel through the API: %v, runs show %v; want cancelled_by %q", cancelled, run, ci)
	}
	want("cancel of a running run through the API", evs, "pending/created/"+ci, "running/claimed/", "cancelled/cancelled/"+ci)

	// Triggered on the socket, for later, and cancelled through the API
	// while it waits.
	later := jsonOne(t, ae.ok("trigger", "ok", "--not-before", "+1h", "--json"))
	ok(ae.operate, "cancel", later["id"].(string))
	run, evs = events(later["id"].(string))
	if run["actor"] != sock || run["cancelled_by"] != ci {
		t.Errorf("pending run cancelled through the API: %v", run)
	}
	want("cancel of a pending run through the API", evs, "pending/created/"+sock, "cancelled/cancelled/"+ci)

	// The same history in the same JSON over the API, and in runs show's
	// table.
	if api := jsonOne(t, ok(ae.read, "runs", "show", slowID, "--json")); fmt.Sprint(api) != fmt.Sprint(jsonOne(t, ae.ok("runs", "show", slowID, "--json"))) {
		t.Errorf("runs show over the API differs from the socket's: %v", api)
	}
	table := ae.ok("runs", "show", later["id"].(string))
	for _, w := range []string{"made by:", sock, "cancelled by:", "ACTOR", ci} {
		if !strings.Contains(table, w) {
			t.Errorf("runs show prints no %q:\n%s", w, table)
		}
	}

	// Pause, resume and reload are logged with the actor.
	ok(ae.operate, "pause", "tick")
	ae.ok("resume", "tick")
	ok(ae.admin, "reload")
	logs := ae.d.logText()
	for _, w := range [][3]string{{"schedule paused", ci, "127.0.0.1:"}, {"schedule resumed", sock, ""}, {"reload applied", "api:" + ae.admin.name, "127.0.0.1:"},
		{"run triggered", ci, "127.0.0.1:"}, {"run rerun", ci, "127.0.0.1:"}} {
		if !loggedWith(logs, w[0], w[1], w[2]) {
			t.Errorf("the daemon's log has no %q with actor %q and remote %q:\n%s", w[0], w[1], w[2], grepLines(logs, "paused", "resumed", "reload", "triggered", "rerun"))
		}
	}
	ae.d.stop()
}

// loggedWith reports whether a JSON line of logs has msg and actor, and
// a remote address that starts with remote ("": none).
func loggedWith(logs, msg, actor, remote string) bool {
	for _, l := range strings.Split(logs, "\n") {
		var rec struct{ Msg, Actor, Remote string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == msg && rec.Actor == actor &&
			strings.HasPrefix(rec.Remote, remote) && (remote != "") == (rec.Remote != "") {
			return true
		}
	}
	return false
}

// grepLines returns the lines of s that contain any of words.
func grepLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
