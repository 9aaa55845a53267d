package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// base is what every page shows: its title, who is logged in, the form
// token, and where its live part is polled from.
type base struct {
	Title string
	// Caller is nil on the login and error pages of a request without a
	// session.
	Caller *control.Caller
	CSRF   string
	// CanOperate shows the buttons of the actions.
	CanOperate bool
	// Live is the URL of the page's live part; "" for none.
	Live     string
	Interval int
	Now      time.Time
}

func (d *Dashboard) base(r *http.Request, s *session, title string) base {
	b := base{Title: title, Interval: pollInterval, Now: time.Now()}
	if s != nil {
		c := s.caller
		b.Caller, b.CSRF, b.CanOperate = &c, s.csrf, s.canOperate()
	}
	return b
}

// liveURL is the URL of the live part of the page r asked for.
func liveURL(r *http.Request) string {
	q := r.URL.Query()
	q.Set("part", "live")
	return r.URL.EscapedPath() + "?" + q.Encode()
}

// overviewData is the snapshot of the overview: the names of the jobs,
// the nodes and the counts of runs by status.
type overviewData struct {
	// Names are the jobs' names, in the order of the listing.
	Names []string
	// all is the whole listing, read for an engine that is no JobLister.
	all    map[string]control.JobInfo
	Nodes  []control.Node
	Counts map[jobs.Status]int64
	// ReadAt is when the snapshot was read.
	ReadAt time.Time
}

// overviewSnapshot reads the overview's data, shared (snapshots): the
// names of the jobs (from the engine's memory; the whole listing of an
// engine that is no JobLister), the nodes, and the counts (one statement
// each).
func (d *Dashboard) overviewSnapshot(ctx context.Context) (*overviewData, error) {
	v, err := d.snaps.get(ctx, "overview", func(ctx context.Context) (any, error) {
		o := &overviewData{}
		if jl, ok := d.cfg.Engine.(JobLister); ok {
			o.Names = jl.JobNames()
		} else {
			js, err := d.cfg.Engine.Jobs(ctx)
			if err != nil {
				return nil, fmt.Errorf("jobs: %w", err)
			}
			o.all = make(map[string]control.JobInfo, len(js))
			for _, j := range js {
				o.Names, o.all[j.Name] = append(o.Names, j.Name), j
			}
		}
		ns, err := d.cfg.Store.NodesList(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("nodes: %w", err)
		}
		if o.Counts, err = d.cfg.Store.RunsCount(ctx); err != nil {
			return nil, fmt.Errorf("counts: %w", err)
		}
		for _, n := range ns {
			o.Nodes = append(o.Nodes, control.NewNode(n, d.cfg.InactiveThreshold))
		}
		o.ReadAt = time.Now()
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*overviewData), nil
}

// describe returns the JobInfo of the named jobs, in that order, shared
// under key: a JobLister describes those alone (their last runs and
// cursors: two statements), else they are taken from the listing of o.
func (d *Dashboard) describe(ctx context.Context, key string, o *overviewData, names []string) ([]control.JobInfo, error) {
	jl, ok := d.cfg.Engine.(JobLister)
	if !ok {
		var out []control.JobInfo
		for _, n := range names {
			if j, ok := o.all[n]; ok {
				out = append(out, j)
			}
		}
		return out, nil
	}
	v, err := d.snaps.get(ctx, key, func(ctx context.Context) (any, error) {
		js, err := jl.JobsNamed(ctx, names)
		if err != nil {
			return nil, fmt.Errorf("jobs: %w", err)
		}
		return js, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]control.JobInfo), nil
}

// overviewPage is the data of the overview.
type overviewPage struct {
	base
	*overviewData
	// Shown are the jobs of the page: of those whose name contains
	// Filter (Matching of them), the overviewJobs from First (counted
	// from 1).
	Shown    []control.JobInfo
	Matching int
	Filter   string
	First    int
	// Prev and Next are the URLs of the pages before and after; "" for
	// none.
	Prev, Next string
	// CountStatuses are the statuses counted, in the order shown.
	CountStatuses []jobs.Status
}

// Last is the number of the last job shown, counted from 1.
func (p overviewPage) Last() int { return p.First + len(p.Shown) - 1 }

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, s *session) {
	o, err := d.overviewSnapshot(r.Context())
	if err != nil {
		d.storeFailed(w, r, s, err)
		return
	}
	q := r.URL.Query()
	p := overviewPage{base: d.base(r, s, "Overview"), overviewData: o, Filter: strings.TrimSpace(q.Get("q")),
		CountStatuses: []jobs.Status{jobs.StatusPending, jobs.StatusRunning, jobs.StatusRetrying, jobs.StatusDeadLetter}}
	p.Live = liveURL(r)
	matching := o.Names
	if p.Filter != "" {
		matching = nil
		for _, n := range o.Names {
			if strings.Contains(n, p.Filter) {
				matching = append(matching, n)
			}
		}
	}
	p.Matching = len(matching)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	page = min(page, max(1, (len(matching)+overviewJobs-1)/overviewJobs))
	from := (page - 1) * overviewJobs
	names := matching[from:min(from+overviewJobs, len(matching))]
	p.First = from + 1
	pageURL := func(n int) string {
		v := url.Values{}
		if p.Filter != "" {
			v.Set("q", p.Filter)
		}
		if n > 1 {
			v.Set("page", strconv.Itoa(n))
		}
		if len(v) == 0 {
			return control.UIPath
		}
		return control.UIPath + "?" + v.Encode()
	}
	if page > 1 {
		p.Prev = pageURL(page - 1)
	}
	if from+overviewJobs < len(matching) {
		p.Next = pageURL(page + 1)
	}
	if p.Shown, err = d.describe(r.Context(), fmt.Sprintf("jobs\x00%s\x00%d", p.Filter, page), o, names); err != nil {
		d.storeFailed(w, r, s, err)
		return
	}
	d.render(w, r, http.StatusOK, "overview", p)
}

// jobPage is the data of a job's page.
type jobPage struct {
	base
	Job   control.JobInfo
	Ticks []Tick
	// History charts the last chartRuns runs, Timeline lists the last
	// jobRuns of them.
	History  history
	Timeline timeline
	// Runs is the runs page of the job, for more than the timeline shows.
	Runs string
}

func (d *Dashboard) jobPage(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("job")
	var o *overviewData
	if _, ok := d.cfg.Engine.(JobLister); !ok {
		var err error
		if o, err = d.overviewSnapshot(r.Context()); err != nil {
			d.storeFailed(w, r, s, err)
			return
		}
	}
	js, err := d.describe(r.Context(), "job\x00"+name, o, []string{name})
	if err != nil {
		d.storeFailed(w, r, s, err)
		return
	}
	if len(js) != 1 {
		d.fail(w, r, s, http.StatusNotFound, fmt.Sprintf("No job is called %q in this daemon's config.", clip(name)))
		return
	}
	f := store.RunFilter{Job: name, Limit: chartRuns}
	runs, err := d.runsSnapshot(r.Context(), fmt.Sprintf("runs\x00%s\x00\x00%d", name, f.Limit), f)
	if err != nil {
		d.storeFailed(w, r, s, err)
		return
	}
	p := jobPage{base: d.base(r, s, js[0].Name), Job: js[0], Runs: "/ui/runs?job=" + url.QueryEscape(name)}
	p.Live = liveURL(r)
	p.History = newHistory(runs, p.Now)
	p.Timeline = newTimeline(runs[:min(len(runs), jobRuns)], p.Now)
	if ts, ok := d.cfg.Engine.(TickSource); ok && !p.Job.Paused {
		p.Ticks = ts.NextTicks(name, nextTicks)
	}
	d.render(w, r, http.StatusOK, "job", p)
}

// runsSnapshot reads a listing of runs, shared under key, which says
// what f selects.
func (d *Dashboard) runsSnapshot(ctx context.Context, key string, f store.RunFilter) ([]*jobs.Run, error) {
	v, err := d.snaps.get(ctx, key, func(ctx context.Context) (any, error) {
		return d.cfg.Store.RunsList(ctx, f)
	})
	if err != nil {
		return nil, err
	}
	return v.([]*jobs.Run), nil
}

// runsPage is the data of the runs page: a page of runs, of a job, a
// status and a time range when asked, newest first by when they were
// made, listRuns a page.
type runsPage struct {
	base
	Job      string
	Status   jobs.Status
	Statuses []jobs.Status
	// Since and Until are the bounds as given (control.ParsePast), From
	// and To as read.
	Since, Until string
	From, To     time.Time
	// Before is the run the page comes after, "" for the newest.
	Before   string
	Timeline timeline
	Limit    int
	// Older is the URL of the next page, "" when no run follows; Newest
	// that of the first, "" on it.
	Older, Newest string
}

func (d *Dashboard) runsPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	p := runsPage{base: d.base(r, s, "Runs"), Job: q.Get("job"), Statuses: jobs.Statuses, Limit: listRuns,
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")), Before: q.Get("before")}
	if v := q.Get("status"); v != "" {
		st, err := jobs.ParseStatus(v)
		if err != nil {
			d.fail(w, r, s, http.StatusBadRequest, "status: "+err.Error())
			return
		}
		p.Status = st
	}
	for _, b := range []struct {
		name, value string
		to          *time.Time
	}{{"Since", p.Since, &p.From}, {"Until", p.Until, &p.To}} {
		if b.value == "" {
			continue
		}
		t, err := control.ParsePast(b.value, p.Now)
		if err != nil {
			d.fail(w, r, s, http.StatusBadRequest, b.name+": "+err.Error()+".")
			return
		}
		*b.to = t
	}
	if !p.From.IsZero() && !p.To.IsZero() && !p.From.Before(p.To) {
		d.fail(w, r, s, http.StatusBadRequest, fmt.Sprintf("Since (%s) must be before until (%s).", utcText(p.From), utcText(p.To)))
		return
	}
	// One run more than a page: whether another page follows. The key
	// holds the bounds as given, so that a page of the last 7d is shared
	// like any other.
	f := store.RunFilter{Job: p.Job, Status: p.Status, Since: p.From, Until: p.To, Before: p.Before, Limit: listRuns + 1}
	key := fmt.Sprintf("runs\x00%s\x00%s\x00%d\x00%s\x00%s\x00%s", f.Job, f.Status, f.Limit, p.Since, p.Until, p.Before)
	runs, err := d.runsSnapshot(r.Context(), key, f)
	switch {
	case errors.Is(err, store.ErrNotFound) && p.Before != "":
		d.fail(w, r, s, http.StatusNotFound, fmt.Sprintf("There is no run %q to show the runs after: it was pruned with the history. "+
			"The newest runs are at the first page.", clip(p.Before)))
		return
	case err != nil:
		d.storeFailed(w, r, s, err)
		return
	}
	if len(runs) > listRuns {
		runs = runs[:listRuns]
		p.Older = p.pageURL(runs[len(runs)-1].ID)
	}
	if p.Before != "" {
		p.Newest = p.pageURL("")
	}
	p.Live = liveURL(r)
	p.Timeline = newTimeline(runs, p.Now)
	p.Timeline.ShowJob = p.Job == ""
	if p.Job != "" || p.Status != "" || p.Since != "" || p.Until != "" || p.Before != "" {
		p.Timeline.None = "No runs to show: none is of this job, status and time."
	}
	d.render(w, r, http.StatusOK, "runs", p)
}

// SinceText and UntilText say the bounds of p in words: a time as the
// page writes times, and a duration before now as it was given ("7d
// ago"), which the page's live part then says the same way at each poll.
func (p runsPage) SinceText() string { return boundText(p.Since, p.From) }
func (p runsPage) UntilText() string { return boundText(p.Until, p.To) }

func boundText(given string, t time.Time) string {
	if _, err := time.Parse(time.RFC3339, given); err != nil {
		if _, err := time.Parse(time.DateOnly, given); err != nil {
			return given + " ago"
		}
	}
	return utcText(t)
}

// pageURL is the URL of the page of p's filters after the run before
// ("" for the first).
func (p runsPage) pageURL(before string) string {
	v := url.Values{}
	for k, s := range map[string]string{"job": p.Job, "status": string(p.Status), "since": p.Since, "until": p.Until, "before": before} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return "/ui/runs"
	}
	return "/ui/runs?" + v.Encode()
}

// runData is the snapshot of a run's page: the run, its newest
// runAttempts attempts with the head and the tail of their output
// (outputKeep bytes each), and its events.
type runData struct {
	Run      *jobs.Run
	Attempts []*store.ClippedAttempt
	Events   []*jobs.Event
	// Parent is the run whose end made this one (a chain), nil for none
	// or when it was pruned; Children the runs its own end made.
	Parent   *jobs.Run
	Children []*jobs.Run
}

// runPage is the data of a run's page.
type runPage struct {
	base
	*runData
	// Earlier is how many attempts are not shown, before those shown.
	Earlier int
}

func (d *Dashboard) runPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	v, err := d.snaps.get(r.Context(), "run\x00"+id, func(ctx context.Context) (any, error) {
		run, err := d.cfg.Store.RunGet(ctx, id)
		if err != nil {
			return nil, err
		}
		rd := &runData{Run: run}
		if rd.Attempts, err = d.cfg.Store.RunAttemptsClipped(ctx, store.AttemptsParams{RunID: id, Newest: runAttempts, Keep: outputKeep}); err != nil {
			return nil, err
		}
		if rd.Events, err = d.cfg.Store.RunEvents(ctx, id); err != nil {
			return nil, err
		}
		if rd.Children, err = d.cfg.Store.RunChildren(ctx, id); err != nil {
			return nil, err
		}
		if run.ParentRunID != "" {
			rd.Parent, err = d.cfg.Store.RunGet(ctx, run.ParentRunID)
			if errors.Is(err, store.ErrNotFound) {
				rd.Parent, err = nil, nil // pruned: the id alone is shown
			}
			if err != nil {
				return nil, err
			}
		}
		return rd, nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.fail(w, r, s, http.StatusNotFound, fmt.Sprintf("There is no run %q: it never was, or it was pruned with the history.", clip(id)))
		return
	case err != nil:
		d.storeFailed(w, r, s, err)
		return
	}
	rd := v.(*runData)
	p := runPage{base: d.base(r, s, "Run of "+rd.Run.Job), runData: rd}
	if len(rd.Attempts) > 0 {
		p.Earlier = rd.Attempts[0].Number - 1
	}
	p.Live = liveURL(r)
	d.render(w, r, http.StatusOK, "run", p)
}

// attemptOutput serves the whole output of an attempt as text, through
// the API's route (APIServer.Relay), streamed and within its budget of
// output replies; the route's refusals become the error page.
func (d *Dashboard) attemptOutput(w http.ResponseWriter, r *http.Request, s *session) {
	d.relayText(w, r, s, "/v1/runs/"+url.PathEscape(r.PathValue("id"))+"/attempts/"+url.PathEscape(r.PathValue("n"))+"/output")
}

// runOutput serves the output of an attempt of a run as text, through
// the API's route GET /v1/runs/{id}/output with the request's query
// (attempt, from, follow): with follow=1 as the attempt writes it, which
// the page of a running attempt shows, within the route's budget of
// follows.
func (d *Dashboard) runOutput(w http.ResponseWriter, r *http.Request, s *session) {
	path := "/v1/runs/" + url.PathEscape(r.PathValue("id")) + "/output"
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	d.relayText(w, r, s, path)
}

// relayText serves a text reply of the API's route at path as it comes;
// the route's refusals become the error page.
func (d *Dashboard) relayText(w http.ResponseWriter, r *http.Request, s *session, path string) {
	rw := &relayWriter{w: w, header: http.Header{}}
	d.cfg.API.Relay(rw, r, s.caller, path)
	if rw.status == http.StatusOK {
		return
	}
	var eb struct{ Error string }
	_ = json.Unmarshal(rw.body.Bytes(), &eb)
	if ra := rw.header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	msg := "The output could not be read: " + eb.Error
	if rw.status == http.StatusTooManyRequests {
		msg = "The daemon is sending as many outputs as it sends at once: wait a moment and reload the page."
	}
	d.fail(w, r, s, cmp.Or(rw.status, http.StatusInternalServerError), msg)
}

// relayWriter passes a reply of status 200 on to w, its headers after
// the dashboard's; of another status, it keeps the reply (a JSON error)
// for the error page.
type relayWriter struct {
	w      http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (rw *relayWriter) Header() http.Header { return rw.header }

func (rw *relayWriter) WriteHeader(status int) {
	if rw.status != 0 {
		return
	}
	rw.status = status
	if status == http.StatusOK {
		for k, v := range rw.header {
			if k != "Cache-Control" {
				rw.w.Header()[k] = v
			}
		}
		rw.w.WriteHeader(status)
	}
}

func (rw *relayWriter) Write(b []byte) (int, error) {
	rw.WriteHeader(http.StatusOK)
	if rw.status == http.StatusOK {
		return rw.w.Write(b)
	}
	if rw.body.Len() < 64<<10 {
		rw.body.Write(b)
	}
	return len(b), nil
}

// Unwrap lets the route set the deadlines of the connection
// (http.ResponseController).
func (rw *relayWriter) Unwrap() http.ResponseWriter { return rw.w }

// storeFailed answers a page whose data could not be read.
func (d *Dashboard) storeFailed(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if r.Context().Err() != nil {
		return // the browser went away
	}
	d.log.ErrorContext(r.Context(), "dashboard: read a page's data", "path", clip(r.URL.Path), "error", err)
	d.fail(w, r, s, http.StatusServiceUnavailable, "The data of this page could not be read: "+err.Error())
}

// timeline is a list of runs, each with its place on a common time axis
// from the earliest start to the latest end (now for a run that has not
// ended), as percentages. Its rows are in the order of the time they
// show: the runs not started yet first, then the latest started first.
type timeline struct {
	Rows       []timelineRow
	From, To   time.Time
	HasStarted bool
	// ShowJob adds a column with each run's job.
	ShowJob bool
	// None is what to say when there are no rows; "" for "No runs yet."
	None string
}

// timelineRow is one run of a timeline.
type timelineRow struct {
	Run *jobs.Run
	// Start and Duration are zero for a run that has not started.
	Start    time.Time
	Duration time.Duration
	Ended    bool
	// X and Width place the run's bar, in percent of the axis.
	X, Width float64
}

// minBar is the width of the bar of an instant run, in percent.
const minBar = 1.5

func newTimeline(runs []*jobs.Run, now time.Time) timeline {
	tl := timeline{}
	for _, r := range runs {
		row := timelineRow{Run: r, Start: r.StartedAt}
		if !r.StartedAt.IsZero() {
			end := r.FinishedAt
			row.Ended = !end.IsZero()
			if !row.Ended {
				end = now
				if end.Before(r.StartedAt) {
					end = r.StartedAt
				}
			}
			row.Duration = end.Sub(r.StartedAt)
			if !tl.HasStarted || r.StartedAt.Before(tl.From) {
				tl.From = r.StartedAt
			}
			if !tl.HasStarted || end.After(tl.To) {
				tl.To = end
			}
			tl.HasStarted = true
		}
		tl.Rows = append(tl.Rows, row)
	}
	slices.SortStableFunc(tl.Rows, func(a, b timelineRow) int {
		switch {
		case a.Start.IsZero() || b.Start.IsZero():
			return cmp.Compare(boolInt(!a.Start.IsZero()), boolInt(!b.Start.IsZero()))
		default:
			return b.Start.Compare(a.Start)
		}
	})
	span := tl.To.Sub(tl.From)
	for i := range tl.Rows {
		row := &tl.Rows[i]
		if row.Start.IsZero() {
			continue
		}
		if span <= 0 {
			row.X, row.Width = 0, 100
			continue
		}
		row.X = 100 * float64(row.Start.Sub(tl.From)) / float64(span)
		row.Width = max(100*float64(row.Duration)/float64(span), minBar)
		row.X = min(row.X, 100-row.Width)
	}
	return tl
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
