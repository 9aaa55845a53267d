package scheduler

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/VictoriaMetrics/metrics"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Per-job metrics come in two kinds.
//
// The cluster's: the last success and the last failure of each declared
// job, wherever its run ended. They are kept in the job's jobState, read
// from the store at start and reload and then told by the store's
// ResultFeed, so a scrape reads memory only, however many jobs there are,
// and an idle node asks the store nothing for them.
//
// This node's: the runs it ended by status, its attempts' durations and
// start lags, the ticks it skipped. Counters of the metrics library
// (VictoriaMetrics/metrics) and histograms of our own (histogram), made
// for a job when this node first has something to count of it, so that a
// node that declares 100,000 jobs and runs few of them holds few; and
// removed when a reload removes the job. A scrape writes them itself,
// appending lines to one buffer, because the library's writer formats
// each line anew (a node that ran 100,000 jobs serves 1.8 million lines)
// and its help texts are empty, which promtool rejects. The histograms are
// exposed with le buckets.

// The histograms' le bounds, in seconds: powers of ten. An
// attempt runs for anything from milliseconds to hours; a start is late
// by milliseconds when all is well, and by up to misfire_grace (default
// 1m) when it is not. Each bucket is a series per job, so they are few.
var (
	durationFamily = newHistFamily(family{"schedulerd_job_duration_seconds", "histogram",
		"How long the job's attempts ran on this node."},
		0.1, 1, 10, 100, 1000, 10000)
	startLagFamily = newHistFamily(family{"schedulerd_job_start_lag_seconds", "histogram",
		"How late the job's attempts started on this node after the time their run was due (its tick, a retry's time, a trigger's time)."},
		0.01, 0.1, 1, 10, 100)
)

// The counter families of this node's series.
var (
	runsFamily = family{"schedulerd_job_runs_total", "counter",
		"Runs of the job that this node ended, by the status they ended in (completed, dead_letter, cancelled)."}
	ticksSkippedFamily = family{"schedulerd_job_ticks_skipped_total", "counter",
		"Ticks of the job that this node skipped: missed by more than misfire_grace and not caught up, or skipped by overlap = skip."}
)

// family is the name, type and help text of a metric family.
type family struct{ name, kind, help string }

// clusterFamilies are the per-job gauges whose values are the cluster's,
// read from each declared job's jobState (absent while the value is).
var clusterFamilies = []struct {
	family
	value func(j *jobState) int64 // Unix microseconds; noTick: absent
}{
	{family{"schedulerd_job_last_success_timestamp_seconds", "gauge",
		"Unix time at which the newest run of the job that completed finished, on any node; absent until one did."},
		func(j *jobState) int64 { return j.succeeded }},
	{family{"schedulerd_job_last_failure_timestamp_seconds", "gauge",
		"Unix time at which the newest run of the job that ended dead_letter (failed after its last attempt) finished, on any node; absent until one did."},
		func(j *jobState) int64 { return j.failed }},
}

// overdueFamily is 1 while a job with expect_success_within is overdue,
// cluster-wide, and 0 otherwise; jobs without it have no series.
var overdueFamily = family{"schedulerd_job_overdue", "gauge",
	"1 while no run of the job completed within its expect_success_within (cluster-wide), else 0; only jobs with expect_success_within."}

// endStatuses are the statuses runs end in, as schedulerd_job_runs_total
// counts them; statusLabels their labels.
var (
	endStatuses  = [...]jobs.Status{jobs.StatusCompleted, jobs.StatusDeadLetter, jobs.StatusCancelled}
	statusLabels = func() (l [len(endStatuses)]string) {
		for i, st := range endStatuses {
			l[i] = `,status="` + string(st) + `"`
		}
		return l
	}()
)

// jobMetrics are this node's per-job series, by job. Scheduler.mu guards
// the map, and the making of a job's attempts series.
type jobMetrics struct {
	series map[string]*jobSeries
}

func newJobMetrics() *jobMetrics {
	return &jobMetrics{series: map[string]*jobSeries{}}
}

// jobSeries are the series of one job. A scrape reads them without
// Scheduler.mu: the counters are atomic, and a counter is written once it
// is not zero (it only grows); the attempts' histograms from when the
// first attempt of the job is claimed.
type jobSeries struct {
	label    string // job="...", escaped
	runs     [len(endStatuses)]metrics.Counter
	skipped  metrics.Counter
	attempts atomic.Pointer[attemptSeries]
}

// attemptSeries are the histograms of a job's attempts.
type attemptSeries struct{ duration, startLag histogram }

// of returns the series of job, made (with none yet) if it has none.
// Scheduler.mu is held, and the job is declared.
func (m *jobMetrics) of(job string) *jobSeries {
	if js := m.series[job]; js != nil {
		return js
	}
	js := &jobSeries{label: `job="` + escapeLabel(job) + `"`}
	m.series[job] = js
	return js
}

// attempted returns the histograms of the job's attempts, made when the
// first attempt of it is claimed; the attempt observes them without
// Scheduler.mu. Scheduler.mu is held.
func (js *jobSeries) attempted() *attemptSeries {
	as := js.attempts.Load()
	if as == nil {
		as = &attemptSeries{duration: histogram{hf: &durationFamily}, startLag: histogram{hf: &startLagFamily}}
		js.attempts.Store(as)
	}
	return as
}

// runEnded counts a run of the job that ended with status.
func (js *jobSeries) runEnded(status jobs.Status) {
	for i, st := range endStatuses {
		if st == status {
			js.runs[i].Inc()
		}
	}
}

// retain removes the series of the jobs for which keep is false.
// Scheduler.mu is held.
func (m *jobMetrics) retain(keep func(job string) bool) {
	for job := range m.series {
		if !keep(job) {
			delete(m.series, job)
		}
	}
}

// escapeLabel escapes a label value as the text format wants it.
func escapeLabel(v string) string {
	if !strings.ContainsAny(v, "\\\"\n") && utf8.ValidString(v) {
		return v
	}
	return labelEscaper.Replace(strings.ToValidUTF8(v, "\uFFFD"))
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// seriesOf returns the series of a declared job, made if need be; nil
// when the job is not declared (a reload removed it). Scheduler.mu is
// held.
func (s *Scheduler) seriesOf(job string) *jobSeries {
	if s.declared.job(job) == nil {
		return nil
	}
	return s.perJob.of(job)
}

// noteRunsEnded counts, in schedulerd_job_runs_total, the runs of runs
// that this node ended (the others are skipped).
func (s *Scheduler) noteRunsEnded(runs ...*jobs.Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range runs {
		if r == nil || !r.Status.Terminal() {
			continue
		}
		if js := s.seriesOf(r.Job); js != nil {
			js.runEnded(r.Status)
		}
	}
}

// noteTicksSkipped counts n ticks of job skipped by this node.
func (s *Scheduler) noteTicksSkipped(job string, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if js := s.seriesOf(job); js != nil {
		js.skipped.Add(n)
	}
}

// applyResults records results that the store read or told of in the
// declared and retired jobs' states, each time kept when newer.
func (s *Scheduler) applyResults(rs []store.JobResult) {
	if len(rs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overdueChanged = true
	for _, r := range rs {
		j := s.declared.job(r.Job)
		if j == nil {
			if rj := s.retired.job(r.Job); rj != nil && micros(r.LastSuccess) > rj.succeeded {
				rj.succeeded, rj.overdue = micros(r.LastSuccess), false
			}
			continue
		}
		if micros(r.LastSuccess) > j.succeeded {
			j.overdue = false // the success ended it, in the store too
		}
		j.succeeded = max(j.succeeded, micros(r.LastSuccess))
		j.failed = max(j.failed, micros(r.LastFailure))
	}
}

// WriteJobMetrics writes the per-job metric families in the Prometheus
// text format: the cluster's values for every declared job, then this
// node's series, each family's in the declared jobs' order. It reads
// memory only, and holds Scheduler.mu only to copy what it writes.
func (s *Scheduler) WriteJobMetrics(w io.Writer) {
	type values struct {
		label string
		v     [2]int64
	}
	s.mu.Lock()
	vals := make([]values, 0, len(s.declared.all))
	var overdue []values // v[0]: 1 or 0
	series := make([]*jobSeries, 0, len(s.perJob.series))
	for _, j := range s.declared.all {
		if j.def.ExpectSuccessWithin > 0 {
			o := values{label: j.def.Name}
			if j.overdue {
				o.v[0] = 1
			}
			overdue = append(overdue, o)
		}
		var v [2]int64
		any := false
		for i, f := range clusterFamilies {
			v[i] = f.value(j)
			any = any || v[i] != noTick
		}
		if any {
			vals = append(vals, values{label: j.def.Name, v: v})
		}
		if js := s.perJob.series[j.def.Name]; js != nil {
			series = append(series, js)
		}
	}
	for _, r := range s.retired { // expected, not declared (expect.go)
		if s.declared.job(r.exp.Job) != nil {
			continue
		}
		o := values{label: r.exp.Job}
		if r.overdue {
			o.v[0] = 1
		}
		overdue = append(overdue, o)
	}
	s.mu.Unlock()

	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	var line []byte
	for i, f := range clusterFamilies {
		writeFamilyHeader(bw, f.family)
		for _, v := range vals {
			if v.v[i] == noTick {
				continue
			}
			line = append(line[:0], f.name...)
			line = append(line, `{job="`...)
			line = append(line, escapeLabel(v.label)...)
			line = append(line, `"} `...)
			line = appendSeconds(line, v.v[i])
			line = append(line, '\n')
			bw.Write(line)
		}
	}
	writeFamilyHeader(bw, overdueFamily)
	for _, o := range overdue {
		line = append(line[:0], overdueFamily.name...)
		line = append(line, `{job="`...)
		line = append(line, escapeLabel(o.label)...)
		line = append(line, `"} `...)
		line = strconv.AppendInt(line, o.v[0], 10)
		line = append(line, '\n')
		bw.Write(line)
	}
	writeNodeSeries(bw, series)
}

// writeNodeSeries writes the families of this node's series, each of
// series in turn within each family. Each job's lines are appended to the
// writer's free buffer and written from there, so that a scrape formats
// without allocating.
func writeNodeSeries(bw *bufio.Writer, series []*jobSeries) {
	writeFamilyHeader(bw, runsFamily)
	for _, js := range series {
		b := bw.AvailableBuffer()
		for i := range js.runs {
			if n := js.runs[i].Get(); n > 0 {
				b = appendCounter(b, runsFamily.name, js.label, statusLabels[i], n)
			}
		}
		bw.Write(b)
	}
	for _, f := range [...]struct {
		*histFamily
		of func(*attemptSeries) *histogram
	}{
		{&durationFamily, func(as *attemptSeries) *histogram { return &as.duration }},
		{&startLagFamily, func(as *attemptSeries) *histogram { return &as.startLag }},
	} {
		writeFamilyHeader(bw, f.family)
		for _, js := range series {
			if as := js.attempts.Load(); as != nil {
				bw.Write(f.appendSeries(bw.AvailableBuffer(), js.label, f.of(as)))
			}
		}
	}
	writeFamilyHeader(bw, ticksSkippedFamily)
	for _, js := range series {
		if n := js.skipped.Get(); n > 0 {
			bw.Write(appendCounter(bw.AvailableBuffer(), ticksSkippedFamily.name, js.label, "", n))
		}
	}
}

// appendCounter appends the line of a counter: name{label more} n.
func appendCounter(b []byte, name, label, more string, n uint64) []byte {
	b = append(b, name...)
	b = append(b, '{')
	b = append(b, label...)
	b = append(b, more...)
	b = append(b, "} "...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, '\n')
}

func writeFamilyHeader(w io.Writer, f family) {
	io.WriteString(w, "# HELP "+f.name+" "+f.help+"\n# TYPE "+f.name+" "+f.kind+"\n")
}

// appendSeconds appends Unix microseconds us as decimal seconds, exactly.
func appendSeconds(b []byte, us int64) []byte {
	if us < 0 {
		b = append(b, '-')
		us = -us
	}
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, '.')
	n := len(b)
	b = strconv.AppendInt(b, us%1e6+1e6, 10) // 1xxxxxx: six digits after the 1
	return append(b[:n], b[n+1:]...)
}
