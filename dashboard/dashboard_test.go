package dashboard

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/internal/testcert"
	"github.com/schedulerd/schedulerd/jobs"
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
		{"/ui/", []string{"backup", "adhoc", "0 3 * * *", "Europe/Berlin", "2030-01-01 04:00:00 CET", "✓ completed", "test-node", "host-1", "v1.2.3"}},
		{"/ui/?q=ack", []string{"backup", "Jobs <small>1 named like"}},
		{"/ui/jobs/backup", []string{"backup", "Next ticks", "Tue 2030-01-01 03:00:00 CET", "2030-01-01 02:00:00 UTC · starts 1m 30s later (jitter)", "Trigger now", "Pause the schedule", done.ID}},
		{"/ui/jobs/adhoc", []string{"adhoc", "on trigger only", "No runs yet."}},
		{"/ui/runs", []string{done.ID, "backup"}},
		{"/ui/runs?status=completed&job=backup", []string{done.ID}},
		{"/ui/runs/" + done.ID, []string{done.ID, "hello", "the payload", "Rerun", "✓ completed"}},
		{"/ui/runs/" + done.ID + "?part=live", []string{"hello", `data-final="true"`}},
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
	if r := td.do(t, req{method: "GET", path: "/ui/?q=ack", cookie: cookie}); strings.Contains(r.body, "/ui/jobs/adhoc") {
		t.Error("the filter q=ack lists adhoc")
	}
	// The live part is the page's #live alone.
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/backup?part=live", cookie: cookie}); strings.Contains(r.body, "<html") ||
		strings.Contains(r.body, "Trigger now") || !strings.Contains(r.body, "Next ticks") {
		t.Errorf("the live part of a job's page:\n%s", r.body)
	}
	for _, p := range []string{"/ui/jobs/nope", "/ui/runs/nope", "/ui/nowhere"} {
		if r := td.do(t, req{method: "GET", path: p, cookie: cookie}); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
	if r := td.do(t, req{method: "GET", path: "/ui/runs?status=bogus", cookie: cookie}); r.status != http.StatusBadRequest {
		t.Errorf("GET /ui/runs?status=bogus: %d", r.status)
	}
}

// TestLogin: a token of the API starts a session, whose cookie is
// HttpOnly, SameSite=Strict, for /ui/ alone, for 12 hours, and Secure
// when the browser came over HTTPS; the login sends the browser back to
// the page it came from, never elsewhere. A missing, empty, malformed
// and unknown token get one answer, byte for byte, and no cookie.
func TestLogin(t *testing.T) {
	td := startDash(t, nil)
	r := td.do(t, req{method: "GET", path: "/ui/jobs/backup"})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/login?next=%2Fui%2Fjobs%2Fbackup" {
		t.Fatalf("a page without a session: %d %v", r.status, r.header)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/login?next=%2Fui%2Fjobs%2Fbackup"}); r.status != http.StatusOK ||
		!strings.Contains(r.body, `name="next" value="/ui/jobs/backup"`) {
		t.Fatalf("the login page: %d %s", r.status, r.body)
	}

	var first string
	for i, form := range []url.Values{
		{},
		{"token": {""}},
		{"token": {"sd_has a space"}},
		{"token": {strings.Repeat("x", control.MaxTokenBytes+1)}},
		{"token": {"sd_unknown"}},
		{"token": {readToken + "x"}},
	} {
		form.Set("next", "/ui/")
		r := td.do(t, req{method: "POST", path: "/ui/login", form: form})
		if v, _ := r.cookie(); r.status != http.StatusUnauthorized || v != "" || !strings.Contains(r.body, loginRefused) {
			t.Errorf("login %v: %d cookie %q", form, r.status, v)
		}
		if i == 0 {
			first = r.body
		} else if r.body != first {
			t.Errorf("login %v is told apart from a missing token:\n%s\n%s", form, r.body, first)
		}
	}

	r = td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {" " + operateToken + "\n"}, "next": {"/ui/jobs/backup"}}})
	v, c := r.cookie()
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/jobs/backup" || c == nil {
		t.Fatalf("login: %d %v", r.status, r.header)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(v); err != nil || len(raw) != 32 || !c.HttpOnly ||
		c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.MaxAge != 12*3600 || c.Secure {
		t.Errorf("the session cookie: %+v", c)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: v}); r.status != http.StatusOK {
		t.Errorf("a page with the session: %d", r.status)
	}
	for next, want := range map[string]string{"": "/ui/", "/ui/runs": "/ui/runs", "https://evil.example/ui/": "/ui/",
		"/ui/jobs/../runs?job=a%20b": "/ui/runs?job=a%20b", "/ui/../x": "/ui/", "/ui/./jobs/x/": "/ui/jobs/x/"} {
		r := td.do(t, req{method: "GET", path: "/ui/login?next=" + url.QueryEscape(next), cookie: v})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Errorf("the login page with a session and next=%q: %d %v", next, r.status, r.header)
		}
	}
	for _, proxy := range []map[string]string{{"X-Forwarded-Proto": "https"}, {"Forwarded": "for=192.0.2.1;proto=https"}} {
		https := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {operateToken}}, header: proxy})
		if _, c := https.cookie(); c == nil || !c.Secure {
			t.Errorf("a login over a proxy's HTTPS (%v): cookie %+v", proxy, c)
		}
	}

	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/ui//evil", "/v1/jobs", "/ui\\evil", "javascript:alert(1)", "/ui/login",
		"/ui/../x", "/ui/%2e%2e/x", "/ui/runs/../../v1/jobs", "/ui/..", "/ui/jobs/../login"} {
		r := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {operateToken}, "next": {next}}})
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != "/ui/" {
			t.Errorf("login with next=%q: %d to %q", next, r.status, loc)
		}
	}

	// Log out: the cookie is cleared.
	r = td.do(t, req{method: "POST", path: "/ui/logout", cookie: v, form: url.Values{"csrf": {td.csrf(t, v)}}})
	if _, c := r.cookie(); r.status != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
		t.Errorf("log out: %d %+v", r.status, c)
	}
}

// TestLoginOverTLS: over the API's own TLS, the session cookie is Secure,
// and the pages work.
func TestLoginOverTLS(t *testing.T) {
	pair := testcert.Write(t, t.TempDir(), "api", "127.0.0.1")
	td := startDashTLS(t, nil, &pair)
	r := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {operateToken}}})
	v, c := r.cookie()
	if r.status != http.StatusSeeOther || c == nil || !c.Secure || !c.HttpOnly {
		t.Fatalf("login over TLS: %d %+v", r.status, c)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: v}); r.status != http.StatusOK {
		t.Errorf("a page over TLS: %d", r.status)
	}
}

// TestLoginRateLimited: after 10 failed logins from an address, another
// wrong token from it gets 429 with a Retry-After, and the failures are
// those of the API's bearer check too; a right token from the same
// address still logs in, and a session made before goes on working.
func TestLoginRateLimited(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, readToken)
	for i := range 10 {
		if r := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {fmt.Sprintf("sd_guess-%d", i)}}}); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, r.status)
		}
	}
	r := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {testToken('x')}}})
	if v, _ := r.cookie(); r.status != http.StatusTooManyRequests || v != "" || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, loginRefused) {
		t.Errorf("a wrong token after 10 failures: %d %v", r.status, r.header)
	}
	if r := td.do(t, req{method: "GET", path: "/v1/jobs", header: map[string]string{"Authorization": "Bearer " + testToken('y')}}); r.status != http.StatusTooManyRequests {
		t.Errorf("a wrong bearer token from the same address: %d", r.status)
	}
	if v := td.login(t, operateToken); v == "" {
		t.Error("the right token after the failures got no session")
	}
	if r := td.do(t, req{method: "GET", path: "/v1/jobs", header: map[string]string{"Authorization": "Bearer " + readToken}}); r.status != http.StatusOK {
		t.Errorf("a right bearer token from the same address: %d", r.status)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/", cookie: cookie}); r.status != http.StatusOK {
		t.Errorf("a session of before: %d", r.status)
	}
}

// TestNoSession: without a session, pages send the browser to the login
// form, a live part gets 401 (the script reloads the page), and an action
// gets 401 and reaches nothing; a cookie that is not a session's is
// cleared. The login page and the static files need no session.
func TestNoSession(t *testing.T) {
	td := startDash(t, nil)
	run := td.insertRun(t, "backup", "")
	for _, cookie := range []string{"", "!!!", base64.RawURLEncoding.EncodeToString([]byte("sd_unknown")),
		base64.RawURLEncoding.EncodeToString([]byte("has space")), base64.RawURLEncoding.EncodeToString(make([]byte, 32)),
		base64.RawURLEncoding.EncodeToString([]byte(readToken)), readToken} {
		r := td.do(t, req{method: "GET", path: "/ui/", cookie: cookie})
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/ui/login") {
			t.Errorf("GET /ui/ with cookie %q: %d %v", cookie, r.status, r.header)
		}
		if _, c := r.cookie(); (cookie != "") != (c != nil && c.MaxAge < 0) {
			t.Errorf("GET /ui/ with cookie %q: the cookie set is %+v", cookie, c)
		}
		if r := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: cookie}); r.status != http.StatusUnauthorized {
			t.Errorf("the live part with cookie %q: %d", cookie, r.status)
		}
		for _, p := range []string{"/ui/jobs/backup/trigger", "/ui/jobs/backup/pause", "/ui/runs/" + run.ID + "/cancel", "/ui/logout"} {
			if r := td.do(t, req{method: "POST", path: p, cookie: cookie, form: url.Values{"csrf": {"x"}}}); r.status != http.StatusUnauthorized {
				t.Errorf("POST %s with cookie %q: %d", p, cookie, r.status)
			}
		}
	}
	if calls := td.eng.Calls(); len(calls) > 0 {
		t.Errorf("requests without a session reached the engine: %v", calls)
	}
	for _, p := range []string{"/ui/login", "/ui/static/app.css", "/ui/static/app.js", "/ui/static/favicon.ico", "/favicon.ico"} {
		if r := td.do(t, req{method: "GET", path: p}); r.status != http.StatusOK {
			t.Errorf("GET %s without a session: %d", p, r.status)
		}
	}
	if r := td.do(t, req{method: "GET", path: "/ui"}); r.status != http.StatusMovedPermanently || r.header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d %v", r.status, r.header)
	}
}

// TestSessionEndsWithToken: a token removed from the config by a reload,
// or changed (another role, or another token under its name), ends its
// sessions at their next request; the sessions of the other tokens go
// on.
func TestSessionEndsWithToken(t *testing.T) {
	td := startDash(t, nil)
	reader, operator, other := td.login(t, readToken), td.login(t, operateToken), td.login(t, operateToken)
	reload := func(tokens ...control.APIToken) {
		t.Helper()
		p, err := td.api.PrepareReload(tokens)
		if err != nil {
			t.Fatal(err)
		}
		p.Apply()
	}
	ended := func(what, cookie string) {
		t.Helper()
		r := td.do(t, req{method: "GET", path: "/ui/", cookie: cookie})
		if _, c := r.cookie(); r.status != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
			t.Errorf("%s: %d %+v", what, r.status, c)
		}
	}
	alive := func(what, cookie string) {
		t.Helper()
		if r := td.do(t, req{method: "GET", path: "/ui/", cookie: cookie}); r.status != http.StatusOK {
			t.Errorf("%s: %d", what, r.status)
		}
	}
	reload(apiToken("ci", control.RoleOperate, operateToken))
	ended("a session of a removed token", reader)
	alive("a session of a token kept", operator)
	reload(apiToken("grafana", control.RoleRead, readToken), apiToken("ci", control.RoleRead, operateToken))
	ended("a session of a token whose role changed", operator)
	// The read token is back: its session ended for good all the same.
	ended("a session of a token removed, then put back", reader)
	reload(apiToken("ci", control.RoleRead, testToken('n')))
	ended("a session of a token whose value changed", other)
	if n := td.sessions.len(); n != 0 {
		t.Errorf("%d sessions kept after they all ended", n)
	}
}

// TestSessions: the cookie holds a session id, never the token, and the
// daemon keeps the id's hash alone; log out ends the session on the
// daemon, so the cookie replayed after it is refused; a session ends
// after an hour without a request, and 12 hours after the login however
// used; a token keeps at most 64 sessions, the least recently used going
// first.
func TestSessions(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)}
	td := startDash(t, func(c *Config) { c.Clock = clock })
	cookie := td.login(t, operateToken)
	id, _ := base64.RawURLEncoding.DecodeString(cookie)
	if strings.Contains(cookie, operateToken) || strings.Contains(string(id), operateToken) || len(id) != 32 {
		t.Fatalf("the cookie %q carries the token", cookie)
	}
	td.sessions.mu.Lock()
	for k, e := range td.sessions.byID {
		if bytes.Contains(k[:], id) || e.caller.Name != "ci" || e.caller.Role != control.RoleOperate {
			t.Errorf("the session kept is %x: %+v", k, e)
		}
	}
	td.sessions.mu.Unlock()

	// Log out, then the same cookie again.
	r := td.do(t, req{method: "POST", path: "/ui/logout", cookie: cookie, form: url.Values{"csrf": {td.csrf(t, cookie)}}})
	if _, c := r.cookie(); r.status != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
		t.Errorf("log out: %d %+v", r.status, c)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/", cookie: cookie}); r.status != http.StatusSeeOther {
		t.Errorf("the cookie of a session logged out: %d", r.status)
	}

	// Idle: a request within the hour keeps it, an hour without ends it.
	cookie = td.login(t, operateToken)
	for range 3 {
		clock.add(50 * time.Minute)
		if r := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: cookie}); r.status != http.StatusOK {
			t.Fatalf("a session used every 50 minutes: %d", r.status)
		}
	}
	clock.add(time.Hour)
	if r := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: cookie}); r.status != http.StatusUnauthorized {
		t.Errorf("a session idle for an hour: %d", r.status)
	}

	// Age: 12 hours however used.
	cookie = td.login(t, operateToken)
	for range 14 {
		clock.add(55 * time.Minute)
		td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: cookie})
	}
	if r := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: cookie}); r.status != http.StatusUnauthorized {
		t.Errorf("a session of 12h50m: %d", r.status)
	}

	// At most 64 a token: the 65th login ends the least recently used.
	first := td.login(t, readToken)
	clock.add(time.Second)
	second := td.login(t, readToken)
	for range sessionsPerToken - 2 {
		clock.add(time.Second)
		td.login(t, readToken)
	}
	clock.add(time.Second)
	alive := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: first}) // first is used: second is the oldest now
	clock.add(time.Second)
	td.login(t, readToken)
	if alive.status != http.StatusOK {
		t.Fatalf("the first session: %d", alive.status)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: second}); r.status != http.StatusUnauthorized {
		t.Errorf("the least recently used of %d sessions after one more login: %d", sessionsPerToken, r.status)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/?part=live", cookie: first}); r.status != http.StatusOK {
		t.Errorf("a session used lately after one more login: %d", r.status)
	}
	if n := td.sessions.len(); n != sessionsPerToken {
		t.Errorf("%d sessions kept, want %d", n, sessionsPerToken)
	}
}

// TestSecurityHeaders: every reply of the dashboard, pages, live parts,
// refusals, the login form and the static files, forbids framing,
// sniffing and referrers and has the Content-Security-Policy; pages are
// not stored. No page has inline script or style, or loads anything
// from another origin.
func TestSecurityHeaders(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, operateToken)
	run := td.finishRun(t, td.insertRun(t, "backup", "p"), "out")
	scripts := regexp.MustCompile(`(?i)<script[^>]*>`)
	inline := regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=|(src|href|action)="(https?:)?//|url\(`)
	unsafe := func(body string) string {
		for _, s := range scripts.FindAllString(body, -1) {
			if !strings.Contains(s, ` src="/ui/static/`) {
				return s
			}
		}
		return inline.FindString(body)
	}
	for _, rq := range []req{
		{method: "GET", path: "/ui/login"},
		{method: "GET", path: "/ui/", cookie: cookie},
		{method: "GET", path: "/ui/?part=live", cookie: cookie},
		{method: "GET", path: "/ui/jobs/backup", cookie: cookie},
		{method: "GET", path: "/ui/runs", cookie: cookie},
		{method: "GET", path: "/ui/runs/" + run.ID, cookie: cookie},
		{method: "GET", path: "/ui/nowhere", cookie: cookie},
		{method: "POST", path: "/ui/login", form: url.Values{"token": {"bad"}}},
		{method: "POST", path: "/ui/jobs/backup/pause", cookie: cookie, form: url.Values{}},
		{method: "GET", path: "/ui/static/app.css"},
		{method: "GET", path: "/ui/static/app.js"},
	} {
		r := td.do(t, rq)
		for k, want := range map[string]string{
			"Content-Security-Policy": contentSecurityPolicy, "X-Frame-Options": "DENY",
			"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
		} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s %s: %s is %q", rq.method, rq.path, k, got)
			}
		}
		if !strings.HasPrefix(rq.path, "/ui/static/") {
			if got := r.header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("%s %s: Cache-Control is %q", rq.method, rq.path, got)
			}
			if m := unsafe(r.body); m != "" {
				t.Errorf("%s %s: inline script or style, or another origin: %q", rq.method, rq.path, m)
			}
		}
	}
	for _, csp := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(contentSecurityPolicy, csp) || strings.Contains(contentSecurityPolicy, "unsafe") {
			t.Errorf("the Content-Security-Policy %q lacks %q or allows something unsafe", contentSecurityPolicy, csp)
		}
	}
	for name, f := range staticFiles {
		if strings.Contains(string(f.body), "http://") || strings.Contains(string(f.body), "https://") || strings.Contains(string(f.body), "@import") {
			t.Errorf("%s refers to another origin", name)
		}
		r := td.do(t, req{method: "GET", path: assetURL(name)})
		if r.status != http.StatusOK || r.body != string(f.body) || r.header.Get("Content-Type") != f.contentType ||
			!strings.Contains(r.header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d %v", assetURL(name), r.status, r.header)
		}
		if r := td.do(t, req{method: "GET", path: "/ui/static/" + name + "?v=old"}); r.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s?v=old: Cache-Control %q", name, r.header.Get("Cache-Control"))
		}
	}
	if r := td.do(t, req{method: "GET", path: "/ui/static/app.map"}); r.status != http.StatusNotFound {
		t.Errorf("GET /ui/static/app.map: %d", r.status)
	}
}

// TestCSRF: an action is taken only with the CSRF token of its own
// session and from a page of the dashboard: without the token, with a
// wrong one or another session's, from another site (Sec-Fetch-Site) or
// with another Origin, it gets 403 and reaches nothing.
func TestCSRF(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, operateToken)
	token := td.csrf(t, cookie)
	other := td.csrf(t, td.login(t, readToken))
	host := strings.TrimPrefix(td.url, "http://")
	for _, tt := range []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"an empty token", url.Values{"csrf": {""}}, nil},
		{"a wrong token", url.Values{"csrf": {token + "x"}}, nil},
		{"another session's token", url.Values{"csrf": {other}}, nil},
		{"another site (Sec-Fetch-Site)", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"a sibling site (Sec-Fetch-Site)", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"another Origin", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "", "Origin": "http://evil.example"}},
		{"a null Origin", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "", "Origin": "null"}},
		{"the token in the query", nil, nil},
	} {
		path := "/ui/jobs/backup/pause"
		if tt.form == nil {
			path += "?csrf=" + url.QueryEscape(token)
			tt.form = url.Values{}
		}
		r := td.do(t, req{method: "POST", path: path, cookie: cookie, form: tt.form, header: tt.header})
		if r.status != http.StatusForbidden {
			t.Errorf("%s: %d %s", tt.name, r.status, r.body)
		}
	}
	if calls := td.eng.Calls(); len(calls) > 0 {
		t.Fatalf("refused forms reached the engine: %v", calls)
	}
	for _, header := range []map[string]string{
		{"Sec-Fetch-Site": "same-origin"},
		{"Sec-Fetch-Site": "", "Origin": "http://" + host},
	} {
		r := td.do(t, req{method: "POST", path: "/ui/jobs/backup/pause", cookie: cookie, form: url.Values{"csrf": {token}}, header: header})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/jobs/backup" {
			t.Errorf("the session's own form %v: %d %s", header, r.status, r.body)
		}
	}
	if calls := td.eng.Calls(); !slices.Equal(calls, []string{"pause backup", "pause backup"}) {
		t.Errorf("the engine got %v", calls)
	}
	if r := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {operateToken}},
		header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); r.status != http.StatusForbidden {
		t.Errorf("a login form of another site: %d", r.status)
	}
}

// TestReadTokenActions: a read token's pages have no action, and each
// action it posts with its own valid CSRF token is refused by the API's
// role check (403, its message) before the engine.
func TestReadTokenActions(t *testing.T) {
	td := startDash(t, nil)
	run := td.insertRun(t, "backup", "")
	cookie := td.login(t, readToken)
	token := td.csrf(t, cookie)
	for _, p := range []string{"/ui/jobs/backup", "/ui/jobs/adhoc", "/ui/runs/" + run.ID} {
		r := td.do(t, req{method: "GET", path: p, cookie: cookie})
		if n := strings.Count(r.body, `method="post"`); r.status != http.StatusOK || n != 1 || !strings.Contains(r.body, `action="/ui/logout"`) {
			t.Errorf("GET %s with a read token: %d, %d forms\n%s", p, r.status, n, r.body)
		}
	}
	for _, p := range []string{"/ui/jobs/backup/trigger", "/ui/jobs/backup/pause", "/ui/jobs/backup/resume",
		"/ui/runs/" + run.ID + "/cancel", "/ui/runs/" + run.ID + "/rerun"} {
		r := td.do(t, req{method: "POST", path: p, cookie: cookie, form: url.Values{"csrf": {token}, "payload": {"forged"}}})
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "needs a token with the role operate") {
			t.Errorf("POST %s with a read token: %d %s", p, r.status, r.body)
		}
	}
	if calls := td.eng.Calls(); len(calls) > 0 {
		t.Errorf("a read token's actions reached the engine: %v", calls)
	}
}

// TestActions: each form goes through the API: a trigger with a payload
// (its line breaks LF), a window (relative and RFC 3339) and a dedup id
// leads to the new run's page; a bad time is refused before the API and
// the API's refusals (a duplicate dedup id, pause of a job without a
// schedule) are shown with its status; cancel and rerun lead to their
// runs, and a pause shows at once, whatever the snapshots hold.
func TestActions(t *testing.T) {
	td := startDash(t, func(c *Config) { c.SnapshotTTL = time.Hour })
	cookie := td.login(t, operateToken)
	token := td.csrf(t, cookie)
	post := func(path string, form url.Values) reply {
		t.Helper()
		form.Set("csrf", token)
		return td.do(t, req{method: "POST", path: path, cookie: cookie, form: form})
	}
	before := time.Now()
	r := post("/ui/jobs/adhoc/trigger", url.Values{"payload": {"line 1\r\nline 2"}, "not_before": {"+10m"},
		"not_after": {"2099-01-02T03:04:05+01:00"}, "dedup_id": {" d-1 "}})
	id, ok := strings.CutPrefix(r.header.Get("Location"), "/ui/runs/")
	if r.status != http.StatusSeeOther || !ok {
		t.Fatalf("trigger: %d %v %s", r.status, r.header, r.body)
	}
	run, err := td.st.RunGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Job != "adhoc" || run.Payload != "line 1\nline 2" || run.DedupID != "d-1" ||
		run.NotBefore.Before(before.Add(10*time.Minute-time.Second)) || run.NotBefore.After(time.Now().Add(10*time.Minute)) ||
		!run.NotAfter.Equal(time.Date(2099, 1, 2, 2, 4, 5, 0, time.UTC)) {
		t.Errorf("the triggered run: %+v", run)
	}
	if r := post("/ui/jobs/adhoc/trigger", url.Values{"dedup_id": {"d-1"}}); r.status != http.StatusConflict || !strings.Contains(r.body, "The daemon refused") {
		t.Errorf("a duplicate dedup id: %d %s", r.status, r.body)
	}
	calls := len(td.eng.Calls())
	for _, bad := range []url.Values{{"not_before": {"tomorrow"}}, {"not_after": {"+-5m"}}, {"not_before": {"2026-05-01 03:00"}}} {
		if r := post("/ui/jobs/adhoc/trigger", bad); r.status != http.StatusBadRequest || !strings.Contains(r.body, "want a time such as") {
			t.Errorf("trigger %v: %d %s", bad, r.status, r.body)
		}
	}
	if n := len(td.eng.Calls()); n != calls {
		t.Errorf("refused triggers reached the engine: %v", td.eng.Calls()[calls:])
	}
	if r := post("/ui/jobs/adhoc/pause", url.Values{}); r.status != http.StatusConflict || !strings.Contains(r.body, "has no schedule") {
		t.Errorf("pause of a job without a schedule: %d %s", r.status, r.body)
	}
	if r := post("/ui/jobs/backup/explode", url.Values{}); r.status != http.StatusNotFound {
		t.Errorf("an unknown action: %d", r.status)
	}

	// The job's page, read once and kept an hour, shows the pause at once.
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: cookie}); !strings.Contains(r.body, `id="pause"`) {
		t.Fatalf("the job's page before the pause:\n%s", r.body)
	}
	if r := post("/ui/jobs/backup/pause", url.Values{}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/jobs/backup" {
		t.Errorf("pause: %d %v", r.status, r.header)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: cookie}); !strings.Contains(r.body, `id="resume"`) || !strings.Contains(r.body, "‖ paused") {
		t.Errorf("the job's page after the pause:\n%s", r.body)
	}

	r = post("/ui/runs/"+id+"/cancel", url.Values{})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/runs/"+id {
		t.Errorf("cancel: %d %v", r.status, r.header)
	}
	if run, _ := td.st.RunGet(t.Context(), id); run.Status != jobs.StatusCancelled || run.Actor != "api:ci" || run.CancelledBy != "api:ci" {
		t.Errorf("the run after its cancel: %s, made by %q, cancelled by %q", run.Status, run.Actor, run.CancelledBy)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/runs/" + id, cookie: cookie}); !strings.Contains(r.body, `<dd id="made-by">api:ci</dd>`) ||
		!strings.Contains(r.body, `<dd id="cancelled-by">api:ci</dd>`) || !strings.Contains(r.body, `<td data-label="By">api:ci</td>`) {
		t.Errorf("the run's page does not show who made and cancelled it:\n%s", r.body)
	}
	if r := post("/ui/runs/"+id+"/cancel", url.Values{}); r.status != http.StatusConflict {
		t.Errorf("the cancel of a cancelled run: %d %s", r.status, r.body)
	}
	r = post("/ui/runs/"+id+"/rerun", url.Values{})
	newID, _ := strings.CutPrefix(r.header.Get("Location"), "/ui/runs/")
	if rerun, err := td.st.RunGet(t.Context(), newID); r.status != http.StatusSeeOther || err != nil || rerun.RerunOf != id {
		t.Errorf("rerun: %d %v %v", r.status, r.header, err)
	}
	want := []string{`trigger adhoc "line 1\nline 2"`, `trigger adhoc ""`, "pause adhoc", "pause backup", "cancel " + id, "cancel " + id, "rerun " + id}
	if calls := td.eng.Calls(); !slices.Equal(calls, want) {
		t.Errorf("the engine got\n%q\nwant\n%q", calls, want)
	}
}

// TestEscaping: a job's text (payload, output, error) is shown as text:
// nothing of it becomes markup of the page.
func TestEscaping(t *testing.T) {
	td := startDash(t, nil)
	cookie := td.login(t, readToken)
	evil := `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`
	run := td.finishRun(t, td.insertRun(t, "backup", evil), evil+"\x1b[31m\xff\n")
	r := td.do(t, req{method: "GET", path: "/ui/runs/" + run.ID, cookie: cookie})
	if r.status != http.StatusOK {
		t.Fatalf("the run's page: %d", r.status)
	}
	if strings.Contains(r.body, "<script>alert") || strings.Contains(r.body, "<img src=x") || strings.Contains(r.body, "\xff") {
		t.Errorf("the job's text is markup of the page:\n%s", r.body)
	}
	if n := strings.Count(r.body, "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"); n != 2 {
		t.Errorf("the payload and the output are shown escaped %d times, want 2:\n%s", n, r.body)
	}
}

// TestSnapshotsShared: the requests of one page's data share one read of
// the store: many browsers polling the overview, a job and a run cost the
// store what one of each does, until the snapshot is older than its TTL.
func TestSnapshotsShared(t *testing.T) {
	td := startDash(t, func(c *Config) { c.SnapshotTTL = time.Hour })
	run := td.finishRun(t, td.insertRun(t, "backup", ""), "out")
	cookies := []string{td.login(t, readToken), td.login(t, operateToken)}
	paths := []string{"/ui/?part=live", "/ui/jobs/backup?part=live", "/ui/runs/" + run.ID + "?part=live"}
	read := func(n int) int64 {
		t.Helper()
		before := td.st.Statements()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := td.do(t, req{method: "GET", path: paths[i%len(paths)], cookie: cookies[i%len(cookies)]})
				if r.status != http.StatusOK {
					t.Errorf("GET %s: %d", paths[i%len(paths)], r.status)
				}
			})
		}
		wg.Wait()
		return td.st.Statements() - before
	}
	one := read(len(paths))
	if one == 0 {
		t.Fatal("the pages read nothing from the store")
	}
	td.snaps.forget()
	if many := read(60); many != one {
		t.Errorf("60 requests of %d pages made %d statements; one request of each made %d", len(paths), many, one)
	}
	if again := read(30); again != 0 {
		t.Errorf("requests within the TTL made %d statements", again)
	}
}

// TestSnapshotsBounded: snapshots older than the TTL are dropped as new
// ones are made, and no more than maxSnapshots are kept.
func TestSnapshotsBounded(t *testing.T) {
	s := newSnapshots(time.Millisecond)
	build := func(v int) func(context.Context) (any, error) {
		return func(context.Context) (any, error) { return v, nil }
	}
	for i := range maxSnapshots + 10 {
		if v, err := s.get(t.Context(), fmt.Sprint(i), build(i)); err != nil || v != i {
			t.Fatalf("snapshot %d: %v %v", i, v, err)
		}
	}
	if n := len(s.m); n > maxSnapshots {
		t.Errorf("%d snapshots kept", n)
	}
}

// TestTimeline: bars share one time axis from the first start to the
// last end (now for a run going on); a run not started has none, and a
// short one a visible bar within the axis. The rows are in the order of
// their start, the runs not started first.
func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(100 * time.Second)
	runs := []*jobs.Run{
		{ID: "running", StartedAt: t0.Add(50 * time.Second)},
		{ID: "waiting"},
		{ID: "short", StartedAt: t0.Add(100 * time.Second), FinishedAt: t0.Add(100 * time.Second)},
		{ID: "first", StartedAt: t0, FinishedAt: t0.Add(25 * time.Second)},
	}
	tl := newTimeline(runs, now)
	got := map[string]string{}
	for _, r := range tl.Rows {
		got[r.Run.ID] = fmt.Sprintf("%.1f+%.1f %s ended=%v", r.X, r.Width, r.Duration, r.Ended)
	}
	want := map[string]string{
		"running": "50.0+50.0 50s ended=false",
		"waiting": "0.0+0.0 0s ended=false",
		"short":   fmt.Sprintf("%.1f+%.1f 0s ended=true", 100-minBar, minBar),
		"first":   "0.0+25.0 25s ended=true",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || !tl.From.Equal(t0) || !tl.To.Equal(now) {
		t.Errorf("timeline %v..%v:\n%v\nwant\n%v", tl.From, tl.To, got, want)
	}
	// In the order of the time the rows show: not started, then the
	// latest started first.
	var order []string
	for _, r := range tl.Rows {
		order = append(order, r.Run.ID)
	}
	if want := []string{"waiting", "short", "running", "first"}; !slices.Equal(order, want) {
		t.Errorf("rows in the order %v, want %v", order, want)
	}
}

// TestJobState: a job's state says paused, active and overdue in words.
func TestJobState(t *testing.T) {
	for _, tt := range []struct {
		j    control.JobInfo
		want string
	}{
		{control.JobInfo{Kind: "cron"}, "active"},
		{control.JobInfo{Kind: "cron", Paused: true}, "‖ paused"},
		{control.JobInfo{Kind: "cron", Overdue: true}, "active, ⚠ overdue"},
		{control.JobInfo{Kind: "cron", Paused: true, Overdue: true}, "‖ paused, ⚠ overdue"},
		{control.JobInfo{Kind: "manual"}, "—"},
		{control.JobInfo{Kind: "manual", Overdue: true}, "⚠ overdue"},
	} {
		if got := jobState(tt.j); got != tt.want {
			t.Errorf("jobState(%+v) = %q, want %q", tt.j, got, tt.want)
		}
	}
}

// TestRunPageBounded: a run of 12 attempts, each of which stored 1 MiB
// of '<' (four times that escaped): its page shows the newest 10 with
// the head and the tail of their output, a link to the whole of each,
// and links to the output of the two it does not show; making the page
// reads and allocates a bounded amount, not the outputs. The link
// serves the whole output as text, to a session alone.
func TestRunPageBounded(t *testing.T) {
	td := startDash(t, nil)
	const attempts, size = 12, 1 << 20
	run := td.insertRunOf(t, "backup", attempts)
	outputs := make([]string, attempts)
	for i := range outputs {
		outputs[i] = fmt.Sprintf("start %d\n", i+1) + strings.Repeat("<", size) + fmt.Sprintf("\nend %d\n", i+1)
		td.failAttempt(t, run, outputs[i])
	}
	cookie := td.login(t, readToken)
	var r reply
	alloc := allocated(func() { r = td.do(t, req{method: "GET", path: "/ui/runs/" + run.ID, cookie: cookie}) })
	if r.status != http.StatusOK {
		t.Fatalf("the run's page: %d %.2000s", r.status, r.body)
	}
	t.Logf("a page of %d KiB; the request allocated %d MiB", len(r.body)>>10, alloc>>20)
	if len(r.body) > 2<<20 || alloc > 24<<20 {
		t.Errorf("a page of %d KiB; the request allocated %d MiB: the outputs (%d MiB) were read whole", len(r.body)>>10, alloc>>20, attempts*size>>20)
	}
	for n := 1; n <= attempts; n++ {
		shown := n > attempts-runAttempts
		if got := strings.Contains(r.body, fmt.Sprintf(`id="attempt-%d"`, n)); got != shown {
			t.Errorf("attempt %d shown: %v, want %v", n, got, shown)
		}
		if got := strings.Contains(r.body, fmt.Sprintf("start %d\n", n)) && strings.Contains(r.body, fmt.Sprintf("end %d\n", n)); got != shown {
			t.Errorf("the head and tail of attempt %d shown: %v, want %v", n, got, shown)
		}
		if !strings.Contains(r.body, fmt.Sprintf(`href="/ui/runs/%s/attempts/%d/output"`, run.ID, n)) {
			t.Errorf("no link to the output of attempt %d", n)
		}
	}
	if n := strings.Count(r.body, "not shown here: all that is stored is at the link above"); n != runAttempts {
		t.Errorf("%d outputs cut, want %d", n, runAttempts)
	}
	if !strings.Contains(r.body, `id="earlier"`) || !strings.Contains(r.body, "The 2 earlier attempts are not shown here") {
		t.Error("the page does not say that 2 attempts are not shown")
	}

	whole := td.do(t, req{method: "GET", path: "/ui/runs/" + run.ID + "/attempts/3/output", cookie: cookie})
	if whole.status != http.StatusOK || whole.body != outputs[2] || whole.header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		whole.header.Get("Content-Security-Policy") != contentSecurityPolicy || whole.header.Get("Cache-Control") != "no-store" {
		t.Errorf("the whole output: %d %v, %d bytes", whole.status, whole.header, len(whole.body))
	}
	for path, want := range map[string]int{
		"/ui/runs/" + run.ID + "/attempts/13/output": http.StatusNotFound,
		"/ui/runs/nope/attempts/1/output":            http.StatusNotFound,
		"/ui/runs/" + run.ID + "/attempts/x/output":  http.StatusBadRequest,
	} {
		if r := td.do(t, req{method: "GET", path: path, cookie: cookie}); r.status != want || !strings.Contains(r.body, "The output could not be read") {
			t.Errorf("GET %s: %d, want %d\n%.500s", path, r.status, want, r.body)
		}
	}
	if r := td.do(t, req{method: "GET", path: "/ui/runs/" + run.ID + "/attempts/1/output"}); r.status != http.StatusSeeOther {
		t.Errorf("the whole output without a session: %d", r.status)
	}
}

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// manyJobs is an engine of n cron jobs job-00000, job-00001, ... that
// names them and describes a few at a time (JobLister), recording how
// many it was asked to describe at once, at most.
type manyJobs struct {
	*fakeEngine
	n int

	mu      sync.Mutex
	mostAsk int
}

func (e *manyJobs) JobNames() []string {
	out := make([]string, e.n)
	for i := range out {
		out[i] = fmt.Sprintf("job-%05d", i)
	}
	return out
}

func (e *manyJobs) JobsNamed(ctx context.Context, names []string) ([]control.JobInfo, error) {
	e.mu.Lock()
	e.mostAsk = max(e.mostAsk, len(names))
	e.mu.Unlock()
	var out []control.JobInfo
	for _, n := range names {
		var i int
		if _, err := fmt.Sscanf(n, "job-%05d", &i); err == nil && i < e.n && n == fmt.Sprintf("job-%05d", i) {
			out = append(out, control.JobInfo{Name: n, Kind: "cron", Schedule: "0 3 * * *", Timezone: "UTC", Declared: true})
		}
	}
	return out, nil
}

func (e *manyJobs) Jobs(ctx context.Context) ([]control.JobInfo, error) {
	panic("the dashboard read the whole listing of an engine that pages")
}

// TestOverviewPages: with many jobs the overview lists a page of 200 at a
// time, with links to the pages before and after (of the jobs a filter
// matches, when it is given), and asks the engine to describe those of
// the page alone; a job's page describes its job alone.
func TestOverviewPages(t *testing.T) {
	var eng *manyJobs
	td := startDash(t, func(c *Config) {
		eng = &manyJobs{fakeEngine: c.Engine.(*fakeEngine), n: 450}
		c.Engine = eng
	})
	cookie := td.login(t, readToken)
	for _, tt := range []struct {
		path       string
		first, end int
		prev, next string
		count      string
	}{
		{"/ui/", 0, 200, "", "/ui/?page=2", "Jobs <small>450</small>"},
		{"/ui/?page=2", 200, 400, "/ui/", "/ui/?page=3", "201 to 400 of 450"},
		{"/ui/?page=3", 400, 450, "/ui/?page=2", "", "401 to 450 of 450"},
		{"/ui/?page=99", 400, 450, "/ui/?page=2", "", "401 to 450 of 450"},
		{"/ui/?page=x", 0, 200, "", "/ui/?page=2", "1 to 200 of 450"},
		{"/ui/?q=job-002", 200, 300, "", "", "Jobs <small>100 named like “job-002”, of 450</small>"},
	} {
		r := td.do(t, req{method: "GET", path: tt.path, cookie: cookie})
		if r.status != http.StatusOK || !strings.Contains(r.body, tt.count) {
			t.Errorf("GET %s: %d, no %q\n%.3000s", tt.path, r.status, tt.count, r.body)
			continue
		}
		for i := range eng.n {
			listed := strings.Contains(r.body, fmt.Sprintf(`href="/ui/jobs/job-%05d"`, i))
			if want := i >= tt.first && i < tt.end; listed != want {
				t.Errorf("GET %s lists job-%05d: %v, want %v", tt.path, i, listed, want)
				break
			}
		}
		for id, want := range map[string]string{"prev-page": tt.prev, "next-page": tt.next} {
			link := fmt.Sprintf(`href="%s" rel="%s" id="%s"`, strings.ReplaceAll(want, "&", "&amp;"), strings.TrimSuffix(id, "-page"), id)
			if got := strings.Contains(r.body, `id="`+id+`"`); got != (want != "") || (want != "" && !strings.Contains(r.body, link)) {
				t.Errorf("GET %s: link %s, want %q", tt.path, id, want)
			}
		}
	}
	if r := td.do(t, req{method: "GET", path: "/ui/?q=job-00&page=2", cookie: cookie}); !strings.Contains(r.body, `href="/ui/?page=3&amp;q=job-00"`) ||
		!strings.Contains(r.body, `href="/ui/?q=job-00"`) {
		t.Errorf("the links of a filtered page do not keep the filter:\n%.3000s", r.body)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/job-00321", cookie: cookie}); r.status != http.StatusOK || !strings.Contains(r.body, "<h1>job-00321</h1>") {
		t.Errorf("a job's page: %d %.2000s", r.status, r.body)
	}
	if r := td.do(t, req{method: "GET", path: "/ui/jobs/job-99999", cookie: cookie}); r.status != http.StatusNotFound {
		t.Errorf("the page of a job that is not: %d", r.status)
	}
	if eng.mostAsk > overviewJobs {
		t.Errorf("the engine was asked to describe %d jobs at once, more than a page", eng.mostAsk)
	}
}

// utcJob is the fake engine with its cron job in a zone that is UTC by
// another name, as a daemon's local zone often is.
type utcJob struct{ *fakeEngine }

func (e utcJob) Jobs(ctx context.Context) ([]control.JobInfo, error) {
	js, err := e.fakeEngine.Jobs(ctx)
	for i := range js {
		if js[i].Timezone != "" {
			js[i].Timezone = "Etc/UTC"
		}
	}
	return js, err
}

func (e utcJob) NextTicks(job string, n int) []Tick {
	var out []Tick
	for i := range n {
		t := time.Date(2030, 1, 1+i, 3, 0, 0, 0, time.UTC)
		out = append(out, Tick{Fire: t, Start: t})
	}
	return out
}

// TestTimeZones: a job's page shows each tick once when the job's zone
// reads as UTC, and twice (its zone's wall clock, then UTC) when it
// does not; the zone Go calls Local is shown by its name.
func TestTimeZones(t *testing.T) {
	td := startDash(t, func(c *Config) { c.Engine = utcJob{c.Engine.(*fakeEngine)} })
	cookie := td.login(t, readToken)
	r := td.do(t, req{method: "GET", path: "/ui/jobs/backup", cookie: cookie})
	if r.status != http.StatusOK || !strings.Contains(r.body, "<li><time datetime=\"2030-01-01T03:00:00Z\">Tue 2030-01-01 03:00:00 UTC</time></li>") ||
		strings.Contains(r.body, `class="more"`) {
		t.Errorf("a job in Etc/UTC: a tick is not shown once, on one line:\n%.3000s", r.body)
	}
	for tz, same := range map[string]bool{"UTC": true, "Etc/UTC": true, "": true, "Europe/Berlin": false, "America/New_York": false} {
		if got := sameAsUTC(time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC), tz); got != same {
			t.Errorf("sameAsUTC(%q) = %v", tz, got)
		}
	}
	if got := zoneName("Local"); got != localZone || !strings.HasSuffix(got, " (local)") || strings.HasPrefix(got, "Local") || got == " (local)" {
		t.Errorf("zoneName(Local) = %q", got)
	}
	if got := zoneName("Europe/Berlin"); got != "Europe/Berlin" {
		t.Errorf("zoneName(Europe/Berlin) = %q", got)
	}
}
