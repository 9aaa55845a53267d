package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// chainJobs are the jobs of the chain process tests, writing into dir:
// parent records its run and, with the payload "hang", waits for the file
// release.hang and fails; child (on_success) and page (on_failure) append
// "RUN PARENT PAYLOAD" to their logs, and child then waits for the file
// release.PAYLOAD. Only parent is a job of the chain's start: its one
// attempt fails it for good (a process the node lost included).
func chainJobs(dir string) string {
	return fmt.Sprintf(`[[job]]
name = "parent"
shell = 'echo "$SCHEDULERD_RUN_ID" >> %[1]s/parent.log; if [ "$SCHEDULERD_PAYLOAD" = hang ]; then while [ ! -e %[1]s/release.hang ]; do sleep 0.05; done; exit 1; fi'
retry = { max_attempts = 1 }
kill_grace = "1s"
on_success = ["child"]
on_failure = ["page"]

[[job]]
name = "child"
shell = 'echo "$SCHEDULERD_RUN_ID $SCHEDULERD_PARENT_RUN_ID $SCHEDULERD_PAYLOAD" >> %[1]s/child.log; while [ ! -e "%[1]s/release.$SCHEDULERD_PAYLOAD" ]; do sleep 0.05; done'
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "0s" }
kill_grace = "1s"

[[job]]
name = "page"
shell = 'echo "$SCHEDULERD_RUN_ID $SCHEDULERD_PARENT_RUN_ID $SCHEDULERD_PAYLOAD" >> %[1]s/page.log'
`, dir)
}

// chainLog returns the lines "RUN PARENT PAYLOAD" of a chain job's log
// whose parent is parent (a line cut by a kill is left out).
func chainLog(t *testing.T, path, parent string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == parent {
			out = append(out, f)
		}
	}
	return out
}

// wantOneChild checks that the end of run parent made exactly one run, of
// job, of the trigger chain, whose every attempt's process saw the parent's
// id and payload in SCHEDULERD_PARENT_RUN_ID and SCHEDULERD_PAYLOAD, and
// that attempts of it ran (at least attempts, with the same run id).
func wantOneChild(t *testing.T, st store.Store, dir, parent, job, payload string, attempts int) *jobs.Run {
	t.Helper()
	kids, err := st.RunChildren(context.Background(), parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 || kids[0].Job != job || kids[0].Trigger != jobs.TriggerChain || kids[0].ParentRunID != parent {
		for _, k := range kids {
			t.Logf("child %+v", *k)
		}
		t.Fatalf("run %s made %d runs, want one of %s", parent, len(kids), job)
	}
	lines := chainLog(t, filepath.Join(dir, job+".log"), parent)
	if len(lines) < attempts {
		t.Fatalf("%s ran %d times for parent %s, want at least %d", job, len(lines), parent, attempts)
	}
	for _, l := range lines {
		if l[0] != kids[0].ID || l[2] != payload {
			t.Fatalf("%s's process saw run %s, payload %s; want run %s (of parent %s), payload %s", job, l[0], l[2], kids[0].ID, parent, payload)
		}
	}
	return kids[0]
}

// TestChainSurvivesKillSQLite and TestChainSurvivesKillPostgres: a chain
// holds across SIGKILLs of its node (see testChainSurvivesKill).
func TestChainSurvivesKillSQLite(t *testing.T) {
	proctest.Long(t, "a daemon SIGKILLed between a chain's parent and its child")
	testChainSurvivesKill(t, "")
}

func TestChainSurvivesKillPostgres(t *testing.T) {
	proctest.Long(t, "a daemon SIGKILLed between a chain's parent and its child")
	pg.Require(t)
	testChainSurvivesKill(t, fmt.Sprintf("store = %q\n", pg.NewDatabase(t)))
}

// testChainSurvivesKill: a parent completes and its child (on_success)
// starts; the daemon is SIGKILLed while the child runs and restarted: the
// child's run, written with the parent's end, is run again, and it is
// still the one run of the parent. A parent that hangs is SIGKILLed with
// its daemon; the restart ends its lost attempt dead_letter, which makes
// its on_failure run, once. Another kill and restart make nothing more.
// Each child's process sees its parent's run id and payload.
func testChainSurvivesKill(t *testing.T, daemon string) {
	e := newEnv(t)
	dir := e.dir
	e.writeConfigWith(8, daemon, chainJobs(dir))
	d := e.start(true)
	trigger := func(payload string) string {
		t.Helper()
		r := e.cli("trigger", "parent", "--payload", payload, "--json")
		if r.code != 0 {
			t.Fatalf("trigger: exit %d: %s", r.code, r.stderr)
		}
		return jsonField(t, r.stdout, "id")
	}

	ok := trigger("ok1")
	waitFor(t, "the child to start", 20*time.Second, func() bool {
		return len(chainLog(t, filepath.Join(dir, "child.log"), ok)) > 0
	})
	d.kill()
	d = e.start(true)
	waitFor(t, "the child to run again after the kill", 30*time.Second, func() bool {
		return len(chainLog(t, filepath.Join(dir, "child.log"), ok)) > 1
	})
	if err := os.WriteFile(filepath.Join(dir, "release.ok1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	hang := trigger("hang")
	waitFor(t, "the hanging parent to start", 20*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "parent.log"))
		return strings.Contains(string(b), hang)
	})
	d.kill()
	if err := os.WriteFile(filepath.Join(dir, "release.hang"), nil, 0o644); err != nil {
		t.Fatal(err) // the orphaned process exits; its result is lost with its daemon
	}
	d = e.start(true)
	waitFor(t, "the failed parent's page to run", 30*time.Second, func() bool {
		return len(chainLog(t, filepath.Join(dir, "page.log"), hang)) > 0
	})
	// Once every run is done, another kill and restart make none again.
	for _, job := range []string{"child", "page"} {
		waitFor(t, job+" to complete", 30*time.Second, func() bool {
			r := e.cli("runs", "--job", job, "--json")
			return r.code == 0 && strings.Count(r.stdout, `"status":"completed"`) == 1
		})
	}
	d.kill()
	d = e.start(true)
	r := e.cli("runs", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"parent_run_id":"`+ok+`"`) {
		t.Fatalf("runs --json: exit %d, no run with parent_run_id %s:\n%s%s", r.code, ok, r.stdout, r.stderr)
	}
	d.stop()

	var st store.Store
	if daemon == "" {
		st = e.openStore()
	} else {
		st = openPostgres(t, strings.Trim(strings.TrimPrefix(strings.TrimSpace(daemon), "store = "), `"`))
	}
	ctx := context.Background()
	wantStatus := func(id string, status jobs.Status) {
		t.Helper()
		r, err := st.RunGet(ctx, id)
		if err != nil || r.Status != status {
			t.Fatalf("run %s: %v %v, want %s", id, r, err, status)
		}
	}
	wantStatus(ok, jobs.StatusCompleted)
	wantStatus(hang, jobs.StatusDeadLetter)
	child := wantOneChild(t, st, dir, ok, "child", "ok1", 2)
	wantStatus(child.ID, jobs.StatusCompleted)
	page := wantOneChild(t, st, dir, hang, "page", "hang", 1)
	wantStatus(page.ID, jobs.StatusCompleted)
	for _, job := range []string{"child", "page"} {
		if runs, err := st.RunsList(ctx, store.RunFilter{Job: job}); err != nil || len(runs) != 1 {
			t.Fatalf("%d runs of %s, want 1 (%v)", len(runs), job, err)
		}
	}
	if kids, err := st.RunChildren(ctx, child.ID); err != nil || len(kids) != 0 {
		t.Fatalf("the child made runs: %v %v", kids, err)
	}
}

// TestClusterChainAcrossNodes: on two nodes, a parent that hangs on one
// is lost with it (SIGKILL): the other node recovers the attempt past
// inactive_threshold, ends it dead_letter and so makes its on_failure run,
// once. A parent that completes makes its child; the node that runs the
// child is SIGKILLed and the other runs it again: one child still.
func TestClusterChainAcrossNodes(t *testing.T) {
	proctest.Long(t, "a cluster node SIGKILLed under a chain")
	dir := t.TempDir()
	c := newCluster(t, 2, chainJobs(dir))
	trigger := func(payload string) string {
		t.Helper()
		r := c.cli("node-1", "trigger", "parent", "--payload", payload, "--json")
		if r.code != 0 {
			t.Fatalf("trigger: exit %d: %s", r.code, r.stderr)
		}
		return jsonField(t, r.stdout, "id")
	}
	survivor := func(victim string) string {
		if victim == "node-1" {
			return "node-2"
		}
		return "node-1"
	}

	hang := trigger("hang")
	var victim string
	waitFor(t, "the hanging parent to run", 20*time.Second, func() bool {
		r := c.run(hang)
		victim = r.Node
		return r.Status == jobs.StatusRunning
	})
	c.node(victim).d.kill()
	if err := os.WriteFile(filepath.Join(dir, "release.hang"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lost parent's page to run", 30*time.Second, func() bool {
		return len(chainLog(t, filepath.Join(dir, "page.log"), hang)) > 0
	})
	if r := c.run(hang); r.Status != jobs.StatusDeadLetter || r.Reason != jobs.ReasonNodeLost {
		t.Fatalf("the lost parent is %s (%s), want dead_letter (node_lost)", r.Status, r.Reason)
	}
	c.start(victim)

	ok := trigger("ok2")
	var child *jobs.Run
	waitFor(t, "the child to run", 20*time.Second, func() bool {
		kids, err := c.st.RunChildren(context.Background(), ok)
		if err != nil || len(kids) != 1 || kids[0].Status != jobs.StatusRunning {
			return false
		}
		child = kids[0]
		return len(chainLog(t, filepath.Join(dir, "child.log"), ok)) > 0
	})
	c.node(child.Node).d.kill()
	waitFor(t, "the child to run on the other node", 30*time.Second, func() bool {
		r := c.run(child.ID)
		return r.Status == jobs.StatusRunning && r.Node == survivor(child.Node) && r.Attempt > 1 &&
			len(chainLog(t, filepath.Join(dir, "child.log"), ok)) > 1
	})
	if err := os.WriteFile(filepath.Join(dir, "release.ok2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child to complete", 20*time.Second, func() bool {
		return c.run(child.ID).Status == jobs.StatusCompleted
	})
	wantOneChild(t, c.st, dir, hang, "page", "hang", 1)
	wantOneChild(t, c.st, dir, ok, "child", "ok2", 2)
	for _, job := range []string{"child", "page"} {
		if runs := c.runs(job); len(runs) != 1 {
			t.Fatalf("%d runs of %s, want 1", len(runs), job)
		}
	}
}

// TestDashboardChainInBrowser: in headless Chromium, the page of a run
// whose end made runs lists them with links, the page of each of them
// links its parent, and a job's page shows on_success and on_failure with
// links; each page stays within a phone's width. The pages are shot into
// $SCHEDULERD_SCREENSHOTS (else the test's temporary directory).
func TestDashboardChainInBrowser(t *testing.T) {
	proctest.Long(t, "a browser and a daemon")
	e := newEnv(t)
	addr := freeAddr(t)
	reader := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(4, fmt.Sprintf("api_listen = %q\n", addr), `[[job]]
name = "nightly-etl-of-the-warehouse"
shell = 'echo loaded'
on_success = ["report", "archive-the-loaded-partitions"]
on_failure = ["page"]

[[job]]
name = "report"
shell = 'echo "report of $SCHEDULERD_PARENT_RUN_ID"'

[[job]]
name = "archive-the-loaded-partitions"
shell = 'echo archived'

[[job]]
name = "page"
shell = 'echo paged'
`+"\n"+reader.table)
	d := e.start(true)
	defer d.stop()
	parent := jsonOne(t, e.ok("trigger", "nightly-etl-of-the-warehouse", "--payload", "day=2026-03-01", "--wait", "--json"))["id"].(string)
	var children []any
	waitFor(t, "the children to complete", 30*time.Second, func() bool {
		children, _ = jsonOne(t, e.ok("runs", "show", parent, "--json"))["children"].([]any)
		if len(children) != 2 {
			return false
		}
		for _, c := range children {
			if c.(map[string]any)["status"] != "completed" {
				return false
			}
		}
		return true
	})
	child := children[0].(map[string]any)["id"].(string)
	if show := e.ok("runs", "show", parent); !strings.Contains(show, "child run:") || !strings.Contains(show, child) {
		t.Errorf("runs show of the parent does not list its child %s:\n%s", child, show)
	}
	if show := e.ok("runs", "show", child); !strings.Contains(show, "parent run:") || !strings.Contains(show, parent) {
		t.Errorf("runs show of a child does not name its parent %s:\n%s", parent, show)
	}
	if list := e.ok("jobs"); !strings.Contains(list, "ok:report,archive-the-loaded-partitions fail:page") {
		t.Errorf("jobs does not show the chain:\n%s", list)
	}
	j := jobNamed(t, e, "nightly-etl-of-the-warehouse")
	if fmt.Sprint(j["on_success"], j["on_failure"]) != "[report archive-the-loaded-partitions] [page]" {
		t.Errorf("jobs --json: on_success %v, on_failure %v", j["on_success"], j["on_failure"])
	}
	if j := jobNamed(t, e, "page"); fmt.Sprint(j["on_success"], j["on_failure"]) != "[] []" {
		t.Errorf("jobs --json of a job without a chain: on_success %v, on_failure %v", j["on_success"], j["on_failure"])
	}

	base := "http://" + addr
	b := newBrowser(t, base)
	b.open("/ui/", "#token")
	if st := b.submit("log in", chromedp.SendKeys(chromedp.CSS("#token"), reader.token), chromedp.Click(chromedp.CSS("#login"))); st != http.StatusOK {
		t.Fatalf("log in: HTTP %d, %q", st, b.text("main"))
	}

	b.open("/ui/runs/"+parent, "#children")
	if n := b.count("#children li"); n != 2 {
		t.Fatalf("the parent's page lists %d runs it made, want 2:\n%s", n, b.text("main"))
	}
	for _, c := range children {
		id := c.(map[string]any)["id"].(string)
		if b.count(fmt.Sprintf("#children a[href='/ui/runs/%s']", id)) != 1 {
			t.Errorf("the parent's page does not link its child %s", id)
		}
	}
	if b.count("#parent-run") != 0 {
		t.Errorf("the parent's page names a parent: %q", b.text("#parent-run"))
	}
	b.within("the run page with children", "#children")
	b.shoot("chain-parent")

	b.open("/ui/runs/"+child, "#parent-run")
	if b.count(fmt.Sprintf("#parent-run a[href='/ui/runs/%s']", parent)) != 1 || !strings.Contains(b.text("#parent-run"), "completed") {
		t.Errorf("the child's page does not link its parent %s: %q", parent, b.text("#parent-run"))
	}
	b.within("the run page with a parent", "#parent-run")
	b.shoot("chain-child")

	b.open("/ui/jobs/nightly-etl-of-the-warehouse", "#on-success")
	if got := b.text("#on-success") + " / " + b.text("#on-failure"); got != "report, archive-the-loaded-partitions / page" {
		t.Errorf("the job's page shows the chain %q", got)
	}
	if b.count("#on-success a[href='/ui/jobs/report']") != 1 || b.count("#on-failure a[href='/ui/jobs/page']") != 1 {
		t.Errorf("the job's page does not link the chain's jobs")
	}
	b.within("the job page with a chain", "#on-success", "#on-failure")
	b.shoot("chain-job")
	t.Logf("screenshots in %s", b.shots)
}

// TestChainCheckConfigAndNext: check-config refuses a chain that names
// no job or leads back to a job, naming the file, the line, the job and
// the key, and the cycle; next ends the ticks of a job of a chain with
// what its runs trigger, and its --json ticks carry the lists.
func TestChainCheckConfigAndNext(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "schedulerd.toml")
	write := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`[[job]]
name = "a"
shell = "true"
on_success = ["b"]

[[job]]
name = "b"
shell = "true"
on_failure = ["a", "nope"]
`)
	r := runBinary(t, "", "", "check-config", "--config", path)
	for _, want := range []string{
		path + `:4: job "a": on_success: chain cycle: a -> b -> a`,
		path + `:9: job "b": on_failure: element 1: no [[job]] named "nope"`,
	} {
		if r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("check-config: exit %d, stderr\n%s\nwant %q", r.code, r.stderr, want)
		}
	}

	write(`[[job]]
name = "nightly"
schedule = "0 3 * * *"
timezone = "UTC"
shell = "true"
on_success = ["report", "archive"]
on_failure = ["page"]

[[job]]
name = "report"
shell = "true"

[[job]]
name = "archive"
shell = "true"

[[job]]
name = "page"
shell = "true"
`)
	if r := runBinary(t, "", "", "check-config", "--config", path); r.code != 0 {
		t.Fatalf("check-config of a good chain: exit %d %s", r.code, r.stderr)
	}
	r = runBinary(t, "", "", "next", "--job", "nightly", "--config", path, "--from", "2026-03-01T12:00:00Z", "-n", "2")
	want := "2026-03-02T03:00:00Z\n2026-03-03T03:00:00Z\neach run then triggers: on success report, archive; on failure page\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("next of a job of a chain: exit %d\n%s%s\nwant\n%s", r.code, r.stdout, r.stderr, want)
	}
	r = runBinary(t, "", "", "next", "--job", "nightly", "--config", path, "--from", "2026-03-01T12:00:00Z", "-n", "1", "--json")
	if j := jsonOne(t, r.stdout); r.code != 0 || fmt.Sprint(j["on_success"], j["on_failure"]) != "[report archive] [page]" {
		t.Errorf("next --json: exit %d %v %s", r.code, j, r.stderr)
	}
}

// TestChainBadReloadKeepsRunningConfig: a reload whose chain names no job
// is rejected, and the running config, chain included, goes on.
func TestChainBadReloadKeepsRunningConfig(t *testing.T) {
	proctest.Long(t, "a daemon reloaded with a bad chain")
	e := newEnv(t)
	dir := e.dir
	e.writeConfig(chainJobs(dir))
	d := e.start(true)
	defer d.stop()
	e.writeConfig(strings.Replace(chainJobs(dir), `on_success = ["child"]`, `on_success = ["child", "nope"]`, 1))
	d.signal(syscall.SIGHUP)
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	if log := d.logText(); !strings.Contains(log, "reload rejected") || !strings.Contains(log, `no [[job]] named \"nope\"`) {
		t.Fatalf("the bad chain's reload was not rejected with its reason:\n%s", log)
	}
	if err := os.WriteFile(filepath.Join(dir, "release.r1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.cli("trigger", "parent", "--payload", "r1", "--json")
	if r.code != 0 {
		t.Fatalf("trigger: exit %d: %s", r.code, r.stderr)
	}
	parent := jsonField(t, r.stdout, "id")
	waitFor(t, "the child of the running config's chain", 20*time.Second, func() bool {
		return len(chainLog(t, filepath.Join(dir, "child.log"), parent)) > 0
	})
}
