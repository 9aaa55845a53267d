package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

func syncExpectations(t *testing.T, s store.Store, p store.ExpectationsSyncParams) []*store.Expectation {
	t.Helper()
	es, err := s.ExpectationsSync(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// describeExpectations writes expectations one a line: job, window,
// notifiers and since.
func describeExpectations(es []*store.Expectation) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s %s %v %s\n", e.Job, e.Within, e.Notify, e.Since.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// testExpectations: a node writes the expectations of the jobs it
// declares with expect_success_within; a row written again takes the new
// window and notifiers and keeps when the cluster first expected the job;
// a row the node deletes (the job declared without the key) is gone, and
// the rows of jobs the node does not name (retired, or another node's)
// stay. Every sync returns them all, sorted by job.
func testExpectations(t *testing.T, s store.Store) {
	put := func(job string, within time.Duration, notify ...string) store.Expectation {
		return store.Expectation{Job: job, Within: within, Notify: notify}
	}
	got := syncExpectations(t, s, store.ExpectationsSyncParams{
		Put: []store.Expectation{put("nightly", 26*time.Hour, "ops"), put("backup", time.Hour)}, Now: t0})
	want := "backup 1h0m0s [] 2026-03-01T12:00:00Z\nnightly 26h0m0s [ops] 2026-03-01T12:00:00Z\n"
	if d := describeExpectations(got); d != want {
		t.Fatalf("first sync:\n%s\nwant\n%s", d, want)
	}
	// A later start of the node, and another node's: since is kept.
	got = syncExpectations(t, s, store.ExpectationsSyncParams{
		Put: []store.Expectation{put("nightly", 2*time.Hour, "ops", "chat")}, Now: t0.Add(time.Hour)})
	want = "backup 1h0m0s [] 2026-03-01T12:00:00Z\nnightly 2h0m0s [ops chat] 2026-03-01T12:00:00Z\n"
	if d := describeExpectations(got); d != want {
		t.Fatalf("sync again:\n%s\nwant\n%s", d, want)
	}
	got = syncExpectations(t, s, store.ExpectationsSyncParams{
		Put: []store.Expectation{put("weekly", 200*time.Hour)}, Delete: []string{"backup", "never-expected"}, Now: t0.Add(2 * time.Hour)})
	want = "nightly 2h0m0s [ops chat] 2026-03-01T12:00:00Z\nweekly 200h0m0s [] 2026-03-01T14:00:00Z\n"
	if d := describeExpectations(got); d != want {
		t.Fatalf("sync that deletes backup:\n%s\nwant\n%s", d, want)
	}
	// Deleted and made again, an expectation starts anew.
	syncExpectations(t, s, store.ExpectationsSyncParams{Put: []store.Expectation{put("backup", time.Hour)}, Now: t0.Add(3 * time.Hour)})
	list, err := s.ExpectationsList(t.Context(), []string{"backup", "weekly", "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	want = "backup 1h0m0s [] 2026-03-01T15:00:00Z\nweekly 200h0m0s [] 2026-03-01T14:00:00Z\n"
	if d := describeExpectations(list); d != want {
		t.Fatalf("list:\n%s\nwant\n%s", d, want)
	}
	if list, err := s.ExpectationsList(t.Context(), []string{}); err != nil || len(list) != 0 {
		t.Fatalf("list of no names: %v, %v", list, err)
	}
	list, err = s.ExpectationsList(t.Context(), nil)
	want = "backup 1h0m0s [] 2026-03-01T15:00:00Z\nnightly 2h0m0s [ops chat] 2026-03-01T12:00:00Z\nweekly 200h0m0s [] 2026-03-01T14:00:00Z\n"
	if d := describeExpectations(list); err != nil || d != want {
		t.Fatalf("list of all: %v\n%s\nwant\n%s", err, d, want)
	}
}

// testExpectationForget: a retired job (no node declares it) becomes
// overdue only while its expectation is kept; forgetting it deletes the
// expectation and ends the overdue state, telling no one, and a node that
// asks afterwards to make it overdue is told it is not expected
// (ErrNotFound) and writes nothing. Forgetting what is not expected is
// ErrNotFound.
func testExpectationForget(t *testing.T, s store.Store) {
	ctx := t.Context()
	syncExpectations(t, s, store.ExpectationsSyncParams{
		Put: []store.Expectation{{Job: "retired", Within: time.Hour, Notify: []string{"ops"}}}, Now: t0})
	p := store.JobOverdueParams{Job: "retired", Within: time.Hour, Since: t0, Notify: []jobs.NotifyTarget{opsTarget},
		Node: nodeA, Now: t0.Add(time.Hour), Retired: true}
	st, made, err := s.JobOverdue(ctx, p)
	if err != nil || !made || st.OverdueSince.IsZero() {
		t.Fatalf("a retired job still expected: made %t, %+v, %v", made, st, err)
	}
	wantNotifications(t, s, "retired", "ops retired overdue pending")
	if err := s.ExpectationForget(ctx, "retired"); err != nil {
		t.Fatal(err)
	}
	states, err := s.JobNotifyStates(ctx, []string{"retired"})
	if err != nil {
		t.Fatal(err)
	}
	if st := states["retired"]; st != nil && (st.Troubled() || len(st.Told) > 0) {
		t.Fatalf("forgotten, the job is still troubled: %+v", st)
	}
	if es, err := s.ExpectationsList(ctx, []string{"retired"}); err != nil || len(es) != 0 {
		t.Fatalf("forgotten, the expectation is still kept: %v, %v", es, err)
	}
	wantNotifications(t, s, "retired", "ops retired overdue pending")
	p.Node, p.Now = nodeB, t0.Add(2*time.Hour)
	if _, made, err := s.JobOverdue(ctx, p); !errors.Is(err, store.ErrNotFound) || made {
		t.Fatalf("a forgotten job made overdue: made %t, %v", made, err)
	}
	wantNotifications(t, s, "retired", "ops retired overdue pending")
	if err := s.ExpectationForget(ctx, "retired"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("forget twice: %v, want ErrNotFound", err)
	}

	// A job that fails stays failing when its expectation is forgotten:
	// the notifiers told of the failure are not told again.
	syncExpectations(t, s, store.ExpectationsSyncParams{Put: []store.Expectation{{Job: "flaky", Within: time.Hour}}, Now: t0})
	runOnce(t, s, "flaky", t0, false, opsTarget)
	if err := s.ExpectationForget(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	states, err = s.JobNotifyStates(ctx, []string{"flaky"})
	if err != nil || states["flaky"].FailingSince.IsZero() || states["flaky"].Told["ops"].IsZero() {
		t.Fatalf("a failing job forgotten: %+v, %v", states["flaky"], err)
	}
}
