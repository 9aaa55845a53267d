package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a 127.0.0.1 address whose port is free now, for
// health_listen, which takes a port from 1.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// getReadyz asks /readyz on a fresh connection; 0 when it does not answer.
func getReadyz(addr string) (int, string) {
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHealthReportsStoreDown: with PostgreSQL stopped, /readyz and
// `schedulerd health` report "store unreachable" within moments, not once
// the heartbeat goes stale: the heartbeat is 1s and inactive_threshold
// 10m, and the wait is 30s. When PostgreSQL is back, the node is healthy
// again without a restart.
func TestHealthReportsStoreDown(t *testing.T) {
	pg.Require(t)
	dsn := pg.NewDatabase(t)
	e := newEnv(t)
	addr := freeAddr(t)
	e.writeConfigWith(2, fmt.Sprintf("store = %q\nheartbeat_interval = \"1s\"\ninactive_threshold = \"10m\"\nhealth_listen = %q", dsn, addr),
		`[[job]]
name = "noop"
command = ["/bin/true"]
`)
	d := e.start(true)
	waitFor(t, "/readyz to answer 200", 30*time.Second, func() bool { code, _ := getReadyz(addr); return code == http.StatusOK })
	e.ok("health")

	// Registered after NewDatabase's cleanup, so it runs first: the
	// database is dropped on a running server.
	down := true
	t.Cleanup(func() {
		if down {
			if err := pg.StartServer(); err != nil {
				t.Errorf("restart PostgreSQL: %v", err)
			}
		}
	})
	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var body string
	waitFor(t, "/readyz to report the store unreachable", 30*time.Second, func() bool {
		var code int
		code, body = getReadyz(addr)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "store unreachable")
	})
	t.Logf("/readyz reported the store unreachable %s after PostgreSQL stopped: %s",
		time.Since(stopped).Round(10*time.Millisecond), strings.TrimSpace(body))
	if strings.Contains(body, "heartbeat is stale") {
		t.Errorf("the heartbeat is reported stale 10m before inactive_threshold: %s", body)
	}
	// The socket's health keeps a result for 250ms, so the check from
	// before the stop may still answer for that long: wait, well within a
	// heartbeat_interval, for the socket to say it too.
	var r cliResult
	waitFor(t, "schedulerd health to report the store unreachable", 30*time.Second, func() bool {
		r = e.cli("health")
		return r.code != 0 && strings.Contains(r.stderr, "store unreachable")
	})

	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}
	down = false
	waitFor(t, "/readyz to answer 200 again", time.Minute, func() bool { code, _ := getReadyz(addr); return code == http.StatusOK })
	// The socket keeps its own result for 250ms, which may be the last
	// failure: wait for it to say healthy as well.
	waitFor(t, "schedulerd health to report healthy again", time.Minute, func() bool { return e.cli("health").code == 0 })
	d.stop()
}
