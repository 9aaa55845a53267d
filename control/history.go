package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// ParsePast reads a bound of a time range: a time in RFC 3339
// (2026-05-01T03:00:00Z), a date (2026-05-01, its midnight in UTC), or a
// duration before now ("7d", "36h", "1d12h", "90m": days of 24 hours, then
// a Go duration). The command line, the API and the dashboard read
// --since, --until and their query parameters with it.
func ParsePast(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.UTC(), nil
	}
	if d, ok := parseAgo(s); ok {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("want a time such as 2026-05-01T03:00:00Z, a date such as 2026-05-01, "+
		"or a duration before now such as 7d or 36h, got %s", clip(strconv.Quote(s)))
}

// agoDays is the days of a duration before now, and what follows them.
var agoDays = regexp.MustCompile(`^([0-9]{1,5})d(.*)$`)

// parseAgo reads a duration of ParsePast: days, then a Go duration, not
// negative and at most 100 years.
func parseAgo(s string) (time.Duration, bool) {
	var d time.Duration
	if m := agoDays.FindStringSubmatch(s); m != nil {
		days, _ := strconv.Atoi(m[1])
		d, s = time.Duration(days)*24*time.Hour, m[2]
		if s == "" {
			return d, days <= 36500
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil || rest < 0 || rest > 100*365*24*time.Hour || d+rest > 100*365*24*time.Hour {
		return 0, false
	}
	return d + rest, true
}

// queryRange reads the since and until of a query (ParsePast) into *since
// and *until; a range whose since is not before its until is refused.
func queryRange(w http.ResponseWriter, q url.Values, since, until *time.Time) bool {
	now := time.Now()
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", since}, {"until", until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := ParsePast(v, now)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, p.name+": "+err.Error())
			return false
		}
		*p.to = t
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(*until) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("since (%s) must be before until (%s)",
			since.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano)))
		return false
	}
	return true
}

// RunStats is the reply of GET /v1/stats/runs: the runs of a job (or of
// all jobs, Job "") made in a range, by outcome, and the durations of the
// completed ones. Cancelled does not count the expired runs, which
// Expired counts. SuccessRatio is completed / (completed + dead_letter +
// expired), null when no run ended so; the durations, in seconds, are the
// 50th and 95th percentiles (nearest rank) and the longest, each from the
// start of the run's last attempt to its end, null when no run completed.
type RunStats struct {
	Job          string     `json:"job"`
	Since        *time.Time `json:"since"`
	Until        *time.Time `json:"until"`
	Runs         int64      `json:"runs"`
	Completed    int64      `json:"completed"`
	DeadLetter   int64      `json:"dead_letter"`
	Expired      int64      `json:"expired"`
	Cancelled    int64      `json:"cancelled"`
	Pending      int64      `json:"pending"`
	Running      int64      `json:"running"`
	Retrying     int64      `json:"retrying"`
	SuccessRatio *float64   `json:"success_ratio"`
	P50Seconds   *float64   `json:"duration_p50_seconds"`
	P95Seconds   *float64   `json:"duration_p95_seconds"`
	MaxSeconds   *float64   `json:"duration_max_seconds"`
}

// NewRunStats converts the stats of the store for f.
func NewRunStats(f store.RunStatsFilter, st *store.RunStats) RunStats {
	c := st.Counts
	out := RunStats{Job: f.Job, Since: utc(f.Since), Until: utc(f.Until), Runs: st.Total(),
		Completed: c[jobs.StatusCompleted], DeadLetter: c[jobs.StatusDeadLetter], Expired: st.Expired,
		Cancelled: c[jobs.StatusCancelled] - st.Expired, Pending: c[jobs.StatusPending],
		Running: c[jobs.StatusRunning], Retrying: c[jobs.StatusRetrying]}
	if r, ok := st.SuccessRatio(); ok {
		out.SuccessRatio = &r
	}
	if out.Completed > 0 {
		secs := func(d time.Duration) *float64 { s := d.Seconds(); return &s }
		out.P50Seconds, out.P95Seconds, out.MaxSeconds = secs(st.P50), secs(st.P95), secs(st.Max)
	}
	return out
}

// maxRunStats bounds the stats of runs computed at once: each reads every
// run of its range, the whole history without one, so a token's rate of
// requests alone would let it keep the store busy.
const maxRunStats = 2

// runStats answers GET /v1/stats/runs?job=&since=&until=; 429 busy when
// maxRunStats are being computed.
func (s *Server) runStats(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r, "job", "since", "until") {
		return
	}
	q := r.URL.Query()
	f := store.RunStatsFilter{Job: q.Get("job")}
	if !queryRange(w, q, &f.Since, &f.Until) {
		return
	}
	if !s.stats.take() {
		writeBusy(w, fmt.Sprintf("%d stats of runs are being computed, the most this daemon computes at once; ask again after Retry-After", maxRunStats))
		return
	}
	defer s.stats.give()
	st, err := s.cfg.Store.RunsStats(r.Context(), f)
	if err != nil {
		s.engineError(w, r, err, CodeNotFound)
		return
	}
	writeJSON(w, http.StatusOK, NewRunStats(f, st))
}

// RunStatsQuery selects the runs of RunStats: of Job ("" all jobs), made
// at Since or later and before Until (zero: no bound).
type RunStatsQuery struct {
	Job          string
	Since, Until time.Time
}

// RunStats summarises runs (GET /v1/stats/runs).
func (c *Client) RunStats(ctx context.Context, q RunStatsQuery) (*RunStats, error) {
	v := url.Values{}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	setTime(v, "since", q.Since)
	setTime(v, "until", q.Until)
	var out RunStats
	if err := c.do(ctx, http.MethodGet, "/v1/stats/runs", v, nil, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// setTime sets the query parameter name to t in RFC 3339 (UTC, with its
// fraction), unless t is zero.
func setTime(v url.Values, name string, t time.Time) {
	if !t.IsZero() {
		v.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
}
