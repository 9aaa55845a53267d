package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// rawClient sends requests over the socket without the typed client.
func rawClient(path string) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}
}

func TestMalformedRequests(t *testing.T) {
	ts := startServer(t, nil)
	hc := rawClient(ts.Path())
	run := insertRun(t, ts.st, "backup", "")
	big := `{"payload": "` + strings.Repeat("x", MaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"oversized body", "POST", "/v1/jobs/backup/trigger", big, 413, CodeTooLarge},
		{"malformed JSON", "POST", "/v1/jobs/backup/trigger", `{"dedup_id": `, 400, CodeBadRequest},
		{"not an object", "POST", "/v1/jobs/backup/trigger", `["backup"]`, 400, CodeBadRequest},
		{"null", "POST", "/v1/jobs/backup/trigger", `null`, 400, CodeBadRequest},
		{"unknown field", "POST", "/v1/jobs/backup/trigger", `{"dedup": "x"}`, 400, CodeBadRequest},
		{"wrong type", "POST", "/v1/jobs/backup/trigger", `{"payload": 3}`, 400, CodeBadRequest},
		{"bad time", "POST", "/v1/jobs/backup/trigger", `{"not_before": "tomorrow"}`, 400, CodeBadRequest},
		{"trailing data", "POST", "/v1/jobs/backup/trigger", `{} {}`, 400, CodeBadRequest},
		{"NUL in payload", "POST", "/v1/jobs/backup/trigger", `{"payload": "a\u0000b"}`, 400, CodeBadRequest},
		{"inverted window", "POST", "/v1/jobs/backup/trigger", `{"not_before": "2030-01-02T00:00:00Z", "not_after": "2030-01-01T00:00:00Z"}`, 400, CodeInvalidWindow},
		{"body on cancel", "POST", "/v1/runs/" + run.ID + "/cancel", `{"force": true}`, 400, CodeBadRequest},
		{"unknown path", "GET", "/v1/nothing", "", 404, CodeNotFound},
		{"root", "GET", "/", "", 404, CodeNotFound},
		{"wrong method", "GET", "/v1/jobs/backup/trigger", "", 405, CodeMethodNotAllowed},
		{"wrong method on a read", "DELETE", "/v1/runs/" + run.ID, "", 405, CodeMethodNotAllowed},
		{"unknown query parameter", "GET", "/v1/runs?jobs=backup", "", 400, CodeBadRequest},
		{"repeated query parameter", "GET", "/v1/runs?job=a&job=b", "", 400, CodeBadRequest},
		{"bad status", "GET", "/v1/runs?status=done", "", 400, CodeBadRequest},
		{"bad limit", "GET", "/v1/runs?limit=0", "", 400, CodeBadRequest},
		{"limit past the most", "GET", "/v1/runs?limit=10001", "", 400, CodeBadRequest},
		{"bad since", "GET", "/v1/runs?since=yesterday", "", 400, CodeBadRequest},
		{"bad until", "GET", "/v1/runs?until=-1h", "", 400, CodeBadRequest},
		{"inverted range", "GET", "/v1/runs?since=2026-05-02&until=2026-05-01", "", 400, CodeBadRequest},
		{"unknown cursor", "GET", "/v1/runs?before=no-such-run", "", 400, CodeBadRequest},
		{"stats: unknown query parameter", "GET", "/v1/stats/runs?status=completed", "", 400, CodeBadRequest},
		{"stats: bad since", "GET", "/v1/stats/runs?since=7", "", 400, CodeBadRequest},
		{"stats: wrong method", "POST", "/v1/stats/runs", "", 405, CodeMethodNotAllowed},
		{"bad wait", "GET", "/v1/runs/" + run.ID + "?wait=forever", "", 400, CodeBadRequest},
		{"progress without body", "POST", "/v1/runs/" + run.ID + "/progress", "", 400, CodeBadRequest},
		{"progress out of range", "POST", "/v1/runs/" + run.ID + "/progress", `{"attempt": 1, "percent": 101}`, 400, CodeBadRequest},
		{"progress attempt 0", "POST", "/v1/runs/" + run.ID + "/progress", `{"attempt": 0, "percent": 1}`, 400, CodeBadRequest},
		{"reload with a body", "POST", "/v1/reload", `{"config": "/tmp/x"}`, 400, CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://schedulerd"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb errorBody
			if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
				t.Fatalf("error reply is not JSON: %v", err)
			}
			if resp.StatusCode != tt.status || eb.Code != tt.code || eb.Error == "" {
				t.Fatalf("%s %s: %d %+v, want %d %s", tt.method, tt.path, resp.StatusCode, eb, tt.status, tt.code)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	if calls := ts.eng.Calls(); len(calls) != 0 {
		t.Errorf("malformed requests reached the engine: %v", calls)
	}
	runs, err := ts.st.RunsList(context.Background(), store.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].Status != jobs.StatusPending {
		t.Errorf("the store changed: %v %v", runs, err)
	}
}

func TestEndpoints(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	c := ts.c

	js, err := c.Jobs(ctx)
	if err != nil || len(js) != 2 || js[0].Name != "backup" {
		t.Fatalf("Jobs: %v %v", js, err)
	}

	nb := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	run, err := c.Trigger(ctx, "backup", TriggerRequest{DedupID: "d1", Payload: "p", NotBefore: &nb})
	if err != nil {
		t.Fatal(err)
	}
	if run.Job != "backup" || run.Status != jobs.StatusPending || run.DedupID != "d1" || run.Payload != "p" ||
		!Time(run.NotBefore).Equal(nb) || run.StartedAt != nil || run.Trigger != jobs.TriggerManual {
		t.Fatalf("triggered run %+v", run)
	}
	got, err := c.Run(ctx, run.ID)
	if err != nil || got.ID != run.ID {
		t.Fatalf("Run: %+v %v", got, err)
	}

	// The JSON has the contract's snake_case fields, null for unset times.
	hc := rawClient(ts.Path())
	resp, err := hc.Get("http://schedulerd/v1/runs/" + run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, k := range []string{"id", "job", "status", "attempt", "max_attempts", "trigger", "scheduled_at", "not_before",
		"not_after", "created_at", "started_at", "finished_at", "node", "exit_code", "error", "dedup_id", "rerun_of"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("run JSON lacks %q: %v", k, raw)
		}
	}
	if raw["started_at"] != nil || raw["exit_code"] != nil {
		t.Errorf("unset fields are not null: %v", raw)
	}
	if s, _ := raw["created_at"].(string); !strings.HasSuffix(s, "Z") {
		t.Errorf("created_at %q is not UTC RFC 3339", raw["created_at"])
	}

	other, err := c.Trigger(ctx, "adhoc", TriggerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := c.Runs(ctx, RunsQuery{Job: "backup"})
	if err != nil || len(runs) != 1 || runs[0].ID != run.ID {
		t.Fatalf("Runs --job: %v %v", runs, err)
	}
	runs, err = c.Runs(ctx, RunsQuery{Limit: 1})
	if err != nil || len(runs) != 1 || runs[0].ID != other.ID {
		t.Fatalf("Runs --limit 1: %v %v", runs, err)
	}
	if runs, err = c.Runs(ctx, RunsQuery{Status: jobs.StatusRunning}); err != nil || len(runs) != 0 {
		t.Fatalf("Runs --status running: %v %v", runs, err)
	}

	events, err := c.Events(ctx, run.ID)
	if err != nil || len(events) != 1 || events[0].To != jobs.StatusPending || events[0].Reason != jobs.ReasonCreated {
		t.Fatalf("Events: %v %v", events, err)
	}
	attempts, err := c.Attempts(ctx, run.ID)
	if err != nil || len(attempts) != 0 {
		t.Fatalf("Attempts: %v %v", attempts, err)
	}

	cancelled, err := c.Cancel(ctx, run.ID)
	if err != nil || cancelled.Status != jobs.StatusCancelled || cancelled.Reason != jobs.ReasonCancelled {
		t.Fatalf("Cancel: %+v %v", cancelled, err)
	}
	// The dedup id is free again once the run is finished.
	if _, err := c.Trigger(ctx, "backup", TriggerRequest{DedupID: "d1"}); err != nil {
		t.Fatalf("trigger with a freed dedup id: %v", err)
	}
	rerun, err := c.Rerun(ctx, run.ID)
	if err != nil || rerun.RerunOf != run.ID || rerun.Trigger != jobs.TriggerRerun {
		t.Fatalf("Rerun: %+v %v", rerun, err)
	}

	if r, err := c.Pause(ctx, "backup"); err != nil || !r.Paused {
		t.Fatalf("Pause: %+v %v", r, err)
	}
	if r, err := c.Resume(ctx, "backup"); err != nil || r.Paused {
		t.Fatalf("Resume: %+v %v", r, err)
	}
	if r, err := c.Forget(ctx, "retired"); err != nil || !r.Forgotten || r.Job != "retired" {
		t.Fatalf("Forget: %+v %v", r, err)
	}

	if _, err := ts.st.NodeRegister(ctx, store.NodeRegisterParams{ID: "n1", Incarnation: "i1", Host: "h", PID: 7, Version: "v", Jobs: []string{"backup"}}); err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].ID != "n1" || nodes[0].State != "active" || nodes[0].PID != 7 {
		t.Fatalf("Nodes: %+v %v", nodes, err)
	}

	h, err := c.Health(ctx)
	if err != nil || !h.OK || h.Node != "test-node" {
		t.Fatalf("Health: %+v %v", h, err)
	}
	ts.eng.setUnhealthy(true)
	// A health result serves the requests of the next healthTTL.
	waitUntil(t, "health to report the problem", 10*time.Second, func() bool {
		h, err = c.Health(ctx)
		return err != nil || !h.OK
	})
	if err != nil || h.OK || len(h.Problems) != 1 {
		t.Fatalf("Health when unhealthy: %+v %v", h, err)
	}

	if err := c.Reload(ctx); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	want := []string{"trigger backup", "trigger adhoc", "cancel " + run.ID, "trigger backup", "rerun " + run.ID,
		"pause backup", "resume backup", "forget retired", "reload"}
	if got := ts.eng.Calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("engine calls %v, want %v", got, want)
	}
}

func TestErrorKinds(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	c := ts.c
	run, err := c.Trigger(ctx, "backup", TriggerRequest{DedupID: "once"})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	tests := []struct {
		name   string
		call   func() error
		kind   error
		status int
		code   string
	}{
		{"unknown job", func() error { _, err := c.Trigger(ctx, "nope", TriggerRequest{}); return err }, ErrUnknownJob, 404, CodeUnknownJob},
		{"duplicate dedup id", func() error { _, err := c.Trigger(ctx, "backup", TriggerRequest{DedupID: "once"}); return err }, ErrDuplicate, 409, CodeDuplicate},
		{"window passed", func() error { _, err := c.Trigger(ctx, "backup", TriggerRequest{NotAfter: &past}); return err }, ErrInvalidWindow, 400, CodeInvalidWindow},
		{"unknown run", func() error { _, err := c.Run(ctx, "no-such-run"); return err }, ErrUnknownRun, 404, CodeUnknownRun},
		{"cancel unknown run", func() error { _, err := c.Cancel(ctx, "no-such-run"); return err }, ErrUnknownRun, 404, CodeUnknownRun},
		{"rerun unknown run", func() error { _, err := c.Rerun(ctx, "no-such-run"); return err }, ErrUnknownRun, 404, CodeUnknownRun},
		{"events of unknown run", func() error { _, err := c.Events(ctx, "no-such-run"); return err }, ErrUnknownRun, 404, CodeUnknownRun},
		{"pause unknown job", func() error { _, err := c.Pause(ctx, "nope"); return err }, ErrUnknownJob, 404, CodeUnknownJob},
		{"pause without schedule", func() error { _, err := c.Pause(ctx, "adhoc"); return err }, ErrNoSchedule, 409, CodeNoSchedule},
		{"forget a declared job", func() error { _, err := c.Forget(ctx, "backup"); return err }, ErrJobDeclared, 409, CodeJobDeclared},
		{"forget what is not expected", func() error { _, err := c.Forget(ctx, "nope"); return err }, ErrNotExpected, 404, CodeNotExpected},
		{"progress of a run that does not run", func() error {
			return jobClient(ts.Path(), run.ID, 1).Progress(ctx, run.ID, ProgressRequest{Attempt: 1, Percent: 5})
		}, ErrFenced, 409, CodeFenced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *APIError
			if !errors.As(err, &ae) || !errors.Is(err, tt.kind) || ae.Status != tt.status || ae.Code != tt.code {
				t.Fatalf("got %#v (%v), want %d %s", err, err, tt.status, tt.code)
			}
		})
	}

	// Cancel of a finished run is an invalid transition.
	if _, err := c.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, run.ID); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("cancel of a cancelled run: %v", err)
	}

	// Progress is fenced by attempt (and the engine's incarnation).
	r2 := insertRun(t, ts.st, "backup", "")
	if rs := claim(t, ts.st, "backup"); len(rs) != 1 || rs[0].ID != r2.ID {
		t.Fatalf("claim: %v", rs)
	}
	if err := jobClient(ts.Path(), r2.ID, 1).Progress(ctx, r2.ID, ProgressRequest{Attempt: 1, Percent: 40, Message: "step 2"}); err != nil {
		t.Fatalf("progress: %v", err)
	}
	if err := jobClient(ts.Path(), r2.ID, 2).Progress(ctx, r2.ID, ProgressRequest{Attempt: 2, Percent: 50}); !errors.Is(err, ErrFenced) {
		t.Fatalf("progress of a stale attempt: %v", err)
	}
	got, err := c.Run(ctx, r2.ID)
	if err != nil || got.Progress != 40 || got.ProgressMessage != "step 2" {
		t.Fatalf("progress not recorded: %+v %v", got, err)
	}

	ts.eng.mu.Lock()
	ts.eng.reloadErr = errors.New("config: x.toml:3: job.schedule: bad")
	ts.eng.mu.Unlock()
	err = c.Reload(ctx)
	if !errors.Is(err, ErrReloadRejected) || !strings.Contains(err.Error(), "x.toml:3") {
		t.Fatalf("rejected reload: %v", err)
	}

	// No daemon: a missing socket.
	if _, err := NewClient(ts.Path() + ".missing").Jobs(ctx); !errors.Is(err, ErrDaemonNotRunning) {
		t.Fatalf("missing socket: %v", err)
	}
}

// TestLongPoll: GET /v1/runs/{id}?wait= returns when the status changes,
// outlives the server's read and write timeouts, and returns at Close.
func TestLongPoll(t *testing.T) {
	ts := startServer(t, func(c *ServerConfig) {
		c.ReadTimeout, c.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
		c.WaitPoll = 20 * time.Millisecond
	})
	ctx := context.Background()
	run := insertRun(t, ts.st, "backup", "")

	// Nothing changes: the poll ends after its wait, past the timeouts.
	start := time.Now()
	got, err := ts.c.WaitRun(ctx, run.ID, jobs.StatusPending, time.Second)
	if err != nil || got.Status != jobs.StatusPending {
		t.Fatalf("WaitRun with no change: %+v %v", got, err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("WaitRun returned after %s, before its wait", d)
	}

	// A change ends the poll.
	done := make(chan *Run, 1)
	go func() {
		r, err := ts.c.WaitRun(ctx, run.ID, jobs.StatusPending, time.Minute)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitUntil(t, "the long poll to wait", 10*time.Second, func() bool { return len(ts.polls) == 1 })
	if _, err := ts.c.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.Status != jobs.StatusCancelled {
			t.Fatalf("WaitRun after cancel: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitRun did not return after the status changed")
	}

	// Follow returns the finished run at once.
	if r, err := ts.c.Follow(ctx, run.ID, nil); err != nil || r.Status != jobs.StatusCancelled {
		t.Fatalf("Follow: %+v %v", r, err)
	}

	// Close ends a poll in progress: Close waits for the requests being
	// served, and returns well before the poll's wait of ten minutes.
	r2 := insertRun(t, ts.st, "backup", "")
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		_, _ = ts.c.WaitRun(ctx, r2.ID, jobs.StatusPending, 10*time.Minute)
	}()
	waitUntil(t, "the long poll to wait", 10*time.Second, func() bool { return len(ts.polls) == 1 })
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := ts.Close(cctx); err != nil {
		t.Fatalf("Close with a long poll: %v", err)
	}
	<-polled
}

// TestBoundedConnections: hundreds of connections that send nothing, or
// half a request, do not keep normal requests out, and the server never
// holds more connections than MaxConns.
func TestBoundedConnections(t *testing.T) {
	const maxConns = 8
	// The silent connections would hold their slots for a minute: the
	// requests below are served because silent ones are evicted.
	ts := startServer(t, func(c *ServerConfig) {
		c.MaxConns = maxConns
		c.ReadHeaderTimeout = time.Minute
	})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < 200; i++ {
		c, err := net.Dial("unix", ts.Path())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if i%2 == 1 {
			fmt.Fprint(c, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n") // and never the end of the headers
		}
		held = append(held, c)
	}

	// Normal requests, many at once, are all served in bounded time.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewClient(ts.Path())
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.Jobs(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a normal request failed: %v", err)
	}
	t.Logf("50 requests served in %s next to 200 silent connections", time.Since(start).Round(time.Millisecond))
	ts.ln.mu.Lock()
	n := len(ts.ln.conns)
	ts.ln.mu.Unlock()
	if n > maxConns || len(ts.ln.sem) > maxConns {
		t.Errorf("%d connections held, max %d", n, maxConns)
	}

	// The silent connections were closed by the server.
	closed := 0
	for _, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		if _, err := bufio.NewReader(c).ReadByte(); err == io.EOF {
			closed++
		}
	}
	if closed == 0 {
		t.Error("no silent connection was evicted")
	}
	t.Logf("%d of %d silent connections were closed", closed, len(held))
}

func TestHealthListener(t *testing.T) {
	eng := &fakeEngine{st: openStore(t)}
	hs, err := ListenHealth("127.0.0.1:0", eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs.Start()
	defer hs.Close(context.Background())
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get("http://" + hs.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, m := get("/readyz"); code != 200 || m["ok"] != true {
		t.Errorf("/readyz healthy: %d %v", code, m)
	}
	eng.setUnhealthy(true)
	// A health result serves the requests of the next healthTTL.
	var (
		code int
		m    map[string]any
	)
	waitUntil(t, "/readyz to report the problem", 10*time.Second, func() bool {
		code, m = get("/readyz")
		return code != 200
	})
	if code != 503 || m["ok"] != false || fmt.Sprint(m["problems"]) == "[]" {
		t.Errorf("/readyz unhealthy: %d %v", code, m)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz while unhealthy: %d", code)
	}
	if code, _ := get("/metrics/x"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
	if calls := eng.Calls(); len(calls) != 0 {
		t.Errorf("health endpoints changed state: %v", calls)
	}
}
