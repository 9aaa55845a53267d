package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPagesRender: each page renders for a session, with the data it is
// about.
func TestPagesRender(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, operateToken)
	run := td.insertRun(t, "backup", "the payload")
	done := td.finishRun(t, run, "hello\n")
	for _, tt := range []struct {
		path string
		want []string
	}{
		{"/ui/", []string{"backup", "adhoc", "0 3 * * *", "Europe/Berlin", "✓ completed", "test-node"}},
		{"/ui/jobs/backup", []string{"backup", "Next ticks", "Trigger now", "Pause the schedule", done.ID}},
		{"/ui/runs", []string{done.ID, "backup"}},
		{"/ui/runs?status=completed", []string{done.ID}},
		{"/ui/runs/" + done.ID, []string{done.ID, "hello", "the payload", "Rerun"}},
		{"/ui/runs/" + done.ID + "?part=live", []string{"hello"}},
	} {
		r := td.do(t, req{method: "GET", path: tt.path, cookie: cookie})
		if r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", tt.path, r.status, r.body)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(r.body, w) {
				t.Errorf("GET %s: no %q in\n%s", tt.path, w, r.body)
			}
		}
	}
	_ = url.Values{}
}
