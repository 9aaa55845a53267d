package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMetricsEndpointOfDaemon: a real daemon with health_listen serves
// /metrics in the Prometheus text format, and its counters follow what it
// did: ticks fired, attempts started, results by status.
func TestMetricsEndpointOfDaemon(t *testing.T) {
	e := newEnv(t)
	// health_listen takes a port from 1: take one the system has free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().String()
	ln.Close()
	e.writeConfigWith(4, fmt.Sprintf("health_listen = %q", free), `[[job]]
name = "tick"
schedule = "* * * * * *"
shell = 'true'

[[job]]
name = "fails"
shell = 'exit 3'
retry = { max_attempts = 1 }
`)
	d := e.start(true)
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
	if r := e.cli("trigger", "fails", "--wait"); r.code != 9 { // the run ended dead_letter
		t.Fatalf("trigger fails --wait: exit %d, %s", r.code, r.stderr)
	}
	scrape := func() map[string]float64 {
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
	// The counters only grow.
	before := m["schedulerd_ticks_fired_total"]
	waitFor(t, "another tick in /metrics", 10*time.Second, func() bool { return scrape()["schedulerd_ticks_fired_total"] > before })
	d.stop()
}
