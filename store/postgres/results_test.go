package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestResultFeedAcrossStores: the results of runs ended through one store
// reach the feed of another store on the same database, without a read:
// a batch of 300 jobs, more than one notification holds, arrives whole. A
// listener that connects reports that it may have missed results.
func TestResultFeedAcrossStores(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn, Options{})
	waitListening(t, b)
	ctx := t.Context()
	if _, missed := b.ResultFeed().Take(); !missed {
		t.Fatal("a listener that connected did not report that it may have missed results")
	}

	const n = 300
	names := make([]string, n)
	ps := make([]store.RunInsertParams, n)
	limits := map[string]int{}
	for i := range names {
		names[i] = fmt.Sprintf("job-%03d-%s", i, strings.Repeat("x", 40))
		ps[i] = manual(names[i])
		ps[i].Retry = jobs.RetryPolicy{MaxAttempts: 1}
		limits[names[i]] = 0
	}
	if _, err := a.RunInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claimed, err := a.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(limits), Limit: n, Now: t0})
	if err != nil || len(claimed) != n {
		t.Fatalf("RunsClaim = %d runs, %v", len(claimed), err)
	}
	want := map[string]store.JobResult{}
	ts := make([]jobs.Transition, n)
	for i, r := range claimed {
		at := t0.Add(time.Duration(i+1) * time.Second)
		f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
		if i%3 == 0 {
			ts[i] = jobs.FailAttempt(r, f, "n", jobs.Result{Err: fmt.Errorf("failed")}, jobs.ReasonFailed, at, nil)
			want[r.Job] = store.JobResult{Job: r.Job, LastFailure: at}
		} else {
			ts[i] = jobs.Complete(f, "n", jobs.Result{ExitCode: new(int)}, at)
			want[r.Job] = store.JobResult{Job: r.Job, LastSuccess: at}
		}
	}
	res, err := a.RunTransitionMany(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	ended := make([]*jobs.Run, n)
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ended[i] = r.Run
	}
	if p := resultPayloads(store.ResultsOf(ended)); len(p) < 2 {
		t.Fatalf("the test's batch fits one notification (%d): make it larger", len(p))
	}
	got := map[string]store.JobResult{}
	deadline := time.After(time.Minute)
	for len(got) < n {
		select {
		case <-b.ResultFeed().Changed():
		case <-deadline:
			t.Fatalf("the other store's feed brought %d of %d results", len(got), n)
		}
		rs, missed := b.ResultFeed().Take()
		if missed {
			t.Fatal("the feed reported missed results while its listener was connected")
		}
		for _, r := range rs {
			got[r.Job] = r
		}
	}
	for job, w := range want {
		if g := got[job]; !g.LastSuccess.Equal(w.LastSuccess) || !g.LastFailure.Equal(w.LastFailure) {
			t.Fatalf("%s: the feed brought %+v, want %+v", job, g, w)
		}
	}
}

// TestResultPayloads: results are encoded in notifications of at most
// maxResultsPayload bytes, which decode to the same results; a result too
// large for one is sent as a mark that makes the listeners read them all.
func TestResultPayloads(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	var rs []store.JobResult
	for i := range 500 {
		rs = append(rs, store.JobResult{Job: fmt.Sprintf("job \"%d\" \n ünïcode", i), LastSuccess: at.Add(time.Duration(i) * time.Microsecond)})
	}
	rs = append(rs, store.JobResult{Job: strings.Repeat("y", maxResultsPayload), LastFailure: at})
	rs = append(rs, store.JobResult{Job: "last", LastFailure: at, LastSuccess: at.Add(-time.Hour)})
	payloads := resultPayloads(rs)
	var got []store.JobResult
	lost := 0
	for _, p := range payloads {
		if len(p) > maxResultsPayload {
			t.Fatalf("a payload of %d bytes", len(p))
		}
		part, l := readPayload(p)
		if l {
			lost++
		}
		got = append(got, part...)
	}
	if lost != 1 || len(got) != len(rs)-1 {
		t.Fatalf("%d payloads: %d results and %d marks, want %d and 1", len(payloads), len(got), lost, len(rs)-1)
	}
	for i, r := range append(rs[:500], rs[501]) {
		if g := got[i]; g.Job != r.Job || !g.LastSuccess.Equal(r.LastSuccess) || !g.LastFailure.Equal(r.LastFailure) {
			t.Fatalf("result %d: %+v, want %+v", i, g, r)
		}
	}
	if _, l := readPayload("not json"); !l {
		t.Fatal("an unreadable payload did not count as missed results")
	}
}
