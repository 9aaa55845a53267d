package dashboard

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestRunPageChain: a run's page lists the runs its end made, a child's
// page links its parent, and a child whose parent was pruned shows the
// parent's id alone.
func TestRunPageChain(t *testing.T) {
	td := startDash(t, func(c *Config) { c.SnapshotTTL = time.Nanosecond })
	ctx := t.Context()
	parent := td.insertRun(t, "backup", "")
	claimed, err := td.st.RunsClaim(ctx, store.ClaimParams{Node: "test-node", Incarnation: "inc",
		Jobs: store.NewJobLimits(map[string]int{"backup": 0}), Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	c := claimed[0]
	tr := jobs.Complete(jobs.Fence{RunID: c.ID, Attempt: c.Attempt, Incarnation: c.Incarnation}, "test-node", jobs.Result{}, time.Now())
	tr.Chain = &jobs.Chain{OnSuccess: []jobs.ChainRun{{Job: "adhoc", Retry: jobs.RetryPolicy{MaxAttempts: 1}}}}
	if _, err := td.st.RunTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	kids, err := td.st.RunChildren(ctx, parent.ID)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children: %v %v", kids, err)
	}
	child := kids[0]
	cookie := td.login(t, readToken)
	page := func(id string) string {
		t.Helper()
		td.snaps.forget()
		r := td.do(t, req{method: "GET", path: "/ui/runs/" + id, cookie: cookie})
		if r.status != http.StatusOK {
			t.Fatalf("run page %s: %d", id, r.status)
		}
		return r.body
	}
	body := page(parent.ID)
	if !strings.Contains(body, `id="children"`) || !strings.Contains(body, `href="/ui/runs/`+child.ID+`"`) || strings.Contains(body, `id="parent-run"`) {
		t.Errorf("the parent's page does not list its child %s:\n%s", child.ID, body)
	}
	body = page(child.ID)
	if !strings.Contains(body, `id="parent-run"`) || !strings.Contains(body, `href="/ui/runs/`+parent.ID+`"`) ||
		!strings.Contains(body, `href="/ui/jobs/backup"`) || strings.Contains(body, `id="children"`) {
		t.Errorf("the child's page does not link its parent %s:\n%s", parent.ID, body)
	}

	if n, err := td.st.RunsPrune(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	body = page(child.ID)
	if !strings.Contains(body, "(pruned)") || !strings.Contains(body, `href="/ui/runs/`+parent.ID+`"`) {
		t.Errorf("the page of a child whose parent was pruned:\n%s", body)
	}
}
