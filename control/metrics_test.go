package control

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// metricsEngine is a fakeEngine with figures for /metrics.
type metricsEngine struct {
	*fakeEngine
	m Metrics
}

func (e *metricsEngine) Metrics() Metrics { return e.m }

func (e *metricsEngine) WriteJobMetrics(w io.Writer) {
	io.WriteString(w, "# HELP schedulerd_job_x_total x.\n# TYPE schedulerd_job_x_total counter\nschedulerd_job_x_total{job=\"a\"} 7\n")
}

// TestMetricsEndpoint: /metrics is the engine's figures in the Prometheus
// text format, label values escaped, then its per-job families; an engine
// without figures has no /metrics.
func TestMetricsEndpoint(t *testing.T) {
	eng := &metricsEngine{fakeEngine: &fakeEngine{st: openStore(t)}, m: Metrics{
		Node: `web"1`, Incarnation: "inc\n2", Version: `v\1`, Jobs: 3, Concurrency: 8, Running: 2, Fenced: true,
		LastHeartbeat: time.UnixMilli(1_700_000_000_250), TicksFired: 41, AttemptsStarted: 40,
		Results:     map[string]int64{"completed": 37, "dead_letter": 1, "retrying": 2, "cancelled": 0},
		StaleWrites: 1, StoreStatements: 1234, FireBatch: 37500 * time.Microsecond,
	}}
	srv := httptest.NewServer(HealthHandler(eng))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != metricsContentType {
		t.Fatalf("/metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text := string(body)
	for _, want := range []string{
		`schedulerd_info{node="web\"1",incarnation="inc\n2",version="v\\1"} 1`,
		"# TYPE schedulerd_jobs gauge\nschedulerd_jobs 3\n",
		"schedulerd_concurrency 8\n",
		"schedulerd_attempts_running 2\n",
		"schedulerd_fenced 1\n",
		"schedulerd_last_heartbeat_timestamp_seconds 1700000000.250\n",
		"schedulerd_last_loop_timestamp_seconds 0\n",
		"# TYPE schedulerd_ticks_fired_total counter\nschedulerd_ticks_fired_total 41\n",
		"schedulerd_attempts_started_total 40\n",
		"schedulerd_results_total{status=\"cancelled\"} 0\nschedulerd_results_total{status=\"completed\"} 37\n" +
			"schedulerd_results_total{status=\"dead_letter\"} 1\nschedulerd_results_total{status=\"retrying\"} 2\n",
		"schedulerd_stale_writes_rejected_total 1\n",
		"schedulerd_store_statements_total 1234\n",
		"# TYPE schedulerd_fire_batch_seconds gauge\nschedulerd_fire_batch_seconds 0.037500\n",
		"# TYPE schedulerd_job_x_total counter\nschedulerd_job_x_total{job=\"a\"} 7\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
	// Every line is a comment or "name[{labels}] value".
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		if f := strings.Fields(line); len(f) != 2 || !strings.HasPrefix(f[0], "schedulerd_") {
			t.Errorf("line %q is not a sample", line)
		}
	}

	plain := httptest.NewServer(HealthHandler(&fakeEngine{st: openStore(t)}))
	defer plain.Close()
	if resp, err := http.Get(plain.URL + "/metrics"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("/metrics of an engine without figures: %v %v", resp, err)
	}
}
