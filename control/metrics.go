package control

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Metrics are the figures GET /metrics exposes, in the Prometheus text
// format.
type Metrics struct {
	Node, Incarnation, Version string
	Jobs, Concurrency, Running int
	Fenced                     bool
	LastHeartbeat, LastLoop    time.Time
	TicksFired                 int64
	AttemptsStarted            int64
	Results                    map[string]int64 // results written, by the run status they wrote
	StaleWrites                int64
	StoreStatements            int64 // -1 when the store does not count them
	// FireBatch is how long the store takes to write the runs of 500 cron
	// ticks; 0 until measured.
	FireBatch time.Duration
}

// MetricsSource is an Engine with figures for /metrics. They are read
// from memory: a scrape costs the store nothing.
type MetricsSource interface {
	Metrics() Metrics
	// WriteJobMetrics writes the per-job metric families, in the
	// Prometheus text format, after the node's.
	WriteJobMetrics(w io.Writer)
}

// metricsContentType is the Prometheus text exposition format.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

func serveMetrics(src MetricsSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", metricsContentType)
		w.WriteHeader(http.StatusOK)
		writeMetrics(w, src.Metrics())
		src.WriteJobMetrics(w)
	}
}

// writeMetrics writes m in the Prometheus text format.
func writeMetrics(w io.Writer, m Metrics) {
	one := func(name, kind, help string, value any, labels ...string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		fmt.Fprintf(w, "%s%s %v\n", name, labelText(labels), value)
	}
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	ts := func(t time.Time) string {
		if t.IsZero() || t.Unix() <= 0 {
			return "0"
		}
		return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000)
	}
	one("schedulerd_info", "gauge", "This process: node id, incarnation and version.", 1,
		"node", m.Node, "incarnation", m.Incarnation, "version", m.Version)
	one("schedulerd_jobs", "gauge", "Jobs declared in the running config.", m.Jobs)
	one("schedulerd_concurrency", "gauge", "Attempts this node runs at once at most.", m.Concurrency)
	one("schedulerd_attempts_running", "gauge", "Attempts of this node whose result is not written yet.", m.Running)
	one("schedulerd_fenced", "gauge", "1 while the node has fenced itself (claims nothing until it rejoins).", b(m.Fenced))
	one("schedulerd_last_heartbeat_timestamp_seconds", "gauge", "Unix time of the last successful heartbeat.", ts(m.LastHeartbeat))
	one("schedulerd_last_loop_timestamp_seconds", "gauge", "Unix time of the last scheduling loop iteration.", ts(m.LastLoop))
	one("schedulerd_ticks_fired_total", "counter", "Runs this process made for cron ticks.", m.TicksFired)
	one("schedulerd_attempts_started_total", "counter", "Handlers or processes this process started.", m.AttemptsStarted)
	name := "schedulerd_results_total"
	fmt.Fprintf(w, "# HELP %s Attempt results this process wrote, by the run status they wrote.\n# TYPE %s counter\n", name, name)
	statuses := make([]string, 0, len(m.Results))
	for st := range m.Results {
		statuses = append(statuses, st)
	}
	sort.Strings(statuses)
	for _, st := range statuses {
		fmt.Fprintf(w, "%s%s %d\n", name, labelText([]string{"status", st}), m.Results[st])
	}
	one("schedulerd_stale_writes_rejected_total", "counter",
		"Results refused because the attempt had been taken from this node (fencing).", m.StaleWrites)
	one("schedulerd_fire_batch_seconds", "gauge",
		"Time the store takes to write the runs of 500 cron ticks (median of the last three fires of 250 or more); 0 until measured.",
		fmt.Sprintf("%.6f", m.FireBatch.Seconds()))
	if m.StoreStatements >= 0 {
		one("schedulerd_store_statements_total", "counter", "SQL statements this process sent to its store.", m.StoreStatements)
	}
}

// labelText is {k="v",...} of pairs, with values escaped as the text
// format wants.
func labelText(pairs []string) string {
	if len(pairs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(pairs[i+1])
		fmt.Fprintf(&b, `%s="%s"`, pairs[i], v)
	}
	b.WriteByte('}')
	return b.String()
}
