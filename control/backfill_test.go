package control

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAPIBackfill: a backfill needs the operate role, and a bad request
// gets a 4xx that says what is wrong, before the engine is asked.
func TestAPIBackfill(t *testing.T) {
	ta := startAPI(t, nil)
	const body = `{"from": "2026-11-01T03:00:00Z", "to": "2026-11-02T03:00:00Z", "dry_run": true}`
	r := ta.do(t, "POST", "/v1/jobs/backup/backfill", body, bearer(readToken))
	if r.status != http.StatusForbidden || r.code() != CodePermissionDenied {
		t.Errorf("backfill with a read token: %d %s; want 403", r.status, r.body)
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Fatalf("a refused backfill reached the engine: %v", calls)
	}
	r = ta.do(t, "POST", "/v1/jobs/backup/backfill", body, bearer(operateToken))
	var reply BackfillReply
	if r.status != http.StatusOK || json.Unmarshal(r.body, &reply) != nil || !reply.DryRun || reply.Ticks != 1 || len(reply.List) != 1 {
		t.Fatalf("dry run with an operate token: %d %s", r.status, r.body)
	}
	ta.eng.reset()
	for _, tt := range []struct {
		job, body string
		status    int
		code, msg string
	}{
		{"backup", ``, http.StatusBadRequest, CodeBadRequest, "needs a JSON object body"},
		{"backup", `{"from": "2026-11-01"}`, http.StatusBadRequest, CodeBadRequest, "from and to are required"},
		{"backup", `{"from": "x", "to": "y", "max_parallel": -1}`, http.StatusBadRequest, CodeBadRequest, "max_parallel must be at least 1"},
		{"backup", `{"from": "x", "to": "y", "parallel": 2}`, http.StatusBadRequest, CodeBadRequest, "unknown field"},
		{"backup", `{"from": "` + strings.Repeat("9", 100) + `", "to": "y"}`, http.StatusBadRequest, CodeBadRequest, "RFC 3339"},
	} {
		r := ta.do(t, "POST", "/v1/jobs/"+tt.job+"/backfill", tt.body, bearer(operateToken))
		if r.status != tt.status || r.code() != tt.code || !strings.Contains(string(r.body), tt.msg) {
			t.Errorf("backfill %s %s: %d %s; want %d %s %q", tt.job, tt.body, r.status, r.body, tt.status, tt.code, tt.msg)
		}
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Fatalf("bad requests reached the engine: %v", calls)
	}
	// The engine's refusals keep their codes.
	for _, tt := range []struct {
		job, from string
		status    int
		code      string
	}{
		{"adhoc", "2026-11-01T03:00:00Z", http.StatusConflict, CodeNoSchedule},
		{"nope", "2026-11-01T03:00:00Z", http.StatusNotFound, CodeUnknownJob},
		{"backup", "tomorrow", http.StatusBadRequest, CodeBadRequest},
	} {
		body := `{"from": "` + tt.from + `", "to": "2026-11-02"}`
		if r := ta.do(t, "POST", "/v1/jobs/"+tt.job+"/backfill", body, bearer(operateToken)); r.status != tt.status || r.code() != tt.code {
			t.Errorf("backfill of %s from %s: %d %s; want %d %s", tt.job, tt.from, r.status, r.body, tt.status, tt.code)
		}
	}
	if r := ta.do(t, "GET", "/v1/jobs/backup/backfill", "", bearer(operateToken)); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET backfill: %d %s; want 405", r.status, r.body)
	}
}
