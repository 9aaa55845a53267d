package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// testListPages: a listing bounded by a time range and paged by its cursor
// (RunFilter.Before, the last run of the page before) lists every run
// that the filter selects once, in the listing's order (made newest
// first, then by id), whatever the size of the pages, runs made at one
// instant included; Since is inclusive and Until exclusive; a cursor that
// the filter itself would not list still places the page; an unknown
// cursor is ErrNotFound.
func testListPages(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	// Runs of a and b, one a minute; then three of a at one instant.
	for i := range 12 {
		job := "a"
		if i%3 == 0 {
			job = "b"
		}
		mustInsert(t, s, manual(job, at(i)))
	}
	for range 3 {
		mustInsert(t, s, manual("a", at(20)))
	}
	// Statuses: the first two runs of a completed, the next running, the
	// first of b retrying.
	complete(t, s, claimOne(t, s, "a", incA, at(30)), at(31))
	complete(t, s, claimOne(t, s, "a", incA, at(31)), at(32))
	claimOne(t, s, "a", incA, at(32))
	fail(t, s, claimOne(t, s, "b", incA, at(33)), at(34))

	all, err := s.RunsList(ctx, store.RunFilter{Limit: 1000})
	if err != nil || len(all) != 15 {
		t.Fatalf("RunsList of all = %d runs, %v; want 15", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.CreatedAt.Before(b.CreatedAt) || (a.CreatedAt.Equal(b.CreatedAt) && a.ID < b.ID) {
			t.Fatalf("RunsList not in its order at %d: %s %s, %s %s", i, a.CreatedAt, a.ID, b.CreatedAt, b.ID)
		}
	}
	// selects is what the filter keeps of all, in the listing's order.
	selects := func(f store.RunFilter) []string {
		var out []string
		for _, r := range all {
			if (f.Job == "" || r.Job == f.Job) && (f.Status == "" || r.Status == f.Status) &&
				(f.Since.IsZero() || !r.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || r.CreatedAt.Before(f.Until)) {
				out = append(out, r.ID)
			}
		}
		return out
	}
	filters := []store.RunFilter{
		{},
		{Job: "a"},
		{Job: "b"},
		{Status: jobs.StatusPending},
		{Status: jobs.StatusCompleted},
		{Status: jobs.StatusRunning},
		{Status: jobs.StatusRetrying},
		{Job: "a", Status: jobs.StatusPending},
		{Job: "b", Status: jobs.StatusPending},
		{Since: at(3)},
		{Until: at(7)},
		{Since: at(3), Until: at(7)},
		{Since: at(20), Until: at(21)},
		{Job: "a", Since: at(1), Until: at(20)},
		{Job: "a", Status: jobs.StatusCompleted, Since: at(2)},
		{Job: "b", Status: jobs.StatusPending, Until: at(10)},
		{Status: jobs.StatusPending, Since: at(4), Until: at(21)},
	}
	for _, f := range filters {
		want := selects(f)
		for _, size := range []int{1, 2, 4, 100} {
			what := fmt.Sprintf("job=%q status=%q since=%s until=%s, pages of %d", f.Job, f.Status,
				clock(f.Since), clock(f.Until), size)
			var got []string
			f.Limit, f.Before = size, ""
			for range len(all) + 2 {
				page, err := s.RunsList(ctx, f)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if len(page) > size {
					t.Fatalf("%s: a page of %d runs", what, len(page))
				}
				got = append(got, ids(page)...)
				if len(page) < size {
					break
				}
				f.Before = page[len(page)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: listed\n%v\nwant\n%v", what, got, want)
			}
		}
	}
	// Since is inclusive, Until exclusive: the three runs made at one
	// instant are all in [at(20), at(21)) and none in [at(11), at(20)).
	if got := selects(store.RunFilter{Since: at(20), Until: at(21)}); len(got) != 3 {
		t.Errorf("runs made at 12:20: %v", got)
	}
	if got, err := s.RunsList(ctx, store.RunFilter{Since: at(11), Until: at(20)}); err != nil || len(got) != 1 {
		t.Errorf("runs made in [12:11, 12:20) = %v, %v; want the one of 12:11", ids(got), err)
	}
	// A cursor that the filter would not list: the runs of a after the
	// newest run of b.
	newestB := selects(store.RunFilter{Job: "b"})[0]
	afterB, err := s.RunsList(ctx, store.RunFilter{Job: "a", Before: newestB})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, r := range all {
		if r.Job == "a" && slices.Index(ids(all), newestB) < i {
			want = append(want, r.ID)
		}
	}
	if !slices.Equal(ids(afterB), want) {
		t.Errorf("runs of a after the newest of b: %v, want %v", ids(afterB), want)
	}
	// A cursor made after Until: the runs made before Until, all of them.
	var madeAt10 string
	for _, r := range all {
		if r.CreatedAt.Equal(at(10)) {
			madeAt10 = r.ID
		}
	}
	if got, err := s.RunsList(ctx, store.RunFilter{Until: at(5), Before: madeAt10}); err != nil ||
		!slices.Equal(ids(got), selects(store.RunFilter{Until: at(5)})) {
		t.Errorf("runs made before 12:05 after the run of 12:10 = %v, %v; want %v", ids(got), err, selects(store.RunFilter{Until: at(5)}))
	}
	_, err = s.RunsList(ctx, store.RunFilter{Before: "no-such-run"})
	wantErr(t, err, store.ErrNotFound)
}

// clock is the time of day of t, or "-" for a zero time.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04")
}

// testRunsStats: RunsStats counts the runs of a job, or of all jobs, made
// in a range, by status, with the expired ones apart, and gives the 50th
// and 95th percentiles (nearest rank) and the longest of the durations of
// the completed ones (each from its last attempt's start to its end);
// runs that did not complete add no duration. An empty range is all
// zeros.
func testRunsStats(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	// 20 completed runs of s, made a minute apart, that took 1s to 20s,
	// not in order: run i took durations[i] seconds.
	durations := []int{7, 3, 20, 1, 12, 9, 15, 2, 18, 5, 11, 4, 16, 8, 19, 6, 13, 10, 17, 14}
	for i, d := range durations {
		mustInsert(t, s, manual("s", at(i)))
		started := at(i).Add(30 * time.Second)
		complete(t, s, claimOne(t, s, "s", incA, started), started.Add(time.Duration(d)*time.Second))
	}
	// Then two dead letters, a retrying run, a running one, a pending one,
	// one that expired and one a user cancelled; and a long run of other.
	for i := range 2 {
		p := manual("s", at(30+i))
		p.Retry = jobs.RetryPolicy{MaxAttempts: 1}
		mustInsert(t, s, p)
		wantStatus(t, fail(t, s, claimOne(t, s, "s", incA, at(30+i)), at(30+i).Add(time.Hour)), jobs.StatusDeadLetter, jobs.ReasonFailed)
	}
	mustInsert(t, s, manual("s", at(32)))
	claimOne(t, s, "s", incA, at(32))
	mustInsert(t, s, manual("s", at(33)))
	wantStatus(t, fail(t, s, claimOne(t, s, "s", incA, at(33)), at(33).Add(time.Second)), jobs.StatusRetrying, jobs.ReasonFailed)
	mustInsert(t, s, manual("s", at(34)))
	p := manual("s", at(35))
	p.NotAfter = at(36)
	mustInsert(t, s, p)
	if got, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: nodeA, Now: at(37)}); err != nil || len(got) != 1 {
		t.Fatalf("RunsExpire = %v, %v; want the run of 12:35", ids(got), err)
	}
	cancelled := mustInsert(t, s, manual("s", at(38)))
	if _, err := s.RunCancel(ctx, userCancel(cancelled.ID, nodeA, at(38))); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, manual("other", at(40)))
	complete(t, s, claimOne(t, s, "other", incA, at(40)), at(40).Add(100*time.Second))

	stats := func(f store.RunStatsFilter) *store.RunStats {
		t.Helper()
		st, err := s.RunsStats(ctx, f)
		if err != nil {
			t.Fatalf("RunsStats(%+v): %v", f, err)
		}
		return st
	}
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	for _, c := range []struct {
		what          string
		f             store.RunStatsFilter
		counts        map[jobs.Status]int64
		expired       int64
		p50, p95, max time.Duration
		ratio         float64 // -1: none
	}{
		{"the runs of s", store.RunStatsFilter{Job: "s"},
			map[jobs.Status]int64{jobs.StatusCompleted: 20, jobs.StatusDeadLetter: 2, jobs.StatusRetrying: 1,
				jobs.StatusRunning: 1, jobs.StatusPending: 1, jobs.StatusCancelled: 2}, 1,
			// 20 durations of 1s to 20s: ranks ceil(10) and ceil(19).
			sec(10), sec(19), sec(20), 20.0 / 23},
		{"the runs of all jobs", store.RunStatsFilter{},
			map[jobs.Status]int64{jobs.StatusCompleted: 21, jobs.StatusDeadLetter: 2, jobs.StatusRetrying: 1,
				jobs.StatusRunning: 1, jobs.StatusPending: 1, jobs.StatusCancelled: 2}, 1,
			// 21 durations: ranks ceil(10.5) and ceil(19.95).
			sec(11), sec(20), sec(100), 21.0 / 24},
		{"the runs of s made in [12:10, 12:15)", store.RunStatsFilter{Job: "s", Since: at(10), Until: at(15)},
			// 11, 4, 16, 8, 19: ranks ceil(2.5) and ceil(4.75).
			map[jobs.Status]int64{jobs.StatusCompleted: 5}, 0, sec(11), sec(19), sec(19), 1},
		{"the runs of s made from 12:31", store.RunStatsFilter{Job: "s", Since: at(31)},
			map[jobs.Status]int64{jobs.StatusDeadLetter: 1, jobs.StatusRetrying: 1, jobs.StatusRunning: 1,
				jobs.StatusPending: 1, jobs.StatusCancelled: 2}, 1, 0, 0, 0, 0},
		{"the runs of all jobs made before 12:01", store.RunStatsFilter{Until: at(1)},
			map[jobs.Status]int64{jobs.StatusCompleted: 1}, 0, sec(7), sec(7), sec(7), 1},
		{"no run", store.RunStatsFilter{Job: "s", Since: at(50)}, nil, 0, 0, 0, 0, -1},
		{"no job", store.RunStatsFilter{Job: "none"}, nil, 0, 0, 0, 0, -1},
	} {
		st := stats(c.f)
		for _, status := range jobs.Statuses {
			if n, ok := st.Counts[status]; !ok || n != c.counts[status] {
				t.Errorf("%s: %d %s (present %v), want %d", c.what, n, status, ok, c.counts[status])
			}
		}
		if st.Expired != c.expired || st.P50 != c.p50 || st.P95 != c.p95 || st.Max != c.max {
			t.Errorf("%s: expired %d, p50 %s, p95 %s, max %s; want %d, %s, %s, %s", c.what, st.Expired, st.P50, st.P95, st.Max,
				c.expired, c.p50, c.p95, c.max)
		}
		ratio, ok := st.SuccessRatio()
		if (c.ratio < 0) == ok || (ok && ratio != c.ratio) {
			t.Errorf("%s: success ratio %v (%v), want %v", c.what, ratio, ok, c.ratio)
		}
	}
}
