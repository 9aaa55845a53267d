package scheduler

import (
	"bufio"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
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
// start lags, the ticks it skipped. Counters and histograms of the metrics
// library (VictoriaMetrics/metrics: its PrometheusHistogram has the le
// buckets that Prometheus and promtool expect), made for a job when this
// node first has something to count of it, so that a node that declares
// 100,000 jobs and runs few of them holds few; and removed when a reload
// removes the job. They are spread over metricShards sets of each family:
// the library removes a series from a set in time proportional to the
// set's size, and a scrape writes each set whole into a buffer first, so
// small sets keep both bounded. The library's own HELP text is empty,
// which promtool rejects: the families' HELP and TYPE lines are written
// here, and the sets write their samples only.

// Buckets of the histograms, in seconds. An attempt runs for anything from
// milliseconds to hours; a start is late by milliseconds when all is well,
// and by up to misfire_grace (default 1m) when it is not. Each bucket is a
// series per job, so they are few.
var (
	durationBuckets = []float64{0.1, 1, 10, 60, 300, 1800, 7200}
	startLagBuckets = []float64{0.01, 0.1, 1, 10, 60}
)

// metricShards is the number of sets each family of this node's series is
// spread over.
const metricShards = 64

// The families of this node's series, in the order a scrape writes them.
const (
	familyRuns = iota
	familyDuration
	familyStartLag
	familyTicksSkipped
	familyCount
)

// family is the name, type and help text of a metric family.
type family struct{ name, kind, help string }

var nodeFamilies = [familyCount]family{
	familyRuns: {"schedulerd_job_runs_total", "counter",
		"Runs of the job that this node ended, by the status they ended in (completed, dead_letter, cancelled)."},
	familyDuration: {"schedulerd_job_duration_seconds", "histogram",
		"How long the job's attempts ran on this node."},
	familyStartLag: {"schedulerd_job_start_lag_seconds", "histogram",
		"How late the job's attempts started on this node after the time their run was due (its tick, a retry's time, a trigger's time)."},
	familyTicksSkipped: {"schedulerd_job_ticks_skipped_total", "counter",
		"Ticks of the job that this node skipped: missed by more than misfire_grace and not caught up, or skipped by overlap = skip."},
}

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
// counts them.
var endStatuses = [...]jobs.Status{jobs.StatusCompleted, jobs.StatusDeadLetter, jobs.StatusCancelled}

// jobMetrics are this node's per-job series. Scheduler.mu guards series,
// and the making and removal of series in the sets.
type jobMetrics struct {
	series map[string]*jobSeries
	sets   [familyCount][metricShards]*metrics.Set
}

func newJobMetrics() *jobMetrics {
	m := &jobMetrics{series: map[string]*jobSeries{}}
	for f := range m.sets {
		for i := range m.sets[f] {
			m.sets[f][i] = metrics.NewSet()
		}
	}
	return m
}

// jobSeries are the series of one job, each made at its first count:
// the histograms when an attempt of the job is claimed (attempted).
type jobSeries struct {
	shard             int
	label             string // job="...", escaped
	duration, lag     *metrics.PrometheusHistogram
	runs              [len(endStatuses)]*metrics.Counter
	skipped           *metrics.Counter
	sets              *[familyCount][metricShards]*metrics.Set
	durationN, startN string // the histograms' series names
}

// of returns the series of job, made (with none yet) if it has none.
// Scheduler.mu is held, and the job is declared.
func (m *jobMetrics) of(job string) *jobSeries {
	if js := m.series[job]; js != nil {
		return js
	}
	h := fnv.New32a()
	h.Write([]byte(job))
	js := &jobSeries{shard: int(h.Sum32() % metricShards), label: `job="` + escapeLabel(job) + `"`, sets: &m.sets}
	js.durationN = nodeFamilies[familyDuration].name + "{" + js.label + "}"
	js.startN = nodeFamilies[familyStartLag].name + "{" + js.label + "}"
	m.series[job] = js
	return js
}

// attempted makes the histograms of the job's attempts, when an attempt
// of it is claimed; the attempt observes them without Scheduler.mu.
// Scheduler.mu is held.
func (js *jobSeries) attempted() *jobSeries {
	if js.duration == nil {
		js.duration = js.sets[familyDuration][js.shard].GetOrCreatePrometheusHistogramExt(js.durationN, durationBuckets)
		js.lag = js.sets[familyStartLag][js.shard].GetOrCreatePrometheusHistogramExt(js.startN, startLagBuckets)
	}
	return js
}

// runEnded counts a run of the job that ended with status. Scheduler.mu
// is held.
func (js *jobSeries) runEnded(status jobs.Status) {
	for i, st := range endStatuses {
		if st != status {
			continue
		}
		if js.runs[i] == nil {
			js.runs[i] = js.sets[familyRuns][js.shard].GetOrCreateCounter(js.runsName(i))
		}
		js.runs[i].Inc()
	}
}

func (js *jobSeries) runsName(i int) string {
	return nodeFamilies[familyRuns].name + "{" + js.label + `,status="` + string(endStatuses[i]) + `"}`
}

func (js *jobSeries) skippedName() string {
	return nodeFamilies[familyTicksSkipped].name + "{" + js.label + "}"
}

// ticksSkipped counts n ticks of the job skipped. Scheduler.mu is held.
func (js *jobSeries) ticksSkipped(n int) {
	if js.skipped == nil {
		js.skipped = js.sets[familyTicksSkipped][js.shard].GetOrCreateCounter(js.skippedName())
	}
	js.skipped.Add(n)
}

// remove removes the job's series from the sets.
func (js *jobSeries) remove() {
	sets := js.sets
	if js.duration != nil {
		sets[familyDuration][js.shard].UnregisterMetric(js.durationN)
		sets[familyStartLag][js.shard].UnregisterMetric(js.startN)
	}
	for i, c := range js.runs {
		if c != nil {
			sets[familyRuns][js.shard].UnregisterMetric(js.runsName(i))
		}
	}
	if js.skipped != nil {
		sets[familyTicksSkipped][js.shard].UnregisterMetric(js.skippedName())
	}
}

// retain removes the series of the jobs for which keep is false.
// Scheduler.mu is held.
func (m *jobMetrics) retain(keep func(job string) bool) {
	for job, js := range m.series {
		if !keep(job) {
			js.remove()
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
		js.ticksSkipped(n)
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
// node's series. It reads memory only.
func (s *Scheduler) WriteJobMetrics(w io.Writer) {
	type values struct {
		label string
		v     [2]int64
	}
	s.mu.Lock()
	vals := make([]values, 0, len(s.declared.all))
	var overdue []values // v[0]: 1 or 0
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
	for f := range nodeFamilies {
		writeFamilyHeader(bw, nodeFamilies[f])
		for _, set := range s.perJob.sets[f] {
			set.WritePrometheus(bw)
		}
	}
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
	frac := strconv.FormatInt(us%1e6+1e6, 10) // 1xxxxxx: six digits after the 1
	return append(b, '.', frac[1], frac[2], frac[3], frac[4], frac[5], frac[6])
}
