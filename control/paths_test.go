package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// rawRequest sends one request as written, on a connection of its own, and
// returns the reply: no client library cleans or follows anything.
func rawRequest(t *testing.T, network, addr, method, path, body string) (*http.Response, errorBody) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: schedulerd\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, path, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var eb errorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp, eb
}

// TestDotSegmentsRefused: a path with dot segments, plain or encoded, gets
// 400 on the socket; it is not redirected to its cleaned form (a client
// that followed /v1/runs/../jobs/backup/trigger made a run), and nothing
// reaches the engine.
func TestDotSegmentsRefused(t *testing.T) {
	ts := startServer(t, nil)
	for _, tt := range []struct{ method, path string }{
		{"POST", "/v1/runs/../jobs/backup/trigger"},
		{"POST", "/v1/runs/%2e%2e/jobs/backup/trigger"},
		{"POST", "/v1/runs/%2E%2E/jobs/backup/trigger"},
		{"POST", "/v1/runs/.%2e/jobs/backup/trigger"},
		{"POST", "/v1/runs/x/../../v1/jobs/backup/trigger"},
		{"POST", "/v1/jobs/./backup/trigger"},
		{"POST", "/v1/jobs/%2e/backup/trigger"},
		{"POST", "//v1/jobs/backup/trigger"},
		{"POST", "/v1//jobs/backup/trigger"},
		{"POST", "/v1/jobs/backup/trigger/."},
		{"POST", "/v1/jobs/backup/pause/../trigger"},
		{"GET", "/v1/../v1/jobs"},
		{"GET", "/v1/runs/%2e%2e"},
	} {
		resp, eb := rawRequest(t, "unix", ts.Path(), tt.method, tt.path, "{}")
		if resp.StatusCode != http.StatusBadRequest || eb.Code != CodeBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("%s %s: %s %+v (Location %q), want 400 bad_request", tt.method, tt.path, resp.Status, eb, resp.Header.Get("Location"))
		}
	}
	if calls := ts.eng.Calls(); len(calls) != 0 {
		t.Errorf("paths with dot segments reached the engine: %v", calls)
	}
	if runs, err := ts.st.RunsList(context.Background(), store.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("runs were made: %v %v", runs, err)
	}
	// A clean path still works, with a trailing slash answered as before.
	if resp, _ := rawRequest(t, "unix", ts.Path(), "GET", "/v1/jobs", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/jobs: %s", resp.Status)
	}
	if resp, eb := rawRequest(t, "unix", ts.Path(), "GET", "/v1/jobs/", ""); resp.StatusCode != http.StatusNotFound || eb.Code != CodeNotFound {
		t.Errorf("GET /v1/jobs/: %s %+v", resp.Status, eb)
	}
}

// TestClientFollowsNoRedirect: a reply that redirects is an error of the
// client, which never sends the request again elsewhere: a socket whose
// server redirects every request to the trigger endpoint gets no trigger.
func TestClientFollowsNoRedirect(t *testing.T) {
	path := filepath.Join(socketDir(t), "redirect.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var triggered atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs/backup/trigger" {
			triggered.Add(1)
			writeJSON(w, http.StatusCreated, Run{ID: "made", Job: "backup"})
			return
		}
		for _, code := range []int{301, 302, 303, 307, 308} {
			if r.URL.Query().Get("code") == fmt.Sprint(code) {
				http.Redirect(w, r, "/v1/jobs/backup/trigger", code)
				return
			}
		}
		http.Redirect(w, r, "/v1/jobs/backup/trigger", http.StatusTemporaryRedirect)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	c := NewClient(path)
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Trigger(ctx, "other", TriggerRequest{DedupID: "d"}); err == nil {
		t.Error("a trigger answered by a redirect succeeded")
	}
	if _, err := c.Run(ctx, "x"); err == nil {
		t.Error("a read answered by a redirect succeeded")
	}
	if err := c.Progress(ctx, "x", ProgressRequest{Attempt: 1, Percent: 5}); err == nil {
		t.Error("a progress report answered by a redirect succeeded")
	}
	for _, code := range []int{301, 302, 303, 307, 308} {
		err := c.do(ctx, http.MethodPost, "/v1/runs/x/cancel", map[string][]string{"code": {fmt.Sprint(code)}}, struct{}{}, &Run{}, 0)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != code {
			t.Errorf("a %d reply: %v, want an APIError with status %d", code, err, code)
		}
	}
	if n := triggered.Load(); n != 0 {
		t.Fatalf("the client followed a redirect into the trigger endpoint %d times", n)
	}
}
