package control

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// jobClient is a client of the socket at path acting as attempt attempt
// of run runID, with the fake engine's token for it.
func jobClient(path, runID string, attempt int) *Client {
	c := NewClient(path)
	c.SetAttemptToken(attempt, fakeAttemptToken(runID, attempt))
	return c
}

// TestAttemptTokens: progress is taken only with the token of the attempt
// it reports, and a token acts on the progress and cancel of its own run
// and nothing else; a request without a token is the caller's own, as
// before.
func TestAttemptTokens(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	mine := insertRun(t, ts.st, "backup", "")
	if rs := claim(t, ts.st, "backup"); len(rs) != 1 || rs[0].ID != mine.ID {
		t.Fatalf("claim: %v", rs)
	}
	other, err := ts.c.Trigger(ctx, "adhoc", TriggerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	job := jobClient(ts.Path(), mine.ID, 1)
	forged := NewClient(ts.Path())
	forged.SetAttemptToken(1, fakeAttemptToken(other.ID, 1)) // another run's token

	denied := func(what string, err error, want string) {
		t.Helper()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !errors.Is(err, ErrPermissionDenied) || !strings.Contains(ae.Message, want) {
			t.Errorf("%s: %v, want 403 permission denied saying %q", what, err, want)
		}
	}
	p := ProgressRequest{Attempt: 1, Percent: 30, Message: "a third"}
	denied("progress without a token", ts.c.Progress(ctx, mine.ID, p), "progress needs the attempt's token")
	denied("progress with another run's token", forged.Progress(ctx, mine.ID, p), "not one that this daemon gave")
	denied("progress of another run", job.Progress(ctx, other.ID, p), "not one that this daemon gave")
	denied("progress of another attempt", job.Progress(ctx, mine.ID, ProgressRequest{Attempt: 2, Percent: 1}), "is that of attempt 1, not 2")
	_, err = job.Cancel(ctx, other.ID)
	denied("cancel of another run", err, "not one that this daemon gave")
	_, err = job.Trigger(ctx, "adhoc", TriggerRequest{})
	denied("trigger with a token", err, "acts only on the progress and cancel of its own run")
	_, err = job.Runs(ctx, RunsQuery{})
	denied("listing with a token", err, "acts only on the progress and cancel of its own run")
	if got := ts.eng.Calls(); len(got) != 1 { // the trigger of other
		t.Errorf("refused requests reached the engine: %v", got)
	}

	if err := job.Progress(ctx, mine.ID, p); err != nil {
		t.Fatalf("progress with the attempt's token: %v", err)
	}
	if r, err := ts.c.Run(ctx, mine.ID); err != nil || r.Progress != 30 {
		t.Fatalf("progress not recorded: %+v, %v", r, err)
	}
	if _, err := job.Cancel(ctx, mine.ID); err != nil {
		t.Fatalf("cancel of its own run with its token: %v", err)
	}
	if _, err := ts.c.Cancel(ctx, other.ID); err != nil {
		t.Fatalf("cancel without a token, as the daemon's user: %v", err)
	}
}
