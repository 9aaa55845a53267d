package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestClusterOverdue: in a 2-node PostgreSQL cluster, a job that fails
// every 5 s with expect_success_within = "1m" (the shortest window) becomes
// overdue once in the cluster, a minute after the nodes began expecting a
// success: one node makes it so, the other finds it so, and the webhook
// receiver gets one signed `overdue` notification. Both nodes show it in
// `schedulerd jobs` and serve schedulerd_job_overdue 1. A success (the
// job's command succeeds once a marker file exists) ends it: one
// `resolved` notification, and the series is 0 on both nodes.
func TestClusterOverdue(t *testing.T) {
	proctest.Long(t, "a cluster that waits for a job's one-minute window to end")
	h, srv := newHook(t, "k3y")
	dir := t.TempDir()
	secret := writeSecret(t, dir, 0o600)
	marker := filepath.Join(dir, "healthy")
	started := time.Now() // before either node began expecting a success
	c := newClusterWith(t, 2, 4, clusterHeartbeat, clusterInactive,
		func(string) string { return fmt.Sprintf("health_listen = %q", freeAddr(t)) }, fmt.Sprintf(`[[notifier]]
name = "ops"
events = ["overdue", "resolved"]
webhook = %q
secret_file = %q
timeout = "5s"

[[job]]
name = "heartbeat"
schedule = "@every 5s"
shell = 'test -e %s'
retry = { max_attempts = 1 }
expect_success_within = "1m"
notify = ["ops"]
`, srv.URL+"/hook", secret, marker))
	addrs := map[string]string{}
	for _, id := range c.ids() {
		addrs[id] = healthAddr(t, c.node(id).d)
	}
	const series = `schedulerd_job_overdue{job="heartbeat"}`
	overdueOn := func(id string) (jobsSays bool, metric float64) {
		for _, j := range jobLines(t, c, id) {
			if j["name"] == "heartbeat" {
				jobsSays = j["overdue"] == true
			}
		}
		m := metricValues(t, scrapeMetrics(t, addrs[id]))
		v, ok := m[series]
		if !ok {
			t.Fatalf("%s serves no %s: %v", id, series, m)
		}
		return jobsSays, v
	}
	for _, id := range c.ids() {
		if says, v := overdueOn(id); says || v != 0 {
			t.Fatalf("%s right after the start: overdue %v, %s %v", id, says, series, v)
		}
	}

	// The window ends a minute after each node began expecting a success;
	// the scheduled runs fail meanwhile, and do not count.
	waitFor(t, "the overdue notification", 4*time.Minute, func() bool { got, _, _ := h.snapshot(); return len(got) > 0 })
	// (The window is measured by the store's clock, which the nodes read
	// with a small error.)
	if waited := time.Since(started); waited < time.Minute-5*time.Second {
		t.Errorf("overdue %s after the nodes started; the window is 1m", waited)
	}
	failed := 0
	for _, r := range c.runs("heartbeat") {
		switch r.Status {
		case jobs.StatusCompleted:
			t.Fatalf("a run of heartbeat completed before the marker existed: %+v", r)
		case jobs.StatusDeadLetter:
			failed++
		}
	}
	if failed == 0 {
		t.Errorf("no failed run of heartbeat before it became overdue")
	}
	// A node shows the job overdue only once it asked the store, in the
	// transaction that would have written its own notification: when both
	// do, and nothing is left to deliver, the receiver has had every
	// overdue notification there will be.
	for _, id := range c.ids() {
		waitFor(t, id+" showing heartbeat overdue", time.Minute, func() bool { says, v := overdueOn(id); return says && v == 1 })
	}
	if table := c.cli("node-2", "jobs"); table.code != 0 || !strings.Contains(table.stdout, "(OVERDUE)") {
		t.Errorf("schedulerd jobs on node-2: exit %d\n%s%s", table.code, table.stdout, table.stderr)
	}
	waitDelivered(t, c)
	events := wantEvents(t, c, h, "overdue")
	ev := events[0]
	if ev["job"] != "heartbeat" || ev["run_id"] != "" || (ev["node"] != "node-1" && ev["node"] != "node-2") ||
		!strings.Contains(fmt.Sprint(ev["error"]), "no run completed within expect_success_within") || ev["since"] == nil {
		t.Errorf("overdue event %v", ev)
	}
	if made := strings.Count(c.node("node-1").d.logText()+c.node("node-2").d.logText(), "job overdue: no run completed"); made != 1 {
		t.Errorf("%d nodes logged that they made heartbeat overdue; want 1", made)
	}

	// A success ends it, on both nodes.
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.cli("node-1", "trigger", "heartbeat", "--wait"); r.code != 0 {
		t.Fatalf("trigger heartbeat --wait with the marker: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, id := range c.ids() {
		waitFor(t, id+" showing heartbeat no longer overdue", time.Minute, func() bool { says, v := overdueOn(id); return !says && v == 0 })
	}
	waitDelivered(t, c)
	events = wantEvents(t, c, h, "overdue", "resolved")
	if ev := events[1]; ev["job"] != "heartbeat" || ev["run_id"] == "" || ev["since"] == nil {
		t.Errorf("resolved event %v", ev)
	}
}

// jobLines returns `schedulerd jobs --json` of one node.
func jobLines(t *testing.T, c *cluster, id string) []map[string]any {
	t.Helper()
	r := c.cli(id, "jobs", "--json")
	if r.code != 0 {
		t.Fatalf("schedulerd jobs on %s: exit %d, %s", id, r.code, r.stderr)
	}
	return jsonLines(t, r.stdout)
}

// waitDelivered waits until the cluster has no notification left to
// deliver.
func waitDelivered(t *testing.T, c *cluster) {
	t.Helper()
	waitFor(t, "every notification delivered", time.Minute, func() bool {
		ns, err := c.st.NotificationsList(t.Context(), store.NotificationFilter{State: store.NotificationPending})
		return err == nil && len(ns) == 0
	})
}

// wantEvents checks that the store holds exactly the notifications of the
// events want, in order, all delivered, and that the receiver got those
// and no other, each with a good signature; it returns the events
// received, one per notification.
func wantEvents(t *testing.T, c *cluster, h *hook, want ...string) []map[string]any {
	t.Helper()
	ns, err := c.st.NotificationsList(t.Context(), store.NotificationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, n := range ns {
		stored = append(stored, string(n.Event)+" "+string(n.State))
	}
	// The listing is newest first.
	for i, j := 0, len(stored)-1; i < j; i, j = i+1, j-1 {
		stored[i], stored[j] = stored[j], stored[i]
	}
	// A receiver de-duplicates on the id: a delivery whose lease ran out
	// on a busy machine may come twice, and is still one notification.
	all, ids, bad := h.snapshot()
	var (
		got      []map[string]any
		received []string
		seen     = map[string]bool{}
	)
	for i, ev := range all {
		if !seen[ids[i]] {
			seen[ids[i]] = true
			got = append(got, ev)
			received = append(received, fmt.Sprint(ev["event"]))
		}
	}
	var wantStored []string
	for _, w := range want {
		wantStored = append(wantStored, w+" "+string(store.NotificationDelivered))
	}
	if strings.Join(stored, ",") != strings.Join(wantStored, ",") || strings.Join(received, ",") != strings.Join(want, ",") || bad != 0 {
		t.Fatalf("stored notifications %q, received %q with ids %q (%d with a bad signature); want %q once each",
			stored, received, ids, bad, want)
	}
	return got
}
