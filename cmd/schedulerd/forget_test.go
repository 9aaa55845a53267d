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

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// TestRetiredJobExpectedAndForgotten: a real daemon whose reload removes
// a job with expect_success_within still lists it, after the declared
// jobs, as not declared; a job that the cluster expects and that no
// config declares (its expectation older than its window, written
// before the daemon starts) becomes overdue at once, with one
// notification to the notifier its expectation names, shown by
// `schedulerd jobs` and survives a restart; `forget` is refused for a
// declared job (exit 1) and ends the expectation of a retired one, after
// which it is not listed and a second forget exits 5.
func TestRetiredJobExpectedAndForgotten(t *testing.T) {
	proctest.Long(t, "a daemon reloaded and restarted")
	e := newEnv(t)
	events := filepath.Join(e.dir, "events")
	notifier := fmt.Sprintf(`[[notifier]]
name = "ops"
shell = 'cat >> %s; echo >> %s'
`, events, events)
	nightly := `[[job]]
name = "nightly"
shell = "true"
expect_success_within = "26h"
notify = ["ops"]
`
	other := "[[job]]\nname = \"other\"\nshell = \"true\"\n"

	// The cluster expected "gone" two hours ago within an hour, and no
	// config declares it any more.
	if err := os.MkdirAll(filepath.Join(e.dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(e.dir, "state", "schedulerd.db")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ExpectationsSync(context.Background(), store.ExpectationsSyncParams{
		Put: []store.Expectation{{Job: "gone", Within: time.Hour, Notify: []string{"ops", "not-in-config"}}},
		Now: time.Now().Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	e.writeConfig(notifier + nightly + other)
	d := e.start(true)
	type jobLine struct {
		Name     string `json:"name"`
		Declared bool   `json:"declared"`
		Overdue  bool   `json:"overdue"`
		Within   string `json:"expect_success_within"`
	}
	jobsNow := func() []jobLine {
		t.Helper()
		var out []jobLine
		for _, l := range strings.Split(strings.TrimSpace(e.ok("jobs", "--json")), "\n") {
			var j jobLine
			if err := json.Unmarshal([]byte(l), &j); err != nil {
				t.Fatalf("jobs --json line %q: %v", l, err)
			}
			out = append(out, j)
		}
		return out
	}
	overdueEvents := func() int {
		b, _ := os.ReadFile(events)
		return strings.Count(string(b), `"event":"overdue"`)
	}
	waitFor(t, "the retired job to be overdue", 20*time.Second, func() bool {
		js := jobsNow()
		return len(js) == 3 && js[2].Name == "gone" && js[2].Overdue
	})
	js := jobsNow()
	if js[0] != (jobLine{"nightly", true, false, "26h0m0s"}) || js[1] != (jobLine{"other", true, false, ""}) ||
		js[2] != (jobLine{"gone", false, true, "1h0m0s"}) {
		t.Fatalf("jobs: %+v", js)
	}
	waitFor(t, "the overdue notification", 20*time.Second, func() bool { return overdueEvents() == 1 })
	table := e.ok("jobs")
	if !strings.Contains(table, "not declared, expected within 1h0m0s") || !strings.Contains(table, "(OVERDUE)") {
		t.Fatalf("jobs table:\n%s", table)
	}

	// The reload removes nightly: it is still expected, and listed so.
	e.writeConfig(notifier + other)
	d.signal(syscall.SIGHUP)
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	js = jobsNow()
	if len(js) != 3 || js[0].Name != "other" || js[1] != (jobLine{"gone", false, true, "1h0m0s"}) ||
		js[2] != (jobLine{"nightly", false, false, "26h0m0s"}) {
		t.Fatalf("jobs after the reload: %+v", js)
	}

	// A restart keeps both expected, and tells no one again.
	d.stop()
	d = e.start(true)
	waitFor(t, "the retired job to be known overdue after the restart", 20*time.Second, func() bool {
		js := jobsNow()
		return len(js) == 3 && js[1].Name == "gone" && js[1].Overdue
	})

	e.fails(1, "remove expect_success_within from its [[job]] instead", "forget", "other")
	if out := e.ok("forget", "gone"); !strings.Contains(out, "job gone forgotten") {
		t.Fatalf("forget: %s", out)
	}
	if out := e.ok("forget", "nightly", "--json"); !strings.Contains(out, `"forgotten":true`) {
		t.Fatalf("forget --json: %s", out)
	}
	if js := jobsNow(); len(js) != 1 || js[0].Name != "other" {
		t.Fatalf("jobs after forget: %+v", js)
	}
	e.fails(exitUnknownJob, "the cluster does not expect it", "forget", "gone")
	if !strings.Contains(d.logText(), `"msg":"expectation forgotten: the job is no longer expected to succeed"`) {
		t.Fatalf("forget not logged:\n%s", d.logText())
	}
	d.stop()
	if n := overdueEvents(); n != 1 {
		t.Fatalf("%d overdue notifications, want 1", n)
	}
}
