package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testtool"
	"github.com/schedulerd/schedulerd/jobs"
)

// TestMetricsEndpointOfDaemon: a real daemon with health_listen serves
// /metrics in the Prometheus text format, which promtool accepts, and its
// figures follow what it did: ticks fired, attempts started, results by
// status; per job, the last success and failure, runs by status, attempts'
// durations and start lags.
func TestMetricsEndpointOfDaemon(t *testing.T) {
	promtool := promtoolPath(t)
	e := newEnv(t)
	e.writeConfigWith(4, fmt.Sprintf("health_listen = %q", freeAddr(t)), `[[job]]
name = "tick"
schedule = "* * * * * *"
shell = 'true'

[[job]]
name = "fails"
shell = 'exit 3'
retry = { max_attempts = 1 }
`)
	d := e.start(true)
	addr := healthAddr(t, d)
	if r := e.cli("trigger", "fails", "--wait"); r.code != 9 { // the run ended dead_letter
		t.Fatalf("trigger fails --wait: exit %d, %s", r.code, r.stderr)
	}
	var body []byte
	scrape := func() map[string]float64 {
		t.Helper()
		body = scrapeMetrics(t, addr)
		return metricValues(t, body)
	}
	var m map[string]float64
	waitFor(t, "two completed ticks in /metrics", 10*time.Second, func() bool {
		m = scrape()
		return m[`schedulerd_results_total{status="completed"}`] >= 2
	})
	if m[`schedulerd_results_total{status="dead_letter"}`] != 1 || m["schedulerd_jobs"] != 2 || m["schedulerd_concurrency"] != 4 ||
		m["schedulerd_ticks_fired_total"] < 2 || m["schedulerd_attempts_started_total"] < 3 || m["schedulerd_fenced"] != 0 ||
		m["schedulerd_store_statements_total"] <= 0 {
		t.Fatalf("/metrics after two ticks and one failed trigger: %v", m)
	}
	// Two jobs: no fire of 250 ticks or more, so no fire cost measured.
	if v, ok := m["schedulerd_fire_batch_seconds"]; !ok || v != 0 {
		t.Errorf("schedulerd_fire_batch_seconds %v (present %v), want 0", v, ok)
	}
	if age := time.Since(time.UnixMilli(int64(m["schedulerd_last_heartbeat_timestamp_seconds"] * 1000))); age < 0 || age > time.Minute {
		t.Errorf("last heartbeat %s ago", age)
	}
	info := false
	for k := range m {
		info = info || strings.HasPrefix(k, `schedulerd_info{node="test-node",incarnation="`)
	}
	if !info {
		t.Errorf("no schedulerd_info of test-node: %v", m)
	}

	// Per job: the run that failed, and the ticks that completed.
	var failed struct {
		FinishedAt time.Time `json:"finished_at"`
	}
	if r := e.cli("runs", "--job", "fails", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &failed) != nil {
		t.Fatalf("runs --job fails --json: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the results of fails and tick in /metrics", 10*time.Second, func() bool {
		m = scrape()
		return m[`schedulerd_job_last_failure_timestamp_seconds{job="fails"}`] > 0 &&
			m[`schedulerd_job_last_success_timestamp_seconds{job="tick"}`] > 0
	})
	if got, want := m[`schedulerd_job_last_failure_timestamp_seconds{job="fails"}`], float64(failed.FinishedAt.UnixMicro())/1e6; math.Abs(got-want) > 1e-5 {
		t.Errorf("last failure of fails %f, want %f (its run's finished_at)", got, want)
	}
	if age := time.Since(time.UnixMicro(int64(m[`schedulerd_job_last_success_timestamp_seconds{job="tick"}`] * 1e6))); age < 0 || age > time.Minute {
		t.Errorf("last success of tick %s ago", age)
	}
	for series, want := range map[string]float64{
		`schedulerd_job_runs_total{job="fails",status="dead_letter"}`: 1,
		`schedulerd_job_duration_seconds_count{job="fails"}`:          1,
		`schedulerd_job_start_lag_seconds_count{job="fails"}`:         1,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
	if n := m[`schedulerd_job_runs_total{job="tick",status="completed"}`]; n < 2 || n > m[`schedulerd_results_total{status="completed"}`] {
		t.Errorf("runs of tick completed: %v, of %v results completed", n, m[`schedulerd_results_total{status="completed"}`])
	}
	for _, absent := range []string{`schedulerd_job_last_success_timestamp_seconds{job="fails"}`, `schedulerd_job_runs_total{job="fails",status="completed"}`} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s is there: fails never completed", absent)
		}
	}
	promtoolCheckMetrics(t, promtool, body)
	// The alert rules shipped name families that the daemon serves.
	rules, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`schedulerd_[a-z_]+`).FindAllString(string(rules), -1) {
		if !bytes.Contains(body, []byte("# TYPE "+name+" ")) {
			t.Errorf("%s names %s, which /metrics does not serve", alertRules, name)
		}
	}

	// The counters only grow.
	before := m["schedulerd_ticks_fired_total"]
	waitFor(t, "another tick in /metrics", 10*time.Second, func() bool { return scrape()["schedulerd_ticks_fired_total"] > before })
	d.stop()
}

// TestClusterJobMetrics: in a 2-node PostgreSQL cluster, the node that did
// not run a job's run shows its last success on /metrics, from the store's
// notifications, and counts no run of it itself.
func TestClusterJobMetrics(t *testing.T) {
	c := newClusterWith(t, 2, 4, clusterHeartbeat, clusterInactive,
		func(string) string { return fmt.Sprintf("health_listen = %q", freeAddr(t)) }, `[[job]]
name = "report"
shell = 'true'
`)
	addrs := map[string]string{}
	for _, id := range c.ids() {
		addrs[id] = healthAddr(t, c.node(id).d)
	}
	if r := c.cli("node-1", "trigger", "report", "--wait"); r.code != 0 {
		t.Fatalf("trigger report --wait: exit %d, %s", r.code, r.stderr)
	}
	runs := c.runs("report")
	if len(runs) != 1 || runs[0].Status != jobs.StatusCompleted {
		t.Fatalf("runs of report: %v", runs)
	}
	ran := runs[0].Node
	other := "node-1"
	if ran == other {
		other = "node-2"
	}
	want := float64(runs[0].FinishedAt.UnixMicro()) / 1e6
	var m map[string]float64
	waitFor(t, "the last success of report on the node that did not run it", 30*time.Second, func() bool {
		m = metricValues(t, scrapeMetrics(t, addrs[other]))
		return math.Abs(m[`schedulerd_job_last_success_timestamp_seconds{job="report"}`]-want) < 1e-5
	})
	if _, ok := m[`schedulerd_job_runs_total{job="report",status="completed"}`]; ok {
		t.Errorf("%s, which did not run report, counts a run of it: %v", other, m)
	}
	m = metricValues(t, scrapeMetrics(t, addrs[ran]))
	if m[`schedulerd_job_runs_total{job="report",status="completed"}`] != 1 ||
		math.Abs(m[`schedulerd_job_last_success_timestamp_seconds{job="report"}`]-want) > 1e-5 {
		t.Errorf("%s, which ran report: %v", ran, m)
	}
}

// healthAddr returns the address of the daemon's health listener, from
// its log.
func healthAddr(t *testing.T, d *proc) string {
	t.Helper()
	addr := ""
	waitFor(t, "the health listener's address in the log", 10*time.Second, func() bool {
		for _, line := range strings.Split(d.logText(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "health endpoints listening" {
				addr, _ = rec["addr"].(string)
			}
		}
		return addr != ""
	})
	return addr
}

// metricValues returns the samples of an exposition by series.
func metricValues(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if len(f) != 2 || err != nil {
			t.Fatalf("line %q of /metrics", line)
		}
		out[f[0]] = v
	}
	return out
}

// alertRules are the alert rules shipped for Prometheus; alertTests their
// tests (promtool test rules).
const (
	alertRules = "../../contrib/prometheus/alerts.yml"
	alertTests = "../../contrib/prometheus/alerts_test.yml"
)

// TestAlertRules: promtool accepts the shipped alert rules, and they pass
// their tests: each alert fires on the series it is for, and not on the
// others.
func TestAlertRules(t *testing.T) {
	promtool := promtoolPath(t)
	for _, args := range [][]string{{"check", "rules", alertRules}, {"test", "rules", alertTests}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// scrapeMetrics returns the body of GET /metrics at addr, after checking
// its status and content type.
func scrapeMetrics(t *testing.T, addr string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return body
}

// promtoolPath returns promtool (Debian's prometheus package), which CI
// installs (.ci/run); elsewhere a missing one skips the test.
func promtoolPath(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "prometheus", "promtool")
}

// promtoolCheckMetrics fails the test unless promtool check metrics
// accepts the exposition body (its format, and its lint: help texts,
// names and units).
func promtoolCheckMetrics(t *testing.T, promtool string, body []byte) {
	t.Helper()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\nof:\n%s", err, out, body)
	}
}
