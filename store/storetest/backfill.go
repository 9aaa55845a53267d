package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// minutes returns the n ticks of an every-minute schedule from t0 on.
func minutes(n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = t0.Add(time.Duration(i) * time.Minute)
	}
	return out
}

// backfillRuns describes the backfill runs of job at ticks, due at now.
func backfillRuns(job string, ticks []time.Time, now time.Time) []store.RunInsertParams {
	out := make([]store.RunInsertParams, len(ticks))
	for i, at := range ticks {
		out[i] = store.RunInsertParams{Job: job, Trigger: jobs.TriggerBackfill, ScheduledAt: at, NotBefore: now,
			Retry: retry3, Node: nodeA, Now: now}
	}
	return out
}

func mustCreateBackfill(t *testing.T, s store.Store, job string, ticks []time.Time, maxParallel int, now time.Time) *store.Backfill {
	t.Helper()
	b, err := s.BackfillCreate(t.Context(), store.BackfillCreateParams{Job: job, From: ticks[0], To: ticks[len(ticks)-1],
		Next: ticks[0], MaxParallel: maxParallel, Actor: "socket:ops", Node: nodeA, Now: now})
	if err != nil {
		t.Fatalf("BackfillCreate: %v", err)
	}
	return b
}

func mustAdvance(t *testing.T, s store.Store, b *store.Backfill, ticks []time.Time, now time.Time) *store.BackfillAdvanceResult {
	t.Helper()
	res, err := s.BackfillAdvance(t.Context(), store.BackfillAdvanceParams{ID: b.ID, Expect: b.Next,
		Runs: backfillRuns(b.Job, ticks, now), Now: now})
	if err != nil {
		t.Fatalf("BackfillAdvance: %v", err)
	}
	return res
}

// A backfill makes runs only for the ticks that have none, whoever made
// theirs: the scheduler, or an earlier backfill; and the scheduler makes
// none for a tick a backfill made.
func testBackfillSkipsTaken(t *testing.T, s store.Store) {
	ticks := minutes(5)
	now := t0.Add(time.Hour)
	res := mustFire(t, s, store.FireParams{Job: "etl", Cursor: ticks[1], Runs: []store.RunInsertParams{tick("etl", ticks[1])},
		Overlap: jobs.OverlapAllow, Node: nodeA, Now: ticks[1]})
	if len(res.Created) != 1 {
		t.Fatalf("fire made %d runs, want 1", len(res.Created))
	}
	fired := res.Created[0]

	b := mustCreateBackfill(t, s, "etl", ticks, 0, now)
	if b.ID == "" || b.Done() || !b.Next.Equal(ticks[0]) || b.MaxParallel != 0 || b.Actor != "socket:ops" {
		t.Fatalf("created backfill: %+v", b)
	}
	adv := mustAdvance(t, s, b, ticks, now)
	if !adv.Advanced || len(adv.Created) != 4 || adv.Skipped != 1 {
		t.Fatalf("advance: advanced %v, created %d, skipped %d; want true, 4, 1", adv.Advanced, len(adv.Created), adv.Skipped)
	}
	if !adv.Backfill.Done() || adv.Backfill.Created != 4 || adv.Backfill.Skipped != 1 || adv.Backfill.DoneAt.IsZero() {
		t.Fatalf("backfill after: %+v", adv.Backfill)
	}
	for i, r := range adv.Created {
		want := ticks[i]
		if i >= 1 {
			want = ticks[i+1]
		}
		if r.Trigger != jobs.TriggerBackfill || !r.ScheduledAt.Equal(want) || r.Status != jobs.StatusPending || !r.NotBefore.Equal(now) {
			t.Fatalf("run %d: trigger %s, tick %s, status %s, not_before %s", i, r.Trigger, r.ScheduledAt, r.Status, r.NotBefore)
		}
	}
	occ, err := s.OccurrenceRuns(t.Context(), "etl", ticks[0], ticks[4])
	if err != nil || len(occ) != 5 || occ[ticks[1].UnixMicro()] != fired.ID || occ[ticks[0].UnixMicro()] != adv.Created[0].ID {
		t.Fatalf("OccurrenceRuns = %v, %v", occ, err)
	}
	if active, err := s.BackfillsActive(t.Context(), []string{"etl"}); err != nil || len(active) != 0 {
		t.Fatalf("BackfillsActive after it ended = %d, %v; want none", len(active), err)
	}

	// Again: every tick has its run.
	again := mustCreateBackfill(t, s, "etl", ticks, 0, now.Add(time.Minute))
	adv = mustAdvance(t, s, again, ticks, now.Add(time.Minute))
	if len(adv.Created) != 0 || adv.Skipped != 5 || !adv.Backfill.Done() {
		t.Fatalf("repeated backfill: created %d, skipped %d, done %v", len(adv.Created), adv.Skipped, adv.Backfill.Done())
	}
	// The scheduler, firing a backfilled tick, makes nothing.
	res = mustFire(t, s, store.FireParams{Job: "etl", Expect: ticks[1], Cursor: ticks[2],
		Runs: []store.RunInsertParams{tick("etl", ticks[2])}, Overlap: jobs.OverlapAllow, Node: nodeA, Now: now})
	if len(res.Created) != 0 || res.Duplicates != 1 {
		t.Fatalf("fire of a backfilled tick: created %d, duplicates %d", len(res.Created), res.Duplicates)
	}
	if n := len(listRuns(t, s, "etl")); n != 5 {
		t.Fatalf("runs of etl: %d, want 5", n)
	}
	// A one-off insert of a backfilled tick is a duplicate too.
	if _, err := s.RunInsert(t.Context(), backfillRuns("etl", ticks[:1], now)[0]); err == nil {
		t.Fatal("RunInsert of a backfilled tick succeeded")
	}
}

// Backfills of one range advanced at once make one run per tick.
func testBackfillConcurrent(t *testing.T, s store.Store) {
	ticks := minutes(40)
	now := t0.Add(time.Hour)
	var bs []*store.Backfill
	for range 4 {
		bs = append(bs, mustCreateBackfill(t, s, "etl", ticks, 0, now))
	}
	// Each backfill is advanced twice at once: one advance wins its
	// compare-and-set, and the backfills race for each tick.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]int{}
	errs := make(chan error, len(bs)*2)
	for _, b := range bs {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.BackfillAdvance(t.Context(), store.BackfillAdvanceParams{ID: b.ID, Expect: b.Next,
					Runs: backfillRuns("etl", ticks, now), Now: now})
				if err != nil {
					errs <- err
					return
				}
				if res.Advanced {
					mu.Lock()
					won[b.ID]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("BackfillAdvance: %v", err)
	}
	for _, b := range bs {
		if won[b.ID] != 1 {
			t.Fatalf("backfill %s advanced %d times from one Next, want once", b.ID, won[b.ID])
		}
	}
	runs := listRuns(t, s, "etl")
	seen := map[int64]int{}
	for _, r := range runs {
		seen[r.ScheduledAt.UnixMicro()]++
	}
	if len(runs) != len(ticks) || len(seen) != len(ticks) {
		t.Fatalf("%d runs of %d distinct ticks, want %d of %d", len(runs), len(seen), len(ticks), len(ticks))
	}
}

// A backfill with max parallel N keeps at most N of its runs active, and
// makes the next as they end; its advance is a compare-and-set.
func testBackfillMaxParallel(t *testing.T, s store.Store) {
	ticks := minutes(5)
	now := t0.Add(time.Hour)
	b := mustCreateBackfill(t, s, "etl", ticks, 2, now)
	adv := mustAdvance(t, s, b, ticks, now)
	if len(adv.Created) != 2 || !adv.Backfill.Next.Equal(ticks[2]) || adv.Backfill.Done() {
		t.Fatalf("first advance: created %d, next %s", len(adv.Created), adv.Backfill.Next)
	}
	// A stale advance changes nothing.
	stale, err := s.BackfillAdvance(t.Context(), store.BackfillAdvanceParams{ID: b.ID, Expect: ticks[0],
		Runs: backfillRuns("etl", ticks, now), Now: now})
	if err != nil || stale.Advanced || !stale.Backfill.Next.Equal(ticks[2]) {
		t.Fatalf("stale advance: %+v, %v", stale, err)
	}
	// No room: nothing made, the next tick stays.
	b = adv.Backfill
	adv = mustAdvance(t, s, b, ticks[2:], now)
	if !adv.Advanced || len(adv.Created) != 0 || !adv.Backfill.Next.Equal(ticks[2]) {
		t.Fatalf("advance with no room: created %d, next %s", len(adv.Created), adv.Backfill.Next)
	}
	if active, err := s.BackfillsActive(t.Context(), []string{"etl", "other"}); err != nil || len(active) != 1 || active[0].ID != b.ID {
		t.Fatalf("BackfillsActive = %v, %v", active, err)
	}
	// A running run still counts; a finished one does not.
	r := claimOne(t, s, "etl", incB, now.Add(time.Second))
	adv = mustAdvance(t, s, b, ticks[2:], now.Add(2*time.Second))
	if len(adv.Created) != 0 {
		t.Fatalf("advance while both run or wait: created %d", len(adv.Created))
	}
	complete(t, s, r, now.Add(3*time.Second))
	adv = mustAdvance(t, s, b, ticks[2:], now.Add(4*time.Second))
	if len(adv.Created) != 1 || !adv.Created[0].ScheduledAt.Equal(ticks[2]) || !adv.Backfill.Next.Equal(ticks[3]) {
		t.Fatalf("advance after one ended: created %d, next %s", len(adv.Created), adv.Backfill.Next)
	}
	// A run that is not the backfill's (a manual one) does not count.
	mustInsert(t, s, manual("etl", now))
	if n := len(listRuns(t, s, "etl")); n != 4 {
		t.Fatalf("runs: %d, want 4", n)
	}
	// Unknown backfill.
	if _, err := s.BackfillAdvance(t.Context(), store.BackfillAdvanceParams{ID: "nope", Expect: ticks[0]}); err == nil {
		t.Fatal("advance of an unknown backfill succeeded")
	}
}

// Backfills of overlapping ranges of one job share their bound, also
// when they are advanced at once.
func testBackfillMaxParallelShared(t *testing.T, s store.Store) {
	ticks := minutes(20)
	now := t0.Add(time.Hour)
	for round := range 5 {
		job := "etl-" + string(rune('a'+round))
		var bs []*store.Backfill
		for range 4 {
			bs = append(bs, mustCreateBackfill(t, s, job, ticks, 2, now))
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(bs))
		for _, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.BackfillAdvance(t.Context(), store.BackfillAdvanceParams{ID: b.ID, Expect: b.Next,
					Runs: backfillRuns(job, ticks, now), Now: now})
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("BackfillAdvance: %v", err)
		}
		if n := len(listRuns(t, s, job)); n != 2 {
			t.Fatalf("round %d: 4 backfills with max parallel 2 advanced at once made %d runs, want 2", round, n)
		}
	}
}

// BackfillsActive returns the unfinished backfills of the named jobs only,
// oldest first, whatever the order of the names: not those of other jobs,
// nor finished ones.
func testBackfillsActiveOfNamedJobs(t *testing.T, s store.Store) {
	ticks := minutes(3)
	now := t0.Add(time.Hour)
	a := mustCreateBackfill(t, s, "a", ticks, 1, now)
	c := mustCreateBackfill(t, s, "c", ticks, 1, now.Add(time.Second))
	b := mustCreateBackfill(t, s, "b", ticks, 1, now.Add(2*time.Second))
	d := mustCreateBackfill(t, s, "d", ticks, 0, now.Add(3*time.Second))
	if adv := mustAdvance(t, s, d, ticks, now.Add(3*time.Second)); !adv.Backfill.Done() {
		t.Fatalf("backfill of d not done after its advance: %+v", adv.Backfill)
	}
	for _, tc := range []struct {
		names []string
		want  []*store.Backfill
	}{
		{[]string{"d", "zz", "b", "c"}, []*store.Backfill{c, b}},
		{[]string{"b", "c", "d"}, []*store.Backfill{c, b}},
		{[]string{"a"}, []*store.Backfill{a}},
		{[]string{"c", "a", "b"}, []*store.Backfill{a, c, b}},
		{[]string{"d", "zz"}, nil},
		{nil, nil},
	} {
		active, err := s.BackfillsActive(t.Context(), tc.names)
		if err != nil {
			t.Fatalf("BackfillsActive(%q): %v", tc.names, err)
		}
		var got, want []string
		for _, x := range active {
			got = append(got, x.Job)
		}
		for _, x := range tc.want {
			want = append(want, x.Job)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("BackfillsActive(%q) = the backfills of %q; want %q", tc.names, got, want)
		}
	}
}
