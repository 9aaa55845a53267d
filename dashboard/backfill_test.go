package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestBackfillForm: the backfill form of a cron job's page goes through
// the API as the session's caller: a dry run shows its ticks and a form
// to backfill them, which sends the same range; a bad max parallel is
// refused before the API, the API's refusals are shown with its status,
// and a read token's form is refused by the API's role check.
func TestBackfillForm(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, operateToken)
	token := td.csrf(t, cookie)
	post := func(cookie, token, path string, form url.Values) reply {
		t.Helper()
		form.Set("csrf", token)
		return td.do(t, req{method: "POST", path: path, cookie: cookie, form: form})
	}
	page := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: cookie})
	if !strings.Contains(page.body, `action="/ui/jobs/backup/backfill"`) || !strings.Contains(page.body, `id="dry_run" checked`) {
		t.Fatalf("the cron job's page has no backfill form:\n%s", page.body)
	}
	if adhoc := td.do(t, req{method: "GET", path: "/ui/jobs/adhoc", cookie: cookie}); strings.Contains(adhoc.body, "/backfill") {
		t.Errorf("a job without a schedule offers a backfill")
	}

	r := post(cookie, token, "/ui/jobs/backup/backfill", url.Values{"from": {" 2026-11-01 "}, "to": {"2026-11-01"},
		"dry_run": {"1"}, "max_parallel": {"3"}})
	if r.status != http.StatusOK || !strings.Contains(r.body, `id="backfill-ticks"`) || !strings.Contains(r.body, "none: to be made") ||
		!strings.Contains(r.body, "A dry run: nothing was made.") || !strings.Contains(r.body, `id="backfill-confirm"`) ||
		!strings.Contains(r.body, `name="from" value="2026-11-01"`) || !strings.Contains(r.body, `name="max_parallel" value="3"`) {
		t.Fatalf("dry run: %d\n%s", r.status, r.body)
	}
	r = post(cookie, token, "/ui/jobs/backup/backfill", url.Values{"from": {"2026-11-01"}, "to": {"2026-11-01"}, "max_parallel": {"3"}})
	if r.status != http.StatusOK || !strings.Contains(r.body, `id="backfill-result"`) || !strings.Contains(r.body, "runs made: 1; done.") {
		t.Fatalf("backfill: %d\n%s", r.status, r.body)
	}
	calls := len(td.eng.Calls())
	for _, bad := range []url.Values{
		{"from": {"2026-11-01"}, "to": {"2026-11-01"}, "max_parallel": {"0"}},
		{"from": {"2026-11-01"}, "to": {"2026-11-01"}, "max_parallel": {"many"}},
		{"from": {""}, "to": {"2026-11-01"}},
	} {
		if r := post(cookie, token, "/ui/jobs/backup/backfill", bad); r.status != http.StatusBadRequest {
			t.Errorf("backfill %v: %d %s", bad, r.status, r.body)
		}
	}
	if n := len(td.eng.Calls()); n != calls {
		t.Errorf("refused backfills reached the engine: %v", td.eng.Calls()[calls:])
	}
	if r := post(cookie, token, "/ui/jobs/backup/backfill", url.Values{"from": {"yesterday"}, "to": {"2026-11-01"}}); r.status != http.StatusBadRequest ||
		!strings.Contains(r.body, "The daemon refused the action: from: want a date") {
		t.Errorf("a backfill the engine refuses: %d %s", r.status, r.body)
	}
	if r := post(cookie, token, "/ui/jobs/adhoc/backfill", url.Values{"from": {"2026-11-01"}, "to": {"2026-11-01"}}); r.status != http.StatusConflict {
		t.Errorf("a backfill of a job without a schedule: %d %s", r.status, r.body)
	}
	want := []string{"backfill backup 2026-11-01 2026-11-01 dry=true max=3", "backfill backup 2026-11-01 2026-11-01 dry=false max=3",
		"backfill backup yesterday 2026-11-01 dry=false max=1", "backfill adhoc 2026-11-01 2026-11-01 dry=false max=1"}
	if calls := td.eng.Calls(); !slices.Equal(calls, want) {
		t.Errorf("the engine got\n%q\nwant\n%q", calls, want)
	}

	// A read token: no form, and its own forged form is refused.
	reader := td.login(t, readToken)
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: reader}); strings.Contains(r.body, "/backfill") {
		t.Errorf("a read token's page offers a backfill")
	}
	r = post(reader, td.csrf(t, reader), "/ui/jobs/backup/backfill", url.Values{"from": {"2026-11-01"}, "to": {"2026-11-01"}})
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "needs a token with the role operate") {
		t.Errorf("a read token's backfill: %d %s", r.status, r.body)
	}
	if n := len(td.eng.Calls()); n != len(want) {
		t.Errorf("a read token's backfill reached the engine: %v", td.eng.Calls()[len(want):])
	}
}
