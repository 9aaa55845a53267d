package control

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

func TestParsePast(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time // zero: refused
	}{
		{"2026-05-01T03:00:00Z", time.Date(2026, 5, 1, 3, 0, 0, 0, time.UTC)},
		{"2026-05-01T05:00:00+02:00", time.Date(2026, 5, 1, 3, 0, 0, 0, time.UTC)},
		{"2026-05-01T03:00:00.25Z", time.Date(2026, 5, 1, 3, 0, 0, 250e6, time.UTC)},
		{"2026-05-01", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)},
		{" 7d ", now.Add(-7 * 24 * time.Hour)},
		{"36h", now.Add(-36 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"90m", now.Add(-90 * time.Minute)},
		{"0s", now},
		{"0d", now},
		{"36500d", now.Add(-36500 * 24 * time.Hour)},
		{"", time.Time{}},
		{"7", time.Time{}},
		{"d", time.Time{}},
		{"7 d", time.Time{}},
		{"-1h", time.Time{}},
		{"1d-1h", time.Time{}},
		{"1y", time.Time{}},
		{"36501d", time.Time{}},
		{"99999d", time.Time{}},
		{"100000d", time.Time{}},
		{"9999999h", time.Time{}},
		{"2026-13-01", time.Time{}},
		{"yesterday", time.Time{}},
	} {
		got, err := ParsePast(tt.in, now)
		switch {
		case tt.want.IsZero() && err == nil:
			t.Errorf("ParsePast(%q) = %s, want an error", tt.in, got)
		case tt.want.IsZero():
			if !strings.Contains(err.Error(), "such as 7d") {
				t.Errorf("ParsePast(%q): the error does not say what is wanted: %v", tt.in, err)
			}
		case err != nil || !got.Equal(tt.want) || got.Location() != time.UTC:
			t.Errorf("ParsePast(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// historyRuns makes, in st, runs of backup and report a minute apart from
// from, then four of backup at one instant: ten in all. The first run of
// backup completes after 3s, the first of report after 5s.
func historyRuns(t *testing.T, st store.Store, from time.Time) []*jobs.Run {
	t.Helper()
	ctx := context.Background()
	var made []*jobs.Run
	insert := func(job string, at time.Time) {
		r, err := st.RunInsert(ctx, store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: at, NotBefore: at,
			Retry: jobs.RetryPolicy{MaxAttempts: 1}, Node: "test-node", Now: at})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, r)
	}
	for i := range 6 {
		insert([]string{"backup", "report"}[i%2], from.Add(time.Duration(i)*time.Minute))
	}
	for range 4 {
		insert("backup", from.Add(10*time.Minute))
	}
	for job, d := range map[string]time.Duration{"backup": 3 * time.Second, "report": 5 * time.Second} {
		at := from.Add(20 * time.Minute)
		rs, err := st.RunsClaim(ctx, store.ClaimParams{Node: "test-node", Incarnation: testIncarnation,
			Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 1, Now: at})
		if err != nil || len(rs) != 1 {
			t.Fatalf("claim %s: %v %v", job, rs, err)
		}
		f := jobs.Fence{RunID: rs[0].ID, Attempt: rs[0].Attempt, Incarnation: testIncarnation}
		if _, err := st.RunTransition(ctx, jobs.Complete(f, "test-node", jobs.Result{ExitCode: new(int)}, at.Add(d))); err != nil {
			t.Fatal(err)
		}
	}
	return made
}

// TestRunsPages: GET /v1/runs pages through a listing with next and
// before, whatever the page's size, the last page without next (also a
// page that ends the listing exactly); since and until bound when the
// runs were made, in RFC 3339 or as a duration before now; a cursor that
// is no run is a 400 that says so.
func TestRunsPages(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	from := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	historyRuns(t, ts.st, from)
	all, err := ts.st.RunsList(ctx, store.RunFilter{})
	if err != nil || len(all) != 10 {
		t.Fatalf("the runs made: %d, %v", len(all), err)
	}
	for _, tt := range []struct {
		q    RunsQuery
		want int // how many runs keep selects
		keep func(*jobs.Run) bool
	}{
		{RunsQuery{}, 10, func(*jobs.Run) bool { return true }},
		{RunsQuery{Job: "backup"}, 7, func(r *jobs.Run) bool { return r.Job == "backup" }},
		{RunsQuery{Status: jobs.StatusCompleted}, 2, func(r *jobs.Run) bool { return r.Status == jobs.StatusCompleted }},
		{RunsQuery{Since: from.Add(2 * time.Minute), Until: from.Add(10 * time.Minute)}, 4,
			func(r *jobs.Run) bool {
				return !r.CreatedAt.Before(from.Add(2*time.Minute)) && r.CreatedAt.Before(from.Add(10*time.Minute))
			}},
		{RunsQuery{Job: "backup", Since: from.Add(10 * time.Minute)}, 4, func(r *jobs.Run) bool {
			return r.Job == "backup" && !r.CreatedAt.Before(from.Add(10*time.Minute))
		}},
	} {
		var want []string
		for _, r := range all {
			if tt.keep(r) {
				want = append(want, r.ID)
			}
		}
		if len(want) != tt.want {
			t.Fatalf("%+v: %d runs selected, the test wants %d", tt.q, len(want), tt.want)
		}
		for _, size := range []int{1, 2, 3, 4, 10, 100} {
			q := tt.q
			q.Limit = size
			var got []string
			for pages := 0; ; pages++ {
				page, err := ts.c.RunsPage(ctx, q)
				if err != nil {
					t.Fatalf("%+v: %v", q, err)
				}
				if len(page.Runs) > size || pages > len(all) {
					t.Fatalf("%+v: %d runs on page %d", q, len(page.Runs), pages)
				}
				for _, r := range page.Runs {
					got = append(got, r.ID)
				}
				// next is given exactly when more runs follow.
				if more := len(got) < len(want); (page.Next != "") != more {
					t.Fatalf("%+v: page %d of %d runs has next %q, with %d runs to follow", q, pages, len(page.Runs), page.Next, len(want)-len(got))
				}
				if page.Next == "" {
					break
				}
				if page.Next != page.Runs[len(page.Runs)-1].ID {
					t.Fatalf("%+v: next %q is not the page's last run", q, page.Next)
				}
				q.Before = page.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("%+v, pages of %d: %v, want %v", tt.q, size, got, want)
			}
		}
	}

	// since as a duration before now, over the raw API.
	hc := rawClient(ts.Path())
	resp, err := hc.Get("http://schedulerd/v1/runs?since=30m")
	if err != nil {
		t.Fatal(err)
	}
	var page map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if runs, ok := page["runs"].([]any); !ok || len(runs) != 0 {
		t.Errorf("runs made in the last 30 minutes: %v", page)
	}
	if _, ok := page["next"]; ok {
		t.Errorf("a page without more runs has next: %v", page)
	}
	resp, err = hc.Get("http://schedulerd/v1/runs?since=2h&limit=2")
	if err != nil {
		t.Fatal(err)
	}
	page = nil
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if runs, ok := page["runs"].([]any); !ok || len(runs) != 2 || page["next"] != runs[1].(map[string]any)["id"] {
		t.Errorf("the first page of 2 of the runs made in the last 2 hours: %v", page)
	}

	_, err = ts.c.RunsPage(ctx, RunsQuery{Before: "no-such-run"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, `before: there is no run "no-such-run"`) {
		t.Errorf("a page after no run: %v", err)
	}
}

// TestRunStatsEndpoint: GET /v1/stats/runs counts a job's runs made in a
// range by outcome, with the success ratio and the durations of the
// completed ones, in the contract's snake_case; an empty range gives
// zeros and nulls.
func TestRunStatsEndpoint(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	from := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	historyRuns(t, ts.st, from)

	st, err := ts.c.RunStats(ctx, RunStatsQuery{Job: "backup"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Job != "backup" || st.Runs != 7 || st.Completed != 1 || st.Pending != 6 || st.DeadLetter != 0 || st.Expired != 0 ||
		st.SuccessRatio == nil || *st.SuccessRatio != 1 || st.P50Seconds == nil || *st.P50Seconds != 3 || *st.P95Seconds != 3 || *st.MaxSeconds != 3 {
		t.Errorf("stats of backup: %+v", st)
	}
	st, err = ts.c.RunStats(ctx, RunStatsQuery{Since: from, Until: from.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Job != "" || st.Runs != 2 || st.Completed != 2 || *st.P50Seconds != 3 || *st.P95Seconds != 5 || *st.MaxSeconds != 5 ||
		!Time(st.Since).Equal(from) || !Time(st.Until).Equal(from.Add(2*time.Minute)) {
		t.Errorf("stats of all jobs in the first two minutes: %+v", st)
	}

	hc := rawClient(ts.Path())
	resp, err := hc.Get("http://schedulerd/v1/stats/runs?job=backup&since=1m")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]any{"job": "backup", "runs": 0.0, "completed": 0.0, "dead_letter": 0.0, "expired": 0.0, "cancelled": 0.0,
		"pending": 0.0, "running": 0.0, "retrying": 0.0, "success_ratio": nil, "duration_p50_seconds": nil,
		"duration_p95_seconds": nil, "duration_max_seconds": nil, "until": nil}
	for k, v := range want {
		if got, ok := raw[k]; !ok || got != v {
			t.Errorf("stats of an empty range: %s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if since, _ := raw["since"].(string); !strings.HasSuffix(since, "Z") {
		t.Errorf("stats of an empty range: since %v", raw["since"])
	}
}

// TestRunStatsBounded: while maxRunStats stats are computed, another is
// refused at once with 429 busy and a Retry-After, and served once a
// slot is free; the Client asks again after Retry-After.
func TestRunStatsBounded(t *testing.T) {
	ts := startServer(t, nil)
	for range maxRunStats {
		if !ts.stats.take() {
			t.Fatal("a slot of the stats is taken before any request")
		}
	}
	hc := rawClient(ts.Path())
	resp, err := hc.Get("http://schedulerd/v1/stats/runs?job=backup")
	if err != nil {
		t.Fatal(err)
	}
	var eb errorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || eb.Code != CodeBusy || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("stats with every slot taken: %d %+v %q", resp.StatusCode, eb, resp.Header.Get("Retry-After"))
	}
	done := make(chan error, 1)
	go func() {
		_, err := ts.c.RunStats(context.Background(), RunStatsQuery{Job: "backup"})
		done <- err
	}()
	ts.stats.give()
	if err := <-done; err != nil {
		t.Errorf("stats once a slot is free: %v", err)
	}
	ts.stats.give()
}
