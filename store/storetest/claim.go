package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testClaimWindow: a run is claimed from its not_before and not from its not_after.
func testClaimWindow(t *testing.T, s store.Store) {
	p := manual("late", t0)
	p.NotBefore = t0.Add(10 * time.Minute)
	late := mustInsert(t, s, p)
	p = manual("bounded", t0)
	p.NotAfter = t0.Add(5 * time.Minute)
	bounded := mustInsert(t, s, p)
	jobsOf := map[string]int{"late": 0, "bounded": 0}

	// Due (the caller expects due runs) changes nothing a claim takes.
	claim := func(at time.Time, due bool) []*jobs.Run {
		return mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(jobsOf), Limit: 10, Now: at, Due: due})
	}
	for _, due := range []bool{false, true} {
		if runs := claim(t0.Add(10*time.Minute-time.Second), due); len(runs) != 0 {
			// bounded is past its not_after (t0+5m) and late is not yet due.
			t.Fatalf("claimed %d runs before not_before and after not_after (due %v)", len(runs), due)
		}
	}
	runs := claim(t0.Add(10*time.Minute), true)
	if len(runs) != 1 || runs[0].ID != late.ID {
		t.Fatalf("claim at not_before: %v", ids(runs))
	}
	if got := mustGet(t, s, bounded.ID); got.Status != jobs.StatusPending {
		t.Fatalf("run past not_after is %s", got.Status)
	}

	// Exactly at not_after is too late; just before is in time.
	p = manual("edge", t0)
	p.NotAfter = t0.Add(time.Minute)
	mustInsert(t, s, p)
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"edge": 0}),
		Limit: 1, Now: t0.Add(time.Minute)}); len(runs) != 0 {
		t.Fatal("claimed a run at its not_after")
	}
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"edge": 0}),
		Limit: 1, Now: t0.Add(time.Minute - time.Second)}); len(runs) != 1 {
		t.Fatal("did not claim a run before its not_after")
	}
}

// testClaimDeclaredJobsAndLimit: only declared jobs, at most Limit, in not_before order.
func testClaimDeclaredJobsAndLimit(t *testing.T, s store.Store) {
	// Made in reverse order of not_before.
	var want []string
	for i := 5; i >= 1; i-- {
		p := manual("etl", t0)
		p.NotBefore = t0.Add(time.Duration(i) * time.Second)
		want = append([]string{mustInsert(t, s, p).ID}, want...)
	}
	mustInsert(t, s, manual("undeclared", t0))

	at := t0.Add(time.Minute)
	runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"etl": 0, "other": 0}), Limit: 2, Now: at})
	if got := ids(runs); fmt.Sprint(got) != fmt.Sprint(want[:2]) {
		t.Fatalf("first claim = %v, want %v", got, want[:2])
	}
	for _, r := range runs {
		if r.Status != jobs.StatusRunning || r.Attempt != 1 || r.Node != nodeB || r.Incarnation != incA ||
			!r.StartedAt.Equal(at) || r.Reason != jobs.ReasonClaimed {
			t.Fatalf("claimed run: %+v", r)
		}
	}
	runs = mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"etl": 0}), Limit: 10, Now: at})
	if got := ids(runs); fmt.Sprint(got) != fmt.Sprint(want[2:]) {
		t.Fatalf("second claim = %v, want %v", got, want[2:])
	}
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"etl": 0}), Limit: 10, Now: at}); len(runs) != 0 {
		t.Fatalf("third claim got %d runs", len(runs))
	}
	undeclared := listRuns(t, s, "undeclared")
	if len(undeclared) != 1 || undeclared[0].Status != jobs.StatusPending {
		t.Fatalf("undeclared job's run: %+v", undeclared)
	}
	// Across jobs, runs start in not_before order too.
	var order []string
	for i := range 4 {
		job := []string{"left", "right"}[i%2]
		p := manual(job, t0)
		p.NotBefore = t0.Add(time.Duration(10-i) * time.Second)
		order = append([]string{mustInsert(t, s, p).ID}, order...)
	}
	runs = mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"left": 0, "right": 0}), Limit: 3, Now: at})
	if got := ids(runs); fmt.Sprint(got) != fmt.Sprint(order[:3]) {
		t.Fatalf("claim across jobs = %v, want %v", got, order[:3])
	}
	// A claim with no jobs or no room claims nothing.
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"undeclared": 0}), Limit: 0, Now: at}); len(runs) != 0 {
		t.Fatal("Limit 0 claimed runs")
	}
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incA, Limit: 5, Now: at}); len(runs) != 0 {
		t.Fatal("no declared jobs claimed runs")
	}
}

// testClaimConcurrencyLimit: a job's limit counts its running runs across claims and nodes.
func testClaimConcurrencyLimit(t *testing.T, s store.Store) {
	for i := range 3 {
		mustInsert(t, s, manual("single", t0.Add(time.Duration(i)*time.Second)))
		mustInsert(t, s, manual("pair", t0.Add(time.Duration(i)*time.Second)))
		mustInsert(t, s, manual("free", t0.Add(time.Duration(i)*time.Second)))
	}
	limits := map[string]int{"single": 1, "pair": 2, "free": 0}
	at := t0.Add(time.Minute)
	count := func(runs []*jobs.Run) map[string]int {
		m := map[string]int{}
		for _, r := range runs {
			m[r.Job]++
		}
		return m
	}
	first := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 100, Now: at})
	if c := count(first); c["single"] != 1 || c["pair"] != 2 || c["free"] != 3 {
		t.Fatalf("first claim per job: %v", c)
	}
	// Another node sees the same limits.
	if second := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: store.NewJobLimits(limits), Limit: 100, Now: at}); len(second) != 0 {
		t.Fatalf("second claim: %v", count(second))
	}
	for _, r := range first {
		if r.Job == "single" {
			complete(t, s, r, at.Add(time.Second))
		}
	}
	third := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: store.NewJobLimits(limits), Limit: 100, Now: at.Add(2 * time.Second)})
	if c := count(third); c["single"] != 1 || len(third) != 1 {
		t.Fatalf("claim after one finished: %v", c)
	}
}

// testClaimBacklog: a long backlog of a job at its limit does not hide
// other jobs' due runs.
func testClaimBacklog(t *testing.T, s store.Store) {
	for i := range 60 {
		mustInsert(t, s, manual("busy", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	p := manual("quiet", t0.Add(time.Second))
	quiet := mustInsert(t, s, p)
	limits := map[string]int{"busy": 1, "quiet": 0}
	runs := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 2, Now: t0.Add(time.Minute)})
	if len(runs) != 2 || runs[0].Job != "busy" || runs[1].ID != quiet.ID {
		t.Fatalf("claim over a backlog: %v", ids(runs))
	}
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 2, Now: t0.Add(time.Minute)}); len(runs) != 0 {
		t.Fatalf("claim at the limit: %v", ids(runs))
	}
}

// testClaimConcurrent: nodes claiming at once never claim one run twice.
func testClaimConcurrent(t *testing.T, s store.Store) {
	const runs, nodes = 60, 8
	for i := range runs {
		mustInsert(t, s, manual("batch", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed = map[string]string{}
	)
	for n := range nodes {
		wg.Go(func() {
			inc := fmt.Sprintf("inc-%d", n)
			for {
				got, err := s.RunsClaim(t.Context(), store.ClaimParams{Node: fmt.Sprintf("node-%d", n), Incarnation: inc,
					Jobs: store.NewJobLimits(map[string]int{"batch": 0}), Limit: 3, Now: t0.Add(time.Minute)})
				if err != nil {
					t.Errorf("RunsClaim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					if prev, dup := claimed[r.ID]; dup {
						t.Errorf("run %s claimed by %s and %s", r.ID, prev, inc)
					}
					claimed[r.ID] = inc
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != runs {
		t.Fatalf("%d runs claimed, want %d", len(claimed), runs)
	}
	for _, r := range listRuns(t, s, "batch") {
		if r.Status != jobs.StatusRunning || r.Attempt != 1 || r.Incarnation != claimed[r.ID] {
			t.Fatalf("run after concurrent claims: %+v (claimed by %s)", r, claimed[r.ID])
		}
	}
}

func ids(runs []*jobs.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// testClaimReturnsStored: a claim returns each run exactly as the store
// then holds it, for a retrying run and a pending one claimed together,
// and writes the event and the attempt of each.
func testClaimReturnsStored(t *testing.T, s store.Store) {
	p := manual("mixed", t0)
	p.Payload = "payload"
	p.DedupID = "dedup"
	first := mustInsert(t, s, p)
	run := claimOne(t, s, "mixed", incA, t0)
	if err := s.RunProgress(t.Context(), fenceOf(run), 40, "half"); err != nil {
		t.Fatal(err)
	}
	retrying := fail(t, s, run, t0.Add(time.Second))
	wantStatus(t, retrying, jobs.StatusRetrying, jobs.ReasonFailed)
	fresh := mustInsert(t, s, manual("mixed", t0.Add(2*time.Second)))

	at := retrying.NotBefore.Add(time.Minute)
	claimed := mustClaim(t, s, store.ClaimParams{Node: nodeB, Incarnation: incB, Jobs: store.NewJobLimits(map[string]int{"mixed": 2}), Limit: 5, Now: at})
	if got := ids(claimed); fmt.Sprint(got) != fmt.Sprint([]string{first.ID, fresh.ID}) &&
		fmt.Sprint(got) != fmt.Sprint([]string{fresh.ID, first.ID}) {
		t.Fatalf("claimed %v, want %s and %s", got, first.ID, fresh.ID)
	}
	for _, r := range claimed {
		stored := mustGet(t, s, r.ID)
		if fmt.Sprintf("%+v", r) != fmt.Sprintf("%+v", stored) {
			t.Fatalf("claim returned\n %+v\nthe store holds\n %+v", r, stored)
		}
		want := 1
		from := jobs.StatusPending
		if r.ID == first.ID {
			want, from = 2, jobs.StatusRetrying
		}
		if r.Status != jobs.StatusRunning || r.Attempt != want || r.Node != nodeB || r.Incarnation != incB ||
			!r.StartedAt.Equal(at) || r.Reason != jobs.ReasonClaimed || r.Error != "" || r.ExitCode != nil ||
			r.Progress != 0 || r.ProgressMessage != "" || r.CancelRequested {
			t.Fatalf("claimed run: %+v", r)
		}
		evs := mustEvents(t, s, r.ID)
		last := evs[len(evs)-1]
		if last.From != from || last.To != jobs.StatusRunning || last.Reason != jobs.ReasonClaimed ||
			last.Attempt != want || last.Node != nodeB || !last.Time.Equal(at) {
			t.Fatalf("claim event of %s: %+v", r.ID, last)
		}
		attempts, err := s.RunAttempts(t.Context(), r.ID)
		if err != nil || len(attempts) != want {
			t.Fatalf("RunAttempts(%s) = %d, %v; want %d", r.ID, len(attempts), err, want)
		}
		if a := attempts[want-1]; a.Number != want || a.Status != jobs.StatusRunning || a.Incarnation != incB ||
			!a.StartedAt.Equal(at) || !a.FinishedAt.IsZero() {
			t.Fatalf("attempt %d of %s: %+v", want, r.ID, a)
		}
	}
}

// testClaimPastTheScan: due runs that a claim cannot take (of undeclared
// jobs, of a job at its limit) ahead of many more than store.DueScan in
// start order do not hide a declared job's due run, from the claim or from
// RunsNextDue.
func testClaimPastTheScan(t *testing.T, s store.Store) {
	ctx := t.Context()
	ahead := store.DueScan(1) + 300
	names := make([]string, ahead)
	for i := range names {
		names[i] = "other"
		if i%2 == 0 {
			names[i] = "busy"
		}
	}
	InsertBacklog(t, s, t0, names...)
	late := manual("quiet", t0.Add(time.Hour))
	quiet := mustInsert(t, s, late)
	limits := map[string]int{"busy": 1, "quiet": 0}

	next, err := s.RunsNextDue(ctx, []string{"quiet"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "next due behind other jobs' runs", next, t0.Add(time.Hour))

	at := t0.Add(2 * time.Hour)
	busy := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(map[string]int{"busy": 1}), Limit: 1, Now: at})
	if len(busy) != 1 || busy[0].Job != "busy" {
		t.Fatalf("claim of busy: %v", ids(busy))
	}
	runs := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 1, Now: at})
	if len(runs) != 1 || runs[0].ID != quiet.ID {
		t.Fatalf("claim past %d runs it cannot take = %v, want [%s]", ahead, ids(runs), quiet.ID)
	}
	if runs := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 1, Now: at}); len(runs) != 0 {
		t.Fatalf("claim with busy at its limit: %v", ids(runs))
	}
}

// testClaimFirstJobAtLimit: when the job of the first due run is at its
// limit, a claim of one run takes the next job's.
func testClaimFirstJobAtLimit(t *testing.T, s store.Store) {
	for i := range 2 {
		mustInsert(t, s, manual("single", t0.Add(time.Duration(i)*time.Second)))
	}
	next := mustInsert(t, s, manual("next", t0.Add(time.Minute)))
	limits := map[string]int{"single": 1, "next": 0}
	at := t0.Add(time.Hour)
	first := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 1, Now: at})
	if len(first) != 1 || first[0].Job != "single" {
		t.Fatalf("first claim: %v", ids(first))
	}
	second := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA, Jobs: store.NewJobLimits(limits), Limit: 1, Now: at})
	if len(second) != 1 || second[0].ID != next.ID {
		t.Fatalf("claim with the first due run's job at its limit = %v, want [%s]", ids(second), next.ID)
	}
}

// testClaimOrderAcrossJobs: a claim takes the due runs in start order
// (not_before, then creation) across jobs: a job with many due runs does
// not take the slots past a run of another job that comes first. On
// PostgreSQL the claim counted whole jobs of the first due runs and took
// both of one job's runs over another's older run (found by the
// simulator).
func testClaimOrderAcrossJobs(t *testing.T, s store.Store) {
	now := t0.Add(time.Minute)
	for _, p := range []store.RunInsertParams{
		manual("bravo", t0.Add(7*time.Second)), manual("bravo", t0.Add(14*time.Second)),
		manual("charlie", t0.Add(7566*time.Millisecond)),
	} {
		p.Now = now
		mustInsert(t, s, p)
	}
	got := mustClaim(t, s, store.ClaimParams{Node: nodeA, Incarnation: incA,
		Jobs: store.NewJobLimits(map[string]int{"alpha": 0, "bravo": 0, "charlie": 1}), Limit: 2, Now: now})
	var desc []string
	for _, r := range got {
		desc = append(desc, r.Job+"@"+r.NotBefore.UTC().Format("15:04:05.000"))
	}
	slices.Sort(desc)
	if want := []string{"bravo@12:00:07.000", "charlie@12:00:07.566"}; !slices.Equal(desc, want) {
		t.Fatalf("claimed %v, want %v", desc, want)
	}
}
