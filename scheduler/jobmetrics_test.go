package scheduler

import (
	"bufio"
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// jobScrape parses what WriteJobMetrics writes: each sample by its series
// (name and labels as written). It fails the test on a line that is not a
// HELP, TYPE or sample line, and on a sample of a family other than the
// one whose TYPE came last (the text format keeps a family together).
func jobScrape(t *testing.T, s *Scheduler) map[string]float64 {
	t.Helper()
	var b strings.Builder
	s.WriteJobMetrics(&b)
	out := map[string]float64{}
	family := ""
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			family = strings.Fields(rest)[0]
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("line %q is not a sample", line)
		}
		series := line[:i]
		name, _, _ := strings.Cut(series, "{")
		if name != family && strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count") != family {
			t.Fatalf("sample %q outside its family (the last TYPE was %s)", line, family)
		}
		out[series] = v
	}
	return out
}

// TestJobMetrics: the per-job series follow what the node did (runs ended
// by status, attempts' durations and start lags, ticks skipped), the last
// success and failure follow the store's results, a job that never ran has
// none, and a reload that removes a job removes its series.
func TestJobMetrics(t *testing.T) {
	var h *harness
	mk := func(hh *harness) []*jobs.Definition {
		once := func(d *jobs.Definition) { d.Retry.MaxAttempts = 1 }
		return []*jobs.Definition{
			job("minutely", hh.succeed, func(d *jobs.Definition) {
				d.Schedule = mustSchedule(t, "* * * * *")
				d.Catchup = jobs.CatchupNone
				d.MisfireGrace = 30 * time.Second
			}),
			// ok runs for 90 s of the fake clock.
			job("ok", func(ctx context.Context) error {
				hh.calls.record(ctx, hh.clock)
				hh.clock.Advance(90 * time.Second)
				return nil
			}),
			job("bad", hh.fail, once),
			job(`idle "quoted" \ job`, hh.succeed),
		}
	}
	h = newHarness(t, mk)
	if m := jobScrape(t, h.s); len(m) != 0 {
		t.Fatalf("series before anything ran: %v", m)
	}
	// Down from t0 to t0+10m10s: nine ticks missed beyond the grace are
	// skipped, and the tick at 10m starts 10 s late.
	h.stop()
	h.clock.Set(t0.Add(10*time.Minute + 10*time.Second))
	h.start(mk(h))
	h.attemptsDone(1)
	ctx := context.Background()
	for _, name := range []string{"ok", "bad"} {
		if _, err := h.s.Trigger(ctx, name, TriggerParams{}); err != nil {
			t.Fatal(err)
		}
		h.loop()
		h.attemptsDone(1)
	}
	okRun, badRun, tick := h.runs("ok")[0], h.runs("bad")[0], h.runs("minutely")[0]
	wantStatus := func(r *jobs.Run, st jobs.Status) {
		t.Helper()
		if r.Status != st {
			t.Fatalf("run of %s is %s, want %s", r.Job, r.Status, st)
		}
	}
	wantStatus(okRun, jobs.StatusCompleted)
	wantStatus(badRun, jobs.StatusDeadLetter)
	wantStatus(tick, jobs.StatusCompleted)

	secs := func(at time.Time) float64 { return float64(at.UnixMicro()) / 1e6 }
	want := map[string]float64{
		`schedulerd_job_last_success_timestamp_seconds{job="minutely"}`: secs(tick.FinishedAt),
		`schedulerd_job_last_success_timestamp_seconds{job="ok"}`:       secs(okRun.FinishedAt),
		`schedulerd_job_last_failure_timestamp_seconds{job="bad"}`:      secs(badRun.FinishedAt),
		`schedulerd_job_runs_total{job="minutely",status="completed"}`:  1,
		`schedulerd_job_runs_total{job="ok",status="completed"}`:        1,
		`schedulerd_job_runs_total{job="bad",status="dead_letter"}`:     1,
		// Nine ticks while down; and the tick at 11m, which fell while ok
		// moved the clock on by 90 s, came 40 s late. The cursor counts
		// the same.
		`schedulerd_job_ticks_skipped_total{job="minutely"}`: float64(h.cursor("minutely").Skipped),
		// 90 s: above 10, within 100.
		`schedulerd_job_duration_seconds_bucket{job="ok",le="10"}`:   0,
		`schedulerd_job_duration_seconds_bucket{job="ok",le="100"}`:  1,
		`schedulerd_job_duration_seconds_bucket{job="ok",le="+Inf"}`: 1,
		`schedulerd_job_duration_seconds_sum{job="ok"}`:              90,
		`schedulerd_job_duration_seconds_count{job="ok"}`:            1,
		// The tick's attempt started 10 s after it.
		`schedulerd_job_start_lag_seconds_bucket{job="minutely",le="1"}`:  0,
		`schedulerd_job_start_lag_seconds_bucket{job="minutely",le="10"}`: 1,
		`schedulerd_job_start_lag_seconds_sum{job="minutely"}`:            10,
		`schedulerd_job_duration_seconds_count{job="bad"}`:                1,
		`schedulerd_job_start_lag_seconds_count{job="bad"}`:               1,
	}
	if c := h.cursor("minutely"); c.Skipped != 10 {
		t.Fatalf("the cursor counts %d skipped ticks, want 10", c.Skipped)
	}
	var m map[string]float64
	h.resultsUntil("the results of the three runs", func() bool {
		m = jobScrape(t, h.s)
		return len(m) > 0 && m[`schedulerd_job_last_failure_timestamp_seconds{job="bad"}`] > 0 &&
			m[`schedulerd_job_last_success_timestamp_seconds{job="ok"}`] > 0 &&
			m[`schedulerd_job_last_success_timestamp_seconds{job="minutely"}`] > 0
	})
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	for series := range m {
		if strings.Contains(series, "idle") {
			t.Errorf("a job that never ran has a series: %s", series)
		}
		if strings.Contains(series, `status="cancelled"`) || strings.Contains(series, `job="bad",status="completed"`) {
			t.Errorf("a count of nothing: %s", series)
		}
	}

	// A reload that removes bad removes its series, and leaves the others.
	var kept []*jobs.Definition
	for _, d := range mk(h) {
		if d.Name != "bad" {
			kept = append(kept, d)
		}
	}
	if err := h.s.Reload(ctx, kept); err != nil {
		t.Fatal(err)
	}
	m = jobScrape(t, h.s)
	for series := range m {
		if strings.Contains(series, `job="bad"`) {
			t.Errorf("series of a removed job: %s", series)
		}
	}
	if m[`schedulerd_job_runs_total{job="ok",status="completed"}`] != 1 ||
		m[`schedulerd_job_last_success_timestamp_seconds{job="ok"}`] != secs(okRun.FinishedAt) {
		t.Errorf("the reload changed the series of a job it kept: %v", m)
	}

	// A new process knows the results from the store; its own counts start
	// afresh.
	h.stop()
	h.start(mk(h))
	m = jobScrape(t, h.s)
	if m[`schedulerd_job_last_success_timestamp_seconds{job="ok"}`] != secs(okRun.FinishedAt) ||
		m[`schedulerd_job_last_failure_timestamp_seconds{job="bad"}`] != secs(badRun.FinishedAt) {
		t.Errorf("results after a restart: %v", m)
	}
	if _, ok := m[`schedulerd_job_runs_total{job="ok",status="completed"}`]; ok {
		t.Errorf("a new process has counts of the old one's runs: %v", m)
	}
}

// TestJobResultsFollowTheStore: results that another writer commits reach
// the node through the store's feed, without a loop iteration; results
// the feed missed are read again when it says so.
func TestJobResultsFollowTheStore(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("report", h.succeed), job("other", h.succeed)}
	})
	scraped := func(series string, want time.Time) func() bool {
		return func() bool { return jobScrape(t, h.s)[series] == float64(want.Unix()) }
	}

	// Another writer of the store (as another node would be) ends a run,
	// due an hour ahead of the engine's clock so that the engine leaves it.
	ctx := context.Background()
	r := claimAs(t, h.st, "report", "node-b", "b-1", t0.Add(time.Hour))
	done := t0.Add(time.Hour + 42*time.Second)
	f := jobs.Fence{RunID: r.ID, Attempt: 1, Incarnation: "b-1"}
	if _, err := h.st.RunTransition(ctx, jobs.Complete(f, "node-b", jobs.Result{ExitCode: new(int)}, done)); err != nil {
		t.Fatal(err)
	}
	h.resultsUntil("the last success of report", scraped(`schedulerd_job_last_success_timestamp_seconds{job="report"}`, done))

	// A result that the feed never told of: written behind the store's
	// back, then the feed says it may have missed some.
	db, err := sql.Open("sqlite", "file:"+h.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	failed := t0.Add(2 * time.Hour)
	if _, err := db.Exec(`INSERT INTO job_results (job, last_failure_at) VALUES ('other', ?)`, failed.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	h.st.ResultFeed().Lost()
	h.resultsUntil("the last failure of other, which the feed missed",
		scraped(`schedulerd_job_last_failure_timestamp_seconds{job="other"}`, failed))
}

// TestJobSeriesLabels: job names that the text format must escape (the
// config allows none, but the engine's library users may name jobs
// anything) make valid series; a reload that removes every job removes
// every series.
func TestJobSeriesLabels(t *testing.T) {
	m := newJobMetrics()
	var series []*jobSeries
	for _, name := range []string{`a"b`, `c\`, "d\ne", "f\xffg", "plain-1.2_x"} {
		js := m.of(name)
		js.attempted().duration.observe(1)
		js.runEnded(jobs.StatusCompleted)
		series = append(series, js)
	}
	var b strings.Builder
	bw := bufio.NewWriter(&b)
	writeNodeSeries(bw, series)
	bw.Flush()
	for _, want := range []string{
		`schedulerd_job_runs_total{job="a\"b",status="completed"} 1`,
		`schedulerd_job_runs_total{job="c\\",status="completed"} 1`,
		`schedulerd_job_runs_total{job="d\ne",status="completed"} 1`,
		"schedulerd_job_runs_total{job=\"f\uFFFDg\",status=\"completed\"} 1",
		`schedulerd_job_duration_seconds_bucket{job="plain-1.2_x",le="1"} 1`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no line %s in:\n%s", want, b.String())
		}
	}
	m.retain(func(string) bool { return false })
	if len(m.series) != 0 {
		t.Fatalf("series left after all were removed: %v", m.series)
	}
}

// TestJobRunsEndedByCancelAndExpiry: runs this node ends without an
// attempt count too: one cancelled through it, one expired by its loop.
func TestJobRunsEndedByCancelAndExpiry(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("later", h.succeed)} })
	ctx := context.Background()
	r, err := h.s.Trigger(ctx, "later", TriggerParams{NotBefore: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Cancel(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.Trigger(ctx, "later", TriggerParams{NotBefore: t0.Add(time.Hour), NotAfter: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h.advanceTo(t0.Add(3 * time.Hour))
	if st := statusOf(h.runs("later")); len(st) != 2 || st[0] != jobs.StatusCancelled || st[1] != jobs.StatusCancelled {
		t.Fatalf("runs of later: %v, want two cancelled", st)
	}
	m := jobScrape(t, h.s)
	if got := m[`schedulerd_job_runs_total{job="later",status="cancelled"}`]; got != 2 {
		t.Fatalf("cancelled runs of later: %v, want 2 (%v)", got, m)
	}
	if _, ok := m[`schedulerd_job_duration_seconds_count{job="later"}`]; ok {
		t.Fatalf("a job none of whose attempts started has a duration: %v", m)
	}
}

// TestJobMetricsExposition: the lines of a job's own series, exactly: its
// runs, and its attempts' durations and start lags as le buckets whose
// bounds are powers of ten. A value on a bound counts in that bucket, 0
// in the first, a value above the last bound in +Inf only; the label is
// escaped.
func TestJobMetricsExposition(t *testing.T) {
	const name = "q\"uo\\te\nd"
	// The attempts run for these, in turn, on the fake clock.
	durations := []time.Duration{time.Second, 0, 5 * time.Hour, 250 * time.Millisecond}
	var calls atomic.Int32
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job(name, func(ctx context.Context) error {
			h.clock.Advance(durations[calls.Add(1)-1])
			return nil
		})}
	})
	ctx := context.Background()
	// The first run is due in a minute and claimed 10 s after: it starts
	// 10 s late. The others start when they are triggered.
	if _, err := h.s.Trigger(ctx, name, TriggerParams{NotBefore: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	h.advanceTo(t0.Add(time.Minute + 10*time.Second))
	h.attemptsDone(1)
	for range durations[1:] {
		if _, err := h.s.Trigger(ctx, name, TriggerParams{}); err != nil {
			t.Fatal(err)
		}
		h.loop()
		h.attemptsDone(1)
	}
	var out string
	h.resultsUntil("four runs counted", func() bool {
		var b strings.Builder
		h.s.WriteJobMetrics(&b)
		out = b.String()
		return strings.Contains(out, `schedulerd_job_runs_total{job="q\"uo\\te\nd",status="completed"} 4`+"\n")
	})
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "schedulerd_job_") && !strings.HasPrefix(line, "schedulerd_job_last_") {
			got = append(got, line)
		}
	}
	const l = `job="q\"uo\\te\nd"`
	want := []string{
		`schedulerd_job_runs_total{` + l + `,status="completed"} 4`,
		// 1 s, 0, 5 h, 0.25 s.
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="0.1"} 1`,
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="1"} 3`,
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="10"} 3`,
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="100"} 3`,
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="1000"} 3`,
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="10000"} 3`,
		`schedulerd_job_duration_seconds_bucket{` + l + `,le="+Inf"} 4`,
		`schedulerd_job_duration_seconds_sum{` + l + `} 18001.25`,
		`schedulerd_job_duration_seconds_count{` + l + `} 4`,
		// 10 s, then 0 three times.
		`schedulerd_job_start_lag_seconds_bucket{` + l + `,le="0.01"} 3`,
		`schedulerd_job_start_lag_seconds_bucket{` + l + `,le="0.1"} 3`,
		`schedulerd_job_start_lag_seconds_bucket{` + l + `,le="1"} 3`,
		`schedulerd_job_start_lag_seconds_bucket{` + l + `,le="10"} 4`,
		`schedulerd_job_start_lag_seconds_bucket{` + l + `,le="100"} 4`,
		`schedulerd_job_start_lag_seconds_bucket{` + l + `,le="+Inf"} 4`,
		`schedulerd_job_start_lag_seconds_sum{` + l + `} 10`,
		`schedulerd_job_start_lag_seconds_count{` + l + `} 4`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the job's series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
