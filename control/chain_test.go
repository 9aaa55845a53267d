package control

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/schedulerd/schedulerd/jobs"
)

// TestRunChildren: a run of a chain shows its parent_run_id, and GET
// /v1/runs/{id}/children lists the runs a run's end made: none for a run
// that made none, 404 for no run.
func TestRunChildren(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	parent := insertRun(t, ts.st, "backup", "")
	claimed := claim(t, ts.st, "backup")[0]
	f := jobs.Fence{RunID: claimed.ID, Attempt: claimed.Attempt, Incarnation: claimed.Incarnation}
	tr := jobs.Complete(f, "test-node", jobs.Result{}, claimed.StartedAt)
	tr.Chain = &jobs.Chain{OnSuccess: []jobs.ChainRun{{Job: "adhoc", Retry: jobs.RetryPolicy{MaxAttempts: 1}}}}
	if _, err := ts.st.RunTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	kids, err := ts.c.Children(ctx, parent.ID)
	if err != nil || len(kids) != 1 || kids[0].Job != "adhoc" || kids[0].ParentRunID != parent.ID || kids[0].Trigger != jobs.TriggerChain {
		t.Fatalf("Children: %+v %v", kids, err)
	}
	got, err := ts.c.Run(ctx, kids[0].ID)
	if err != nil || got.ParentRunID != parent.ID {
		t.Fatalf("Run of the child: %+v %v", got, err)
	}
	resp, err := rawClient(ts.Path()).Get("http://schedulerd/v1/runs/" + parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, ok := raw["parent_run_id"]; !ok || v != "" {
		t.Errorf("a parent's parent_run_id: %v, %v; want \"\"", v, ok)
	}
	if none, err := ts.c.Children(ctx, kids[0].ID); err != nil || len(none) != 0 {
		t.Fatalf("Children of the child: %+v %v", none, err)
	}
	if _, err := ts.c.Children(ctx, "no-such-run"); !errors.Is(err, ErrUnknownRun) {
		t.Fatalf("Children of no run: %v, want not found", err)
	}
}
