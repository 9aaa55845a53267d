package control

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// FuzzControlRequest feeds arbitrary methods, paths and bodies to the
// server's handler. Whatever comes in, the handler does not panic, a bad
// request never gets a 5xx, and the engine sees no state-changing call
// unless the request was a well-formed POST to an endpoint.
func FuzzControlRequest(f *testing.F) {
	st := openStore(f)
	eng := &fakeEngine{st: st}
	s, err := newServer(ServerConfig{Engine: eng, Store: st, Logger: slog.New(slog.DiscardHandler), MaxWait: 10 * time.Millisecond, WaitPoll: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	seeds := []struct{ method, path, body string }{
		{"GET", "/v1/jobs", ""},
		{"POST", "/v1/jobs/backup/trigger", `{}`},
		{"POST", "/v1/jobs/backup/trigger", `{"dedup_id": "d", "payload": "p", "not_before": "2030-01-01T00:00:00Z", "not_after": "2030-01-02T00:00:00Z"}`},
		{"POST", "/v1/jobs/backup/trigger", `{"not_after": "2000-01-01T00:00:00Z"}`},
		{"POST", "/v1/jobs/nope/trigger", `{}`},
		{"POST", "/v1/jobs/backup/trigger", `{"dedup_id": 1}`},
		{"POST", "/v1/jobs/backup/trigger", `{"unknown": 1}`},
		{"POST", "/v1/jobs/backup/trigger", `{"payload": "` + strings.Repeat("x", 100) + `"`},
		{"POST", "/v1/jobs/backup/pause", ""},
		{"POST", "/v1/jobs/adhoc/resume", "{}"},
		{"POST", "/v1/jobs/retired/forget", ""},
		{"POST", "/v1/jobs/backup/forget", `{"unknown": 1}`},
		{"POST", "/v1/jobs/backup/backfill", `{"from": "2026-11-01T03:00:00Z", "to": "2026-11-02", "dry_run": true, "max_parallel": 2, "yes": true}`},
		{"POST", "/v1/jobs/adhoc/backfill", `{"from": "2026-11-01", "to": "2026-11-02"}`},
		{"POST", "/v1/jobs/backup/backfill", `{"from": "2026-11-01", "max_parallel": -1}`},
		{"GET", "/v1/runs?job=backup&status=pending&limit=5", ""},
		{"GET", "/v1/runs?limit=-1", ""},
		{"GET", "/v1/runs?since=7d&until=2030-01-01&before=x&limit=2", ""},
		{"GET", "/v1/runs?since=tomorrow", ""},
		{"GET", "/v1/stats/runs?job=backup&since=1d12h&until=2030-01-01T00:00:00Z", ""},
		{"GET", "/v1/runs/x?wait=1ms&status=running", ""},
		{"GET", "/v1/runs/x/attempts", ""},
		{"GET", "/v1/runs/x/events", ""},
		{"GET", "/v1/runs/x/children", ""},
		{"GET", "/v1/runs/x/output?follow=1&attempt=1&from=0", ""},
		{"GET", "/v1/runs/x/output?follow=maybe", ""},
		{"POST", "/v1/runs/x/cancel", ""},
		{"POST", "/v1/runs/x/rerun", "{}"},
		{"POST", "/v1/runs/x/progress", `{"attempt": 1, "percent": 50, "message": "half"}`},
		{"POST", "/v1/runs/x/progress", `{"attempt": 1, "percent": 500}`},
		{"GET", "/v1/nodes", ""},
		{"GET", "/v1/notifications?state=failed&job=backup&limit=5", ""},
		{"GET", "/v1/notifications?state=bogus", ""},
		{"GET", "/v1/health", ""},
		{"POST", "/v1/reload", ""},
		{"PUT", "/v1/reload", "{}"},
		{"GET", "/v1/../etc/passwd", ""},
		{"POST", "//v1/jobs/backup/trigger", "{}"},
		{"POST", "/v1/jobs/%2e%2e/trigger", "{}"},
		{"CONNECT", "/v1/jobs", ""},
		{"OPTIONS", "*", ""},
		{"POST", "/v1/jobs/backup/trigger", "{}\x00"},
		{"POST", "/v1/jobs/backup/trigger?x=1", "{}"},
	}
	for _, sd := range seeds {
		f.Add(sd.method, sd.path, []byte(sd.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		req, err := http.NewRequest(method, "http://schedulerd"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request an HTTP server would parse
		}
		eng.reset()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status := rec.Code
		if status >= 500 && status != http.StatusServiceUnavailable {
			t.Fatalf("%s %q %q: status %d: %s", method, path, body, status, rec.Body)
		}
		if status == http.StatusServiceUnavailable && req.URL.Path != "/v1/health" {
			t.Fatalf("%s %q: 503 outside the health endpoint", method, path)
		}
		var eb errorBody
		if status >= 400 && status != http.StatusServiceUnavailable {
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Code == "" {
				t.Fatalf("%s %q: error reply %d is not a JSON error: %q", method, path, status, rec.Body)
			}
		}
		calls := eng.Calls()
		if len(calls) == 0 {
			return
		}
		// The engine was called: the request must have been well-formed.
		trimmed := bytes.TrimSpace(body)
		switch {
		case method != http.MethodPost:
			t.Fatalf("%s %q reached the engine: %v", method, path, calls)
		case len(trimmed) > 0 && (trimmed[0] != '{' || !json.Valid(trimmed)):
			t.Fatalf("POST %q with a malformed body %q reached the engine: %v", path, body, calls)
		case len(body) > MaxBodyBytes:
			t.Fatalf("an oversized body reached the engine")
		}
		switch eb.Code {
		case CodeBadRequest, CodeNotFound, CodeMethodNotAllowed, CodeTooLarge:
			t.Fatalf("POST %q: rejected as %s after the engine was called: %v", path, eb.Code, calls)
		}
	})
}

// FuzzReplyString: the JSON strings that the attempts reply streams (the
// output of a job, any bytes) decode to what encoding/json's own encoding
// of the same text decodes to: invalid UTF-8 as U+FFFD, everything else
// as it was.
func FuzzReplyString(f *testing.F) {
	for _, s := range []string{"", "plain\n", "\"\\\t\r\x00\x1f\x7f", "é日😀", "\u2028\u2029", "\xff\xfe", "a\xe6\x97", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		rs := &replyStream{w: &buf, rc: http.NewResponseController(httptest.NewRecorder()), timeout: time.Second}
		rs.raw([]byte(`"`))
		rs.str(s)
		rs.raw([]byte(`"`))
		rs.flush()
		var got string
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%q escaped as %q: not a JSON string: %v", s, buf.Bytes(), err)
		}
		ref, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(ref, &want)
		if got != want {
			t.Fatalf("%q escaped as %q decodes to %q, want %q", s, buf.Bytes(), got, want)
		}
	})
}

// FuzzAPIRequest feeds arbitrary methods, paths, Authorization headers and
// bodies to the HTTP API's handler. Whatever comes in, it does not panic
// nor answer 5xx (but the 503 of an unhealthy node); a request without a
// valid token gets the one 401 reply (GET /healthz aside) and reaches
// nothing; a read token never reaches a state-changing call of the engine.
func FuzzAPIRequest(f *testing.F) {
	st := openStore(f)
	eng := &metricsEngine{fakeEngine: &fakeEngine{st: st}}
	s, err := newAPIServer(APIConfig{Tokens: testTokens(), Rate: rate.Inf, Server: ServerConfig{
		Engine: eng, Store: st, Logger: slog.New(slog.DiscardHandler), MaxWait: 10 * time.Millisecond, WaitPoll: time.Millisecond,
	}})
	if err != nil {
		f.Fatal(err)
	}
	ref := httptest.NewRecorder()
	s.handler.ServeHTTP(ref, httptest.NewRequest("GET", "/v1/jobs", nil))
	refused := ref.Body.String()
	for _, sd := range []struct{ method, path, auth, body string }{
		{"GET", "/v1/jobs", "", ""},
		{"GET", "/v1/jobs", "Bearer " + readToken, ""},
		{"POST", "/v1/jobs/backup/trigger", "Bearer " + readToken, "{}"},
		{"POST", "/v1/jobs/backup/trigger", "bearer " + operateToken, `{"dedup_id": "d"}`},
		{"POST", "/v1/jobs/backup/backfill", "Bearer " + readToken, `{"from": "2026-11-01T03:00:00Z", "to": "2026-11-02"}`},
		{"POST", "/v1/jobs/backup/backfill", "Bearer " + operateToken, `{"from": "2026-11-01T03:00:00Z", "to": "2026-11-02", "dry_run": true}`},
		{"POST", "/v1/reload", "Bearer " + operateToken, ""},
		{"POST", "/v1/reload", "Bearer " + adminToken, ""},
		{"POST", "/v1/runs/x/progress", "Bearer " + adminToken, `{"attempt": 1, "percent": 5}`},
		{"GET", "/metrics", "Bearer " + readToken, ""},
		{"GET", "/healthz", "", ""},
		{"GET", "/v1/health", "Basic YTpi", ""},
		{"GET", "/v1/jobs", "Bearer", ""},
		{"GET", "/v1/jobs", "Bearer  " + readToken + " ", ""},
		{"GET", "/v1/jobs", "Bearer " + readToken + "\x00", ""},
		{"GET", "/v1/../v1/jobs", "Bearer " + readToken, ""},
		{"DELETE", "/v1/jobs", "Bearer " + adminToken, ""},
	} {
		f.Add(sd.method, sd.path, sd.auth, []byte(sd.body))
	}
	set, _ := NewTokenSet(testTokens())
	f.Fuzz(func(t *testing.T, method, path, auth string, body []byte) {
		req, err := http.NewRequest(method, "http://schedulerd"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request an HTTP server would parse
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		eng.reset()
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		status := rec.Code
		if status >= 500 && status != http.StatusServiceUnavailable {
			t.Fatalf("%s %q %q: status %d: %s", method, path, auth, status, rec.Body)
		}
		tok, wellFormed := bearerToken(auth)
		known, found := set.Lookup(tok)
		calls := eng.Calls()
		switch {
		case (!wellFormed || !found) && status == http.StatusOK && method == "GET" && req.URL.Path == "/healthz":
		case !wellFormed || !found:
			if status == http.StatusBadRequest && hasDotSegment(req.URL.Path) {
				break
			}
			if status != http.StatusUnauthorized || rec.Body.String() != refused {
				t.Fatalf("%s %q without a valid token (%q): %d %s", method, path, auth, status, rec.Body)
			}
			if len(calls) > 0 {
				t.Fatalf("%s %q without a valid token reached the engine: %v", method, path, calls)
			}
		case known.Role == RoleRead && len(calls) > 0:
			t.Fatalf("%s %q with a read token reached the engine: %v", method, path, calls)
		}
	})
}
