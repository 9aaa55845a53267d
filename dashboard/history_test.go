package dashboard

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestHistory: the chart puts the oldest run on the left, each bar as
// high as its run took against the longest, a bar of no time still
// visible, and the start lag (from not_before) below the axis; a run not
// started is a mark on the axis; an expired run is apart from the
// cancelled; the summary's percentiles are those of the completed runs by
// the nearest rank. Few runs take the right of the chart.
func TestHistory(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	ran := func(id string, status jobs.Status, made, lag, took time.Duration) *jobs.Run {
		r := &jobs.Run{ID: id, Status: status, CreatedAt: t0.Add(made), NotBefore: t0.Add(made)}
		r.StartedAt = r.NotBefore.Add(lag)
		if status != jobs.StatusRunning {
			r.FinishedAt = r.StartedAt.Add(took)
		}
		return r
	}
	// Newest first, as a listing gives them.
	runs := []*jobs.Run{
		ran("running", jobs.StatusRunning, 59*time.Minute, 0, 0),
		{ID: "waiting", Status: jobs.StatusPending, CreatedAt: t0.Add(50 * time.Minute), NotBefore: t0.Add(50 * time.Minute)},
		{ID: "expired", Status: jobs.StatusCancelled, Reason: jobs.ReasonExpired, CreatedAt: t0.Add(40 * time.Minute)},
		ran("dead", jobs.StatusDeadLetter, 30*time.Minute, 2*time.Second, 30*time.Second),
		ran("instant", jobs.StatusCompleted, 20*time.Minute, 0, 0),
		ran("long", jobs.StatusCompleted, 10*time.Minute, 4*time.Second, 2*time.Minute),
		ran("first", jobs.StatusCompleted, 0, time.Second, time.Minute),
	}
	h := newHistory(runs, now)
	var got []string
	for _, b := range h.Bars {
		got = append(got, fmt.Sprintf("%s %s x=%.2f h=%.1f lag=%.1f started=%v failed=%v", b.Run.ID, b.Outcome.Key, b.X, b.Height, b.LagHeight, b.Started, b.Failed))
	}
	slot := 100.0 / chartSlots
	scale := float64(chartAxis - chartTop)
	want := []string{
		fmt.Sprintf("first st-completed x=%.2f h=%.1f lag=%.1f started=true failed=false", 23*slot+0.15*slot, scale/2, chartLag/4.0),
		fmt.Sprintf("long st-completed x=%.2f h=%.1f lag=%.1f started=true failed=false", 24*slot+0.15*slot, scale, float64(chartLag)),
		fmt.Sprintf("instant st-completed x=%.2f h=%.1f lag=0.0 started=true failed=false", 25*slot+0.15*slot, float64(minBarPx)),
		fmt.Sprintf("dead st-dead-letter x=%.2f h=%.1f lag=%.1f started=true failed=true", 26*slot+0.15*slot, scale/4, chartLag/2.0),
		fmt.Sprintf("expired st-expired x=%.2f h=4.0 lag=0.0 started=false failed=true", 27*slot+0.15*slot),
		fmt.Sprintf("waiting st-pending x=%.2f h=4.0 lag=0.0 started=false failed=false", 28*slot+0.15*slot),
		fmt.Sprintf("running st-running x=%.2f h=%.1f lag=0.0 started=true failed=false", 29*slot+0.15*slot, scale/2),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bars:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The running run has run for a minute at now.
	if h.MaxDuration != 2*time.Minute || h.MaxLag != 4*time.Second || h.Completed != 3 || h.P50 != time.Minute || h.P95 != 2*time.Minute ||
		h.Max != 2*time.Minute || h.Started != 5 || h.LagP50 != time.Second || h.LagMax != 4*time.Second ||
		!h.From.Equal(t0) || !h.To.Equal(t0.Add(59*time.Minute)) {
		t.Errorf("history: %+v", h)
	}
	var counts []string
	for _, c := range h.Counts {
		counts = append(counts, fmt.Sprintf("%d %s", c.N, c.Text))
	}
	if got, want := strings.Join(counts, ", "), "3 ✓ completed, 1 ✗ dead letter, 1 ⊘ expired, 1 ▶ running, 1 ◷ pending"; got != want {
		t.Errorf("counts: %s, want %s", got, want)
	}
	for id, want := range map[string]string{
		"dead":    "Run dead, made 2026-03-01 12:30:00 UTC: ✗ dead letter; took 30s; started 2.0s after it was due",
		"waiting": "Run waiting, made 2026-03-01 12:50:00 UTC: ◷ pending; not started yet",
		"expired": "Run expired, made 2026-03-01 12:40:00 UTC: ⊘ expired; never started",
		"running": "Run running, made 2026-03-01 12:59:00 UTC: ▶ running; running for 1m 0s so far; started 0ms after it was due",
	} {
		for _, b := range h.Bars {
			if b.Run.ID == id && b.Title != want {
				t.Errorf("the title of %s: %q, want %q", id, b.Title, want)
			}
		}
	}
	if ends := h.Ends(); ends != [2]string{"12:00:00", "12:59:00 UTC"} {
		t.Errorf("the ends of a chart of one day: %q", ends)
	}
	h.To = h.To.Add(24 * time.Hour)
	if ends := h.Ends(); ends != [2]string{"2026-03-01 12:00", "2026-03-02 12:59 UTC"} {
		t.Errorf("the ends of a chart of two days: %q", ends)
	}
	if h := newHistory(nil, now); len(h.Bars) != 0 || len(h.Counts) != 0 {
		t.Errorf("the history of no run: %+v", h)
	}
}

// seedRuns makes n runs of job in the store, made a minute apart from
// from, each started lag(i) after it was made and completed took(i)
// after, or dead-lettered when failed(i).
func (td *testDash) seedRuns(t *testing.T, job string, from time.Time, n int, lag, took func(int) time.Duration, failed func(int) bool) []*jobs.Run {
	t.Helper()
	ctx := t.Context()
	var out []*jobs.Run
	for i := range n {
		at := from.Add(time.Duration(i) * time.Minute)
		r, err := td.st.RunInsert(ctx, store.RunInsertParams{Job: job, Trigger: jobs.TriggerSchedule, ScheduledAt: at, NotBefore: at,
			Retry: jobs.RetryPolicy{MaxAttempts: 1}, Node: "test-node", Now: at})
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := td.st.RunsClaim(ctx, store.ClaimParams{Node: "test-node", Incarnation: "inc",
			Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 1, Now: at.Add(lag(i))})
		if err != nil || len(claimed) != 1 || claimed[0].ID != r.ID {
			t.Fatalf("claim %s: %v %v", r.ID, claimed, err)
		}
		c, code := claimed[0], 0
		f := jobs.Fence{RunID: c.ID, Attempt: c.Attempt, Incarnation: c.Incarnation}
		end := c.StartedAt.Add(took(i))
		tr := jobs.Complete(f, "test-node", jobs.Result{ExitCode: &code}, end)
		if failed(i) {
			code = 2
			tr = jobs.FailAttempt(c, f, "test-node", jobs.Result{ExitCode: &code}, jobs.ReasonFailed, end, nil)
		}
		done, err := td.st.RunTransition(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, done)
	}
	return out
}

// barLinks finds the links of the chart's bars.
var barLinks = regexp.MustCompile(`<a href="/ui/runs/([^"]+)"><title>`)

// TestJobPageHistory: a job's page charts its last 100 runs in an SVG of
// the page itself, each bar a link to its run with a title, and lists the
// last 30 of them; the live part has the chart too.
func TestJobPageHistory(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, readToken)
	from := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Minute)
	runs := td.seedRuns(t, "backup", from, 120, func(i int) time.Duration { return time.Duration(i%7) * time.Second },
		func(i int) time.Duration { return time.Duration(i%13+1) * time.Second }, func(i int) bool { return i%17 == 3 })
	for _, path := range []string{"/ui/jobs/backup", "/ui/jobs/backup?part=live"} {
		r := td.do(t, req{method: "GET", path: path, cookie: cookie})
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		_, svg, ok := strings.Cut(r.body, `<svg class="history-chart"`)
		svg, _, _ = strings.Cut(svg, "</svg>")
		links := barLinks.FindAllStringSubmatch(svg, -1)
		if !ok || len(links) != 100 {
			t.Fatalf("GET %s: a chart of %d bars, want 100:\n%s", path, len(links), r.body)
		}
		// The oldest of the last 100 on the left, the newest on the right.
		if links[0][1] != runs[20].ID || links[99][1] != runs[119].ID {
			t.Errorf("GET %s: bars from %s to %s, want %s to %s", path, links[0][1], links[99][1], runs[20].ID, runs[119].ID)
		}
		for _, want := range []string{`role="group" aria-labelledby="history-h" aria-describedby="history-summary"`,
			"The last 100 runs, made from " + utcText(runs[20].CreatedAt) + " to " + utcText(runs[119].CreatedAt),
			`94 <span class="st st-completed">✓ completed</span>, 6 <span class="st st-dead-letter">✗ dead letter</span>.`,
			"The completed took 7.0s (p50), 13s (p95), 13s at most.", "They started 3.0s (p50), 6.0s at most, after they were due.",
			`<rect class="hatch"`, `<rect class="lag"`, `>13s</span>`, "6.0s late",
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("GET %s: no %q", path, want)
			}
		}
		// The recent runs: 30.
		if n := strings.Count(r.body, `<td data-label="Run">`); n != 30 {
			t.Errorf("GET %s: %d recent runs listed, want 30", path, n)
		}
	}
}

// TestRunsPageFilters: the runs page filters by job, status and a time
// range (a duration before now, a date or RFC 3339), pages past its 100
// newest with a link to the older runs that keeps the filters, and back
// to the newest; bad bounds and a run that is gone are errors that say
// so.
func TestRunsPageFilters(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, readToken)
	from := time.Now().Add(-5 * time.Hour).UTC().Truncate(time.Minute)
	none := func(int) time.Duration { return 0 }
	runs := td.seedRuns(t, "backup", from, 230, none, func(int) time.Duration { return time.Second }, func(i int) bool { return i%10 == 0 })
	get := func(path string) reply {
		t.Helper()
		r := td.do(t, req{method: "GET", path: path, cookie: cookie})
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		return r
	}
	listed := func(body string) []string {
		var ids []string
		for _, m := range regexp.MustCompile(`<td data-label="Run"><a href="/ui/runs/([^"]+)"`).FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	older := regexp.MustCompile(`<a href="([^"]+)" id="older"`)

	// Three pages: 100, 100, 30; each page links to the newest.
	path := "/ui/runs?job=backup"
	seen := map[string]bool{}
	for page := range 3 {
		r := get(path)
		ids := listed(r.body)
		if want := []int{100, 100, 30}[page]; len(ids) != want {
			t.Fatalf("page %d: %d runs, want %d", page, len(ids), want)
		}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("page %d lists %s again", page, id)
			}
			seen[id] = true
		}
		if (page > 0) != strings.Contains(r.body, `id="newest"`) {
			t.Errorf("page %d: a link to the newest: %v", page, !strings.Contains(r.body, `id="newest"`))
		}
		m := older.FindStringSubmatch(r.body)
		if page == 2 {
			if m != nil {
				t.Errorf("the last page links to older runs: %s", m[1])
			}
			break
		}
		if m == nil {
			t.Fatalf("page %d: no link to older runs", page)
		}
		path = strings.ReplaceAll(m[1], "&amp;", "&")
		if !strings.Contains(path, "job=backup") || !strings.Contains(path, "before=") {
			t.Errorf("page %d: the link to older runs %s", page, path)
		}
	}
	if len(seen) != 230 {
		t.Errorf("the pages listed %d runs, want 230", len(seen))
	}

	// A status and a range: the dead letters of the first hour.
	r := get("/ui/runs?job=backup&status=dead_letter&since=" + from.Format(time.RFC3339) + "&until=" + from.Add(time.Hour).Format(time.RFC3339))
	if ids := listed(r.body); len(ids) != 6 || !strings.Contains(r.body, "made since "+utcText(from)+" and before "+utcText(from.Add(time.Hour))) {
		t.Errorf("the dead letters of the first hour: %v\n%s", ids, r.body)
	}
	if !strings.Contains(r.body, `name="since" value="`+from.Format(time.RFC3339)+`"`) {
		t.Error("the form does not keep since")
	}
	// A duration before now; a date.
	if ids := listed(get("/ui/runs?since=30m").body); len(ids) != 0 {
		t.Errorf("runs made in the last 30 minutes: %v", ids)
	}
	if r := get("/ui/runs?since=30m"); !strings.Contains(r.body, "No runs to show") || !strings.Contains(r.body, "made since 30m ago,") {
		t.Errorf("an empty range says:\n%s", r.body)
	}
	if ids := listed(get("/ui/runs?until=" + from.Add(2*time.Minute).Format(time.RFC3339) + "&since=" + from.Format(time.DateOnly)).body); len(ids) != 2 ||
		ids[0] != runs[1].ID && ids[1] != runs[1].ID {
		t.Errorf("the runs made before the third: %v", ids)
	}

	for path, want := range map[string]string{
		"/ui/runs?since=last+week":                        "Since: want a time such as",
		"/ui/runs?until=%3Cb%3E":                          "Until: want a time such as",
		"/ui/runs?since=1h&until=2h":                      "must be before until",
		"/ui/runs?before=no-such-run":                     `There is no run &#34;no-such-run&#34;`,
		"/ui/runs?status=dead_letter&before=%3Cscript%3E": "There is no run &#34;&lt;script&gt;&#34;",
	} {
		r := td.do(t, req{method: "GET", path: path, cookie: cookie})
		if r.status/100 != 4 || !strings.Contains(r.body, want) || strings.Contains(r.body, "<b>") || strings.Contains(r.body, "<script>") {
			t.Errorf("GET %s: %d, want an error that says %q:\n%s", path, r.status, want, r.body)
		}
	}
}
