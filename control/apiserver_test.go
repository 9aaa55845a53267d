package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/schedulerd/schedulerd/internal/testcert"
)

// The tokens of the API tests, one per role, of the form `token new`
// makes.
var (
	readToken    = testToken('r')
	operateToken = testToken('o')
	adminToken   = testToken('a')
)

// testToken is a token of the form `schedulerd token new` makes, of 32
// bytes b.
func testToken(b byte) string {
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

func apiToken(name string, role Role, token string) APIToken {
	return APIToken{Name: name, Role: role, SHA256: sha256.Sum256([]byte(token))}
}

func testTokens() []APIToken {
	return []APIToken{
		apiToken("grafana", RoleRead, readToken),
		apiToken("ci", RoleOperate, operateToken),
		apiToken("ops", RoleAdmin, adminToken),
	}
}

// testAPI is an API server on a port of 127.0.0.1 with a fake engine that
// has metrics, over a real store.
type testAPI struct {
	*APIServer
	eng  *metricsEngine
	logs *logBuffer
	url  string
}

// startAPI serves the API with the test tokens; mod adjusts the config.
func startAPI(t *testing.T, mod func(*APIConfig)) *testAPI {
	t.Helper()
	st := openStore(t)
	ta := &testAPI{eng: &metricsEngine{fakeEngine: &fakeEngine{st: st}, m: Metrics{Node: "test-node", StoreStatements: -1}}, logs: &logBuffer{}}
	cfg := APIConfig{
		Addr:   "127.0.0.1:0",
		Tokens: testTokens(),
		Server: ServerConfig{
			Logger: slog.New(slog.NewJSONHandler(ta.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Engine: ta.eng, Store: st,
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := ListenAPI(cfg)
	if err != nil {
		t.Fatalf("ListenAPI: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ta.APIServer = s
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	ta.url = scheme + "://" + s.Addr().String()
	return ta
}

// apiReply is a reply read whole.
type apiReply struct {
	status int
	header http.Header
	body   []byte
}

// code is the code of a JSON error reply.
func (r apiReply) code() string {
	var eb errorBody
	_ = json.Unmarshal(r.body, &eb)
	return eb.Code
}

// do sends a request with the given Authorization headers (none when
// empty) on a connection of its own.
func (ta *testAPI) do(t *testing.T, method, path, body string, auth ...string) apiReply {
	t.Helper()
	return doHTTP(t, http.DefaultTransport.(*http.Transport).Clone(), ta.url, method, path, body, auth...)
}

func doHTTP(t *testing.T, tr *http.Transport, base, method, path, body string, auth ...string) apiReply {
	t.Helper()
	tr.DisableKeepAlives = true
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	resp, err := (&http.Client{Transport: tr, CheckRedirect: noRedirects}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apiReply{status: resp.StatusCode, header: resp.Header, body: b}
}

func bearer(token string) string { return "Bearer " + token }

// reset forgets the failures counted.
func (l *authLimiter) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.byAddr)
	l.all = rate.NewLimiter(allFailRate, allFailBurst)
}

// TestAPIRefusalsIndistinguishable: without a valid token every request
// gets the same 401, byte for byte and header for header (the date
// aside): a missing token, a malformed header, another scheme, an unknown
// token, a token sent twice, on an endpoint, on one that does not exist
// and on /metrics. Nothing reaches the engine. The scheme is read in any
// case, and GET /healthz alone answers without a token.
func TestAPIRefusalsIndistinguishable(t *testing.T) {
	ta := startAPI(t, nil)
	ref := ta.do(t, "GET", "/v1/jobs", "")
	if ref.status != http.StatusUnauthorized || ref.code() != CodeUnauthorized || ref.header.Get("WWW-Authenticate") != `Bearer realm="schedulerd"` {
		t.Fatalf("no token: %d %v %s", ref.status, ref.header, ref.body)
	}
	for _, tt := range []struct {
		name, method, path string
		auth               []string
	}{
		{"no token, trigger", "POST", "/v1/jobs/backup/trigger", nil},
		{"no token, reload", "POST", "/v1/reload", nil},
		{"no token, unknown path", "GET", "/v1/nope", nil},
		{"no token, outside /v1", "GET", "/secret", nil},
		{"no token, metrics", "GET", "/metrics", nil},
		{"scheme alone", "GET", "/v1/jobs", []string{"Bearer"}},
		{"scheme and a space", "GET", "/v1/jobs", []string{"Bearer "}},
		{"basic", "GET", "/v1/jobs", []string{"Basic Z3JhZmFuYTpyZWFkLXRva2VuLTAwMDE="}},
		{"the token alone", "GET", "/v1/jobs", []string{readToken}},
		{"unknown token", "GET", "/v1/jobs", []string{bearer(testToken('x'))}},
		{"unknown token, trigger", "POST", "/v1/jobs/backup/trigger", []string{bearer(testToken('y'))}},
		{"a token not of the form, its hash in the config", "GET", "/v1/jobs", []string{bearer("abc")}},
		{"a token one character short", "GET", "/v1/jobs", []string{bearer(readToken[:TokenLen-1])}},
		{"the token's hash", "GET", "/v1/jobs", []string{bearer(fmt.Sprintf("%x", sha256.Sum256([]byte(readToken))))}},
		{"a token with a space", "GET", "/v1/jobs", []string{bearer(readToken + " x")}},
		{"a token too long", "GET", "/v1/jobs", []string{bearer(readToken + strings.Repeat("x", MaxTokenBytes))}},
		{"a good token twice", "GET", "/v1/jobs", []string{bearer(readToken), bearer(readToken)}},
		{"a good and a bad token", "GET", "/v1/jobs", []string{bearer(readToken), bearer("nope")}},
	} {
		ta.fails.reset() // the failures of one address are limited: TestAPIFailedAuthentications
		r := ta.do(t, tt.method, tt.path, "{}", tt.auth...)
		if r.status != ref.status || !bytes.Equal(r.body, ref.body) {
			t.Errorf("%s: %d %s; want the reply to no token: %d %s", tt.name, r.status, r.body, ref.status, ref.body)
		}
		if a, b := withoutDate(r.header), withoutDate(ref.header); !equalHeaders(a, b) {
			t.Errorf("%s: headers %v; want those of the reply to no token: %v", tt.name, a, b)
		}
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Errorf("refused requests reached the engine: %v", calls)
	}
	for _, auth := range []string{bearer(readToken), "bearer " + readToken, "BEARER  " + readToken} {
		if r := ta.do(t, "GET", "/v1/jobs", "", auth); r.status != http.StatusOK {
			t.Errorf("%q: %d %s", auth, r.status, r.body)
		}
	}
	if r := ta.do(t, "GET", "/healthz", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"ok"`) {
		t.Errorf("/healthz without a token: %d %s", r.status, r.body)
	}
	if r := ta.do(t, "GET", "/v1/health", ""); r.status != http.StatusUnauthorized {
		t.Errorf("/v1/health without a token: %d %s", r.status, r.body)
	}
	// The first refusal is logged, the others counted for a minute.
	if n := len(ta.logs.records("HTTP API: refused")); n != 1 {
		t.Errorf("%d refusals logged, want 1", n)
	}
}

func withoutDate(h http.Header) http.Header {
	h = h.Clone()
	h.Del("Date")
	return h
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestAPIRoles: each role allows its requests and those of the roles
// below it, and a request its role does not allow gets 403 and reaches
// nothing: read lists and reads, operate triggers, cancels, reruns,
// pauses, resumes and forgets, admin reloads.
func TestAPIRoles(t *testing.T) {
	ta := startAPI(t, nil)
	type req struct{ method, path string }
	for _, tt := range []struct {
		token      string
		allowed    []string
		notAllowed []string
	}{
		{readToken, []string{"read"}, []string{"operate", "admin"}},
		{operateToken, []string{"read", "operate"}, []string{"admin"}},
		{adminToken, []string{"read", "operate", "admin"}, nil},
	} {
		run := insertRun(t, ta.eng.st, "backup", "")
		reqs := map[string][]req{}
		reqs["read"] = []req{{"GET", "/v1/jobs"}, {"GET", "/v1/runs"}, {"GET", "/v1/runs/" + run.ID}, {"GET", "/v1/runs/" + run.ID + "/attempts"},
			{"GET", "/v1/runs/" + run.ID + "/events"}, {"GET", "/v1/nodes"}, {"GET", "/v1/notifications"}, {"GET", "/v1/health"}, {"GET", "/metrics"},
			{"GET", "/v1/stats/runs"}, {"GET", "/v1/runs/" + run.ID + "/children"}}
		reqs["operate"] = []req{{"POST", "/v1/jobs/backup/trigger"}, {"POST", "/v1/jobs/backup/pause"}, {"POST", "/v1/jobs/backup/resume"},
			{"POST", "/v1/jobs/retired/forget"}, {"POST", "/v1/runs/" + run.ID + "/rerun"}, {"POST", "/v1/runs/" + run.ID + "/cancel"}}
		reqs["admin"] = []req{{"POST", "/v1/reload"}}
		ta.eng.reset()
		for _, role := range tt.notAllowed {
			for _, rq := range reqs[role] {
				r := ta.do(t, rq.method, rq.path, "", bearer(tt.token))
				if r.status != http.StatusForbidden || r.code() != CodePermissionDenied || !strings.Contains(string(r.body), "needs a token with the role") {
					t.Errorf("%s %s with %s: %d %s; want 403", rq.method, rq.path, tt.token, r.status, r.body)
				}
			}
		}
		if calls := ta.eng.Calls(); len(calls) > 0 {
			t.Errorf("%s: refused requests reached the engine: %v", tt.token, calls)
		}
		for _, role := range tt.allowed {
			for _, rq := range reqs[role] {
				if r := ta.do(t, rq.method, rq.path, "", bearer(tt.token)); r.status >= 300 {
					t.Errorf("%s %s with %s: %d %s", rq.method, rq.path, tt.token, r.status, r.body)
				}
			}
		}
	}
	if calls := ta.eng.Calls(); !slices.Contains(calls, "reload") {
		t.Errorf("the admin's reload did not reach the engine: %v", calls)
	}
}

// TestAPIRefusesJobRequests: progress and attempt tokens belong to the
// socket: on the API a request with an attempt token gets 403 whatever
// its bearer token, and progress is refused even to an admin.
func TestAPIRefusesJobRequests(t *testing.T) {
	ta := startAPI(t, nil)
	run := insertRun(t, ta.eng.st, "backup", "")
	claim(t, ta.eng.st, "backup")
	progress := `{"attempt": 1, "percent": 50}`
	if r := ta.do(t, "POST", "/v1/runs/"+run.ID+"/progress", progress, bearer(adminToken)); r.status != http.StatusForbidden ||
		!strings.Contains(string(r.body), "control socket only") {
		t.Errorf("progress with an admin token: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest("POST", ta.url+"/v1/runs/"+run.ID+"/cancel", nil)
	req.Header.Set("Authorization", bearer(adminToken))
	req.Header.Set(AttemptTokenHeader, "1:"+fakeAttemptToken(run.ID, 1))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "attempt tokens are taken on the control socket only") {
		t.Errorf("cancel with an attempt token: %d %s", resp.StatusCode, body)
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Errorf("refused requests reached the engine: %v", calls)
	}
}

// TestAPIBounds: a body over MaxBodyBytes gets 413 and changes nothing; a
// path with dot segments gets 400, never a redirect, token or not.
func TestAPIBounds(t *testing.T) {
	ta := startAPI(t, nil)
	big := `{"payload": "` + strings.Repeat("x", MaxBodyBytes) + `"}`
	if r := ta.do(t, "POST", "/v1/jobs/backup/trigger", big, bearer(operateToken)); r.status != http.StatusRequestEntityTooLarge || r.code() != CodeTooLarge {
		t.Errorf("a body of %d bytes: %d %s", len(big), r.status, r.body)
	}
	for _, auth := range [][]string{nil, {bearer(adminToken)}} {
		for _, p := range []string{"/v1/runs/../jobs/backup/trigger", "/v1//jobs", "/v1/jobs/%2e%2e/reload"} {
			if r := ta.do(t, "POST", p, "", auth...); r.status != http.StatusBadRequest {
				t.Errorf("POST %s %v: %d %s", p, auth, r.status, r.body)
			}
		}
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Errorf("refused requests reached the engine: %v", calls)
	}
}

// TestAPIRateLimit: past its burst a token gets 429 rate_limited with a
// Retry-After, and nothing reaches the engine; another token keeps its own
// budget, and requests without a valid token spend none.
func TestAPIRateLimit(t *testing.T) {
	ta := startAPI(t, func(c *APIConfig) { c.Rate, c.Burst = rate.Every(time.Hour), 3 })
	for range 5 {
		if r := ta.do(t, "GET", "/v1/jobs", "", bearer(testToken('x'))); r.status != http.StatusUnauthorized {
			t.Fatalf("bad token: %d", r.status)
		}
	}
	for i := range 3 {
		if r := ta.do(t, "POST", "/v1/jobs/backup/trigger", "", bearer(operateToken)); r.status != http.StatusCreated {
			t.Fatalf("trigger %d within the burst: %d %s", i, r.status, r.body)
		}
	}
	ta.eng.reset()
	r := ta.do(t, "POST", "/v1/jobs/backup/trigger", "", bearer(operateToken))
	if r.status != http.StatusTooManyRequests || r.code() != CodeRateLimited {
		t.Fatalf("trigger past the burst: %d %s", r.status, r.body)
	}
	if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1000 {
		t.Errorf("Retry-After %q; the next request is allowed in about an hour", r.header.Get("Retry-After"))
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Errorf("a rate-limited request reached the engine: %v", calls)
	}
	if r := ta.do(t, "GET", "/v1/jobs", "", bearer(readToken)); r.status != http.StatusOK {
		t.Errorf("another token: %d %s", r.status, r.body)
	}
	// The client does not wait an hour: it returns the refusal.
	c, err := NewAPIClient(ta.url, operateToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Jobs(context.Background()); !errors.Is(err, ErrRateLimited) {
		t.Errorf("client past the rate: %v", err)
	}
}

// TestAPIRateLimitClientWaits: a client refused for its rate asks again
// after the Retry-After, within its budget, and gets its reply.
func TestAPIRateLimitClientWaits(t *testing.T) {
	ta := startAPI(t, func(c *APIConfig) { c.Rate, c.Burst = 2, 1 })
	c, err := NewAPIClient(ta.url, readToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 2 {
		if _, err := c.Jobs(context.Background()); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
}

// TestAPIReloadTokens: a token removed by a reload is refused from the
// next request on, a new one is taken, and tokens that do not check leave
// the running ones in place.
func TestAPIReloadTokens(t *testing.T) {
	ta := startAPI(t, nil)
	if r := ta.do(t, "GET", "/v1/jobs", "", bearer(operateToken)); r.status != http.StatusOK {
		t.Fatalf("before the reload: %d", r.status)
	}
	if _, err := ta.PrepareReload([]APIToken{apiToken("a", RoleRead, "x"), apiToken("a", RoleAdmin, "y")}); err == nil {
		t.Fatal("PrepareReload took two tokens of one name")
	}
	if r := ta.do(t, "GET", "/v1/jobs", "", bearer(operateToken)); r.status != http.StatusOK {
		t.Fatalf("after a rejected reload: %d", r.status)
	}
	p, err := ta.PrepareReload([]APIToken{apiToken("ops", RoleAdmin, adminToken), apiToken("deploy", RoleOperate, testToken('n'))})
	if err != nil {
		t.Fatal(err)
	}
	if r := ta.do(t, "GET", "/v1/jobs", "", bearer(operateToken)); r.status != http.StatusOK {
		t.Fatalf("a prepared reload applied early: %d", r.status)
	}
	p.Apply()
	for _, tt := range []struct {
		token string
		want  int
	}{{operateToken, 401}, {readToken, 401}, {adminToken, 200}, {testToken('n'), 200}} {
		if r := ta.do(t, "GET", "/v1/jobs", "", bearer(tt.token)); r.status != tt.want {
			t.Errorf("%s after the reload: %d, want %d", tt.token, r.status, tt.want)
		}
	}
}

// TestAPITLS: with a certificate the API speaks HTTPS alone (HTTP/1.1);
// a reload reads the files again and new connections get the new
// certificate; files that do not load leave the running certificate in
// place, with an error that says so.
func TestAPITLS(t *testing.T) {
	dir := t.TempDir()
	first := testcert.Write(t, dir, "api", "first")
	ta := startAPI(t, func(c *APIConfig) { c.TLSCert, c.TLSKey = first.CertFile, first.KeyFile })
	second := testcert.Write(t, t.TempDir(), "api", "second")
	trust := func(p testcert.Pair) *http.Transport {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: p.Pool()}
		tr.ForceAttemptHTTP2 = true
		return tr
	}
	peer := func(tr *http.Transport) (string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", ta.url+"/v1/jobs", nil)
		req.Header.Set("Authorization", bearer(readToken))
		tr.DisableKeepAlives = true
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return "", err.Error()
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /v1/jobs over TLS: %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName, resp.Proto
	}
	if cn, proto := peer(trust(first)); cn != "first" || proto != "HTTP/1.1" {
		t.Fatalf("over TLS: certificate %q, protocol %q", cn, proto)
	}
	if resp, err := http.Get("http://" + ta.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
	}
	if _, msg := peer(trust(second)); !strings.Contains(msg, "certificate") {
		t.Errorf("a client that trusts another certificate: %s", msg)
	}

	// New files, then a reload: the new certificate serves new connections.
	copyFile(t, second.CertFile, first.CertFile)
	copyFile(t, second.KeyFile, first.KeyFile)
	p, err := ta.PrepareReload(testTokens())
	if err != nil {
		t.Fatal(err)
	}
	p.Apply()
	if cn, _ := peer(trust(second)); cn != "second" {
		t.Errorf("after the reload: certificate %q", cn)
	}

	// A key that is not the certificate's: the reload is refused, and the
	// second certificate stays.
	third := testcert.Write(t, t.TempDir(), "api", "third")
	copyFile(t, third.KeyFile, first.KeyFile)
	if _, err := ta.PrepareReload(testTokens()); err == nil || !strings.Contains(err.Error(), "the running certificate stays") {
		t.Errorf("a mismatched key: %v", err)
	}
	if err := os.WriteFile(first.CertFile, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ta.PrepareReload(testTokens()); err == nil {
		t.Error("a file that is no certificate was taken")
	}
	if cn, _ := peer(trust(second)); cn != "second" {
		t.Errorf("after the refused reloads: certificate %q", cn)
	}
	// The client checks the certificate against SSL_CERT_FILE's roots.
	c, err := NewAPIClient(ta.url, readToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Jobs(context.Background()); err == nil || !strings.Contains(err.Error(), "SSL_CERT_FILE") {
		t.Errorf("a client that does not trust the certificate: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAPIClient: the Client over the API acts as on the socket, with the
// same errors: a 401 and a 403 are ErrPermissionDenied, an unknown job
// ErrUnknownJob, and a trigger followed to its end works.
func TestAPIClient(t *testing.T) {
	ta := startAPI(t, nil)
	ctx := context.Background()
	c, err := NewAPIClient(ta.url+"/", operateToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	js, err := c.Jobs(ctx)
	if err != nil || len(js) != 2 {
		t.Fatalf("Jobs: %v %v", js, err)
	}
	run, err := c.Trigger(ctx, "adhoc", TriggerRequest{DedupID: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Trigger(ctx, "adhoc", TriggerRequest{DedupID: "d1"}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("duplicate trigger: %v", err)
	}
	if _, err := c.Trigger(ctx, "nope", TriggerRequest{}); !errors.Is(err, ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := c.Cancel(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.WaitRun(ctx, run.ID, "pending", time.Second); err != nil || got.Status != "cancelled" {
		t.Errorf("WaitRun: %v %v", got, err)
	}
	if err := c.Reload(ctx); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("reload with an operate token: %v", err)
	}
	bad, err := NewAPIClient(ta.url, testToken('x'))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Jobs(ctx); !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), "refused the token") {
		t.Errorf("unknown token: %v", err)
	}
	gone, err := NewAPIClient("http://127.0.0.1:1", readToken)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if _, err := gone.Jobs(ctx); !errors.Is(err, ErrDaemonNotRunning) {
		t.Errorf("nothing listening: %v", err)
	}
}

// TestNewAPIClientRefuses: URLs that would leak the token or are not an
// API's are refused before anything is sent, and so is a token that is no
// token.
func TestNewAPIClientRefuses(t *testing.T) {
	for _, tt := range []struct{ url, token, want string }{
		{"http://sched.example:8080", readToken, "refusing to send the token over plain http"},
		{"http://10.0.0.1:8080", readToken, "refusing to send the token over plain http"},
		{"http://0.0.0.0:8080", readToken, "refusing to send the token over plain http"},
		{"ftp://sched.example", readToken, "want https://"},
		{"sched.example:8080", readToken, "want https://"},
		{"https://", readToken, "has no host"},
		{"https://u:p@sched.example", readToken, "must not hold credentials"},
		{"https://sched.example/?x=1", readToken, "no query"},
		{"https://sched.example/#x", readToken, "no query or fragment"},
		{"https://sched.example", "", "the token must be"},
		{"https://sched.example", "two words", "the token must be"},
	} {
		if _, err := NewAPIClient(tt.url, tt.token); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewAPIClient(%q, %q): %v; want %q", tt.url, tt.token, err, tt.want)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080/prefix/", "https://sched.example"} {
		if _, err := NewAPIClient(u, readToken); err != nil {
			t.Errorf("NewAPIClient(%q): %v", u, err)
		}
	}
}

// TestAPIWarnings: plain HTTP on an address that is not a loopback one is
// logged as a warning, and so is an API without tokens.
func TestAPIWarnings(t *testing.T) {
	for _, tt := range []struct {
		addr      string
		tokens    []APIToken
		plain, no bool
	}{
		{"127.0.0.1:0", testTokens(), false, false},
		{"localhost:0", testTokens(), false, false},
		{"0.0.0.0:0", testTokens(), true, false},
		{":0", nil, true, true},
		{"127.0.0.1:0", nil, false, true},
	} {
		logs := &logBuffer{}
		s, err := ListenAPI(APIConfig{Addr: tt.addr, Tokens: tt.tokens, Server: ServerConfig{
			Engine: &fakeEngine{st: openStore(t)}, Store: openStore(t), Logger: slog.New(slog.NewJSONHandler(logs, nil))}})
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		_ = s.Close(context.Background())
		if got := logs.records("in clear"); (len(got) == 1) != tt.plain {
			t.Errorf("%s: warnings %v, want one about plain HTTP: %v", tt.addr, got, tt.plain)
		}
		if got := logs.records("no [[token]]"); (len(got) == 1) != tt.no {
			t.Errorf("%s with %d tokens: warnings %v, want one about no tokens: %v", tt.addr, len(tt.tokens), got, tt.no)
		}
	}
}

// TestAPIConnectionsBounded: a hundred and more idle connections, some halfway
// through their headers, never make the API hold more than MaxConns
// connections, and a request with a token is still answered on a fresh
// connection: idle ones are closed to make room.
func TestAPIConnectionsBounded(t *testing.T) {
	const maxConns, idle = 8, 150
	ta := startAPI(t, func(c *APIConfig) { c.Server.MaxConns, c.Server.ReadHeaderTimeout = maxConns, time.Minute })
	addr := ta.Addr().String()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if i%3 == 1 {
			fmt.Fprint(c, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+readToken+"\r\n")
		}
		held = append(held, c)
	}
	for i := range 5 {
		var err error
		for try := 1; try <= 5; try++ {
			var c *Client
			if c, err = NewAPIClient(ta.url, readToken); err != nil {
				t.Fatal(err)
			}
			_, err = c.Jobs(context.Background())
			c.Close()
			if err == nil {
				break
			}
			t.Logf("request %d, try %d: %v", i, try, err)
		}
		if err != nil {
			t.Fatalf("request %d next to %d idle connections: %v", i, idle, err)
		}
	}
	if peak := ta.count.peak.Load(); peak > maxConns {
		t.Errorf("the API held %d connections at once, max %d", peak, maxConns)
	} else {
		t.Logf("at most %d connections held next to %d idle ones", peak, idle)
	}
}

// TestTokenSet: the lookup finds each token by the token itself, never by
// its hash or by nothing; a set with two tokens of one name or hash, an
// unknown role or the hash of nothing is refused.
func TestTokenSet(t *testing.T) {
	set, err := NewTokenSet(testTokens())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		token, name string
	}{{readToken, "grafana"}, {operateToken, "ci"}, {adminToken, "ops"}, {"", ""}, {"x", ""}, {fmt.Sprintf("%x", sha256.Sum256([]byte(readToken))), ""}} {
		got, ok := set.Lookup(tt.token)
		if ok != (tt.name != "") || got.Name != tt.name {
			t.Errorf("Lookup(%q) = %v %v, want %q", tt.token, got, ok, tt.name)
		}
	}
	empty, _ := NewTokenSet(nil)
	if _, ok := empty.Lookup(""); ok {
		t.Error("an empty set took the empty token")
	}
	for _, bad := range [][]APIToken{
		{apiToken("a", RoleRead, "x"), apiToken("a", RoleRead, "y")},
		{apiToken("a", RoleRead, "x"), apiToken("b", RoleRead, "x")},
		{apiToken("a", "root", "x")},
		{apiToken("", RoleRead, "x")},
		{apiToken("a", RoleRead, "")},
	} {
		if _, err := NewTokenSet(bad); err == nil {
			t.Errorf("NewTokenSet(%v) took it", bad)
		}
	}
}

// TestBearerToken: the Authorization header's forms.
func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"  Bearer   abc  ", "abc", true},
		{"Bearer a.b-c_d~e+f/g=", "a.b-c_d~e+f/g=", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"Bearer a b", "", false},
		{"Bearer a\tb", "", false},
		{"Bearer a\x00", "", false},
		{"Bearer a\x7f", "", false},
		{"Bearer é", "", false},
		{"Bearer " + strings.Repeat("a", MaxTokenBytes), strings.Repeat("a", MaxTokenBytes), true},
		{"Bearer " + strings.Repeat("a", MaxTokenBytes+1), "", false},
	} {
		if tok, ok := bearerToken(tt.header); tok != tt.token || ok != tt.ok {
			t.Errorf("bearerToken(%q) = %q %v, want %q %v", tt.header, tok, ok, tt.token, tt.ok)
		}
	}
}

// TestRoles: each role allows what the ones below it do.
func TestRoles(t *testing.T) {
	for _, tt := range []struct {
		have, need Role
		ok         bool
	}{
		{RoleRead, RoleRead, true}, {RoleRead, RoleOperate, false}, {RoleRead, RoleAdmin, false},
		{RoleOperate, RoleRead, true}, {RoleOperate, RoleOperate, true}, {RoleOperate, RoleAdmin, false},
		{RoleAdmin, RoleRead, true}, {RoleAdmin, RoleAdmin, true},
		{"", RoleRead, false}, {"root", RoleRead, false}, {RoleAdmin, "root", false},
	} {
		if got := tt.have.Allows(tt.need); got != tt.ok {
			t.Errorf("%q.Allows(%q) = %v", tt.have, tt.need, got)
		}
	}
	if _, err := ParseRole("root"); err == nil {
		t.Error("ParseRole took root")
	}
}

// TestAPIMountUI: without MountUI, /ui/ is a path like any other (401
// without a token); with it, /ui and the paths under /ui/ reach the
// mounted handler without a token, their body read whole and bounded
// (413 past MaxBodyBytes, before the handler), while the other paths
// keep the token check. Act serves the /v1 routes as a caller, with
// their role check: a read caller's trigger gets 403 and reaches nothing,
// an operate caller's makes a run; a path outside /v1 gets 404.
func TestAPIMountUI(t *testing.T) {
	ta := startAPI(t, nil)
	// What browsers ask for on their own is refused, but not logged as a
	// refusal: it is no probe. The first refusal logged is that of /ui/.
	for _, p := range []string{"/favicon.ico", "/apple-touch-icon.png", "/robots.txt", "/ui/"} {
		if r := ta.do(t, "GET", p, ""); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s before MountUI: %d %s", p, r.status, r.body)
		}
	}
	if recs := ta.logs.records("refused"); len(recs) != 1 || recs[0]["path"] != "/ui/" {
		t.Errorf("logged as refusals: %v", recs)
	}
	var seen []string
	ta.MountUI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if _, hasCaller := CallerFrom(r.Context()); hasCaller || err != nil {
			t.Errorf("%s %s: caller %v, body error %v", r.Method, r.URL.Path, hasCaller, err)
		}
		seen = append(seen, r.Method+" "+r.URL.Path+" "+string(b))
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/ui/", ""}, {"GET", "/ui", ""}, {"POST", "/ui/login", "token=x"}, {"GET", "/ui/jobs/backup", ""}, {"GET", "/favicon.ico", ""},
	} {
		if r := ta.do(t, rq.method, rq.path, rq.body); r.status != http.StatusTeapot {
			t.Errorf("%s %s after MountUI: %d %s", rq.method, rq.path, r.status, r.body)
		}
	}
	want := []string{"GET /ui/ ", "GET /ui ", "POST /ui/login token=x", "GET /ui/jobs/backup ", "GET /favicon.ico "}
	if !slices.Equal(seen, want) {
		t.Errorf("the mounted handler saw %q, want %q", seen, want)
	}
	big := "token=" + strings.Repeat("x", MaxBodyBytes)
	if r := ta.do(t, "POST", "/ui/login", big); r.status != http.StatusRequestEntityTooLarge || len(seen) != len(want) {
		t.Errorf("a body of %d bytes to /ui/login: %d %s", len(big), r.status, r.body)
	}
	for _, p := range []string{"/uix", "/v1/jobs", "/ui/../v1/jobs"} {
		if r := ta.do(t, "GET", p, ""); r.status != http.StatusUnauthorized && r.status != http.StatusBadRequest {
			t.Errorf("GET %s without a token after MountUI: %d %s", p, r.status, r.body)
		}
	}

	reader := Caller{Name: "grafana", Role: RoleRead, Via: ViaAPI}
	operator := Caller{Name: "ci", Role: RoleOperate, Via: ViaAPI}
	status, body := ta.Act(t.Context(), reader, "POST", "/v1/jobs/backup/trigger", []byte(`{"payload": "p"}`))
	if status != http.StatusForbidden || !strings.Contains(string(body), "needs a token with the role operate") {
		t.Errorf("Act: a read caller's trigger: %d %s", status, body)
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Errorf("a refused Act reached the engine: %v", calls)
	}
	status, body = ta.Act(t.Context(), operator, "POST", "/v1/jobs/backup/trigger", []byte(`{"payload": "p"}`))
	var run Run
	if err := json.Unmarshal(body, &run); status != http.StatusCreated || err != nil || run.Job != "backup" || run.Payload != "p" {
		t.Errorf("Act: an operate caller's trigger: %d %s", status, body)
	}
	if status, body := ta.Act(t.Context(), reader, "GET", "/v1/runs/"+run.ID, nil); status != http.StatusOK || !strings.Contains(string(body), run.ID) {
		t.Errorf("Act: a read caller's GET of the run: %d %s", status, body)
	}
	for _, p := range []string{"/metrics", "/ui/", "http://elsewhere/v1/jobs"} {
		if status, body := ta.Act(t.Context(), operator, "GET", p, nil); status != http.StatusNotFound {
			t.Errorf("Act: GET %s: %d %s", p, status, body)
		}
	}
}

// TestAPIFailedAuthentications: an address that presents 10 tokens that
// are not the API's gets 401 for each, then 429 with a Retry-After for the
// next ones, whatever their form; a valid token from that address is
// still served, and requests without a token are refused without
// counting. A token not of the generated form is refused even when the
// config holds its hash.
func TestAPIFailedAuthentications(t *testing.T) {
	handmade := "abc"
	ta := startAPI(t, func(c *APIConfig) { c.Tokens = append(c.Tokens, apiToken("handmade", RoleAdmin, handmade)) })
	for i := range 20 {
		if r := ta.do(t, "GET", "/v1/jobs", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("request %d without a token: %d", i, r.status)
		}
	}
	guesses := []string{bearer(handmade), bearer(testToken('x')), bearer("sd_short"), "Basic eDp5", bearer(readToken + "x")}
	for i := range failBurst {
		if r := ta.do(t, "GET", "/v1/jobs", "", guesses[i%len(guesses)]); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d (%s): %d %s", i, guesses[i%len(guesses)], r.status, r.body)
		}
	}
	for _, g := range guesses {
		r := ta.do(t, "GET", "/v1/jobs", "", g)
		if secs, err := strconv.Atoi(r.header.Get("Retry-After")); r.status != http.StatusTooManyRequests || r.code() != CodeRateLimited || err != nil || secs < 1 {
			t.Errorf("a guess past the budget (%s): %d %v %s", g, r.status, r.header, r.body)
		}
	}
	for _, tok := range []string{readToken, adminToken} {
		if r := ta.do(t, "GET", "/v1/jobs", "", bearer(tok)); r.status != http.StatusOK {
			t.Errorf("a valid token from the address past its budget: %d %s", r.status, r.body)
		}
	}
	if r := ta.do(t, "GET", "/v1/jobs", ""); r.status != http.StatusUnauthorized {
		t.Errorf("no token from the address past its budget: %d", r.status)
	}
	if calls := ta.eng.Calls(); len(calls) > 0 {
		t.Errorf("refused requests reached the engine: %v", calls)
	}
}

// TestAuthLimiter: each address may fail 10 times at once, then once
// every 6 s, apart from the others; all together 100 times, then 10 a
// second; the addresses remembered stay bounded. IPv6 addresses are
// counted by their /64.
func TestAuthLimiter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := newAuthLimiter()
	for i := range failBurst {
		if wait := l.fail("192.0.2.1", now); wait != 0 {
			t.Fatalf("failure %d: wait %v", i, wait)
		}
	}
	if wait := l.fail("192.0.2.1", now); wait <= 0 || wait > failEvery {
		t.Errorf("failure %d: wait %v, want up to %v", failBurst+1, wait, failEvery)
	}
	if wait := l.fail("192.0.2.2", now); wait != 0 {
		t.Errorf("another address: wait %v", wait)
	}
	if wait := l.fail("192.0.2.1", now.Add(failEvery)); wait != 0 {
		t.Errorf("after %v: wait %v", failEvery, wait)
	}

	l = newAuthLimiter()
	for i := range 3 * failAddrs {
		l.fail(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), now)
	}
	if len(l.byAddr) > failAddrs {
		t.Errorf("%d addresses remembered, more than %d", len(l.byAddr), failAddrs)
	}
	if l.fail("198.51.100.1", now) == 0 {
		t.Error("after failures from many addresses, a new address is not held back by the budget of all")
	}

	for remote, want := range map[string]string{
		"192.0.2.7:4242":                    "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:80":         "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff:ffff:1]:9": "2001:db8:1:2::/64",
		"[::1]:8080":                        "::/64",
		"@":                                 "@",
	} {
		if got := ClientAddr(&http.Request{RemoteAddr: remote}); got != want {
			t.Errorf("ClientAddr(%q) = %q, want %q", remote, got, want)
		}
	}
}

// TestRefusalLog: the first refusal is logged at once with its address
// and path; the others of the next minute are counted and told in one
// line at its end, and so on while they go on; after a quiet minute the
// next refusal is logged at once again.
func TestRefusalLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logBuffer{}
		l := NewRefusalLog(slog.New(slog.NewJSONHandler(logs, nil)), "HTTP API: ")
		probe := func(addr, path string) *http.Request {
			return &http.Request{Method: "GET", RemoteAddr: addr + ":1234", URL: &url.URL{Path: path}}
		}
		l.Refused(probe("192.0.2.1", "/first"), "a request without a token")
		for i := range 500 {
			l.Refused(probe(fmt.Sprintf("192.0.2.%d", i%7), "/v1/jobs"), "a token that is not one of the config's")
			time.Sleep(100 * time.Millisecond)
		} // 50 s
		if got := logs.records("refused"); len(got) != 1 || got[0]["path"] != "/first" || got[0]["remote"] != "192.0.2.1:1234" {
			t.Fatalf("after the first refusal and 500 more within a minute: %v", got)
		}
		time.Sleep(11 * time.Second) // the first minute ends
		got := logs.records("more requests")
		if len(got) != 1 || got[0]["refused"] != float64(500) || got[0]["addresses"] != float64(7) || got[0]["last"] != "a token that is not one of the config's" {
			t.Fatalf("the count of the first minute: %v", got)
		}
		l.Refused(probe("192.0.2.9", "/again"), "a request without a token")
		time.Sleep(time.Minute)
		if got := logs.records("more requests"); len(got) != 2 || got[1]["refused"] != float64(1) {
			t.Fatalf("the count of the second minute: %v", got)
		}
		time.Sleep(2 * time.Minute) // a quiet minute
		l.Refused(probe("192.0.2.10", "/later"), "a request without a token")
		if got := logs.records("refused"); len(got) != 4 || got[3]["path"] != "/later" {
			t.Errorf("the first refusal after a quiet minute: %v", got)
		}
		time.Sleep(2 * time.Minute)
	})
}

// TestLogRemote: a record logged with the context of an API request says
// the client's address; one without a caller, or of a caller on the
// socket, does not.
func TestLogRemote(t *testing.T) {
	logs := &logBuffer{}
	log := slog.New(LogRemote(slog.NewJSONHandler(logs, nil))).With("component", "x")
	api := WithCaller(context.Background(), Caller{Name: "ci", Role: RoleOperate, Via: ViaAPI, Remote: "192.0.2.1:5555"})
	socket := WithCaller(context.Background(), Caller{Name: "root", Role: RoleAdmin, Via: ViaSocket})
	log.InfoContext(api, "schedule paused", "actor", "api:ci")
	log.InfoContext(socket, "schedule resumed", "actor", "socket:root")
	log.Info("no context")
	if got := logs.records("paused"); len(got) != 1 || got[0]["remote"] != "192.0.2.1:5555" || got[0]["component"] != "x" {
		t.Errorf("a record of an API request: %v", got)
	}
	for _, msg := range []string{"resumed", "no context"} {
		if got := logs.records(msg); len(got) != 1 || got[0]["remote"] != nil {
			t.Errorf("%s: %v", msg, got)
		}
	}
}

// TestAPIStrictTransportSecurity: an API that speaks TLS tells browsers
// to keep to HTTPS (Strict-Transport-Security) on every reply, refusals
// included; a plain one does not.
func TestAPIStrictTransportSecurity(t *testing.T) {
	pair := testcert.Write(t, t.TempDir(), "api", "127.0.0.1")
	secure := startAPI(t, func(c *APIConfig) { c.TLSCert, c.TLSKey = pair.CertFile, pair.KeyFile })
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pair.Pool()}
	for _, rq := range [][2]string{{"/healthz", ""}, {"/v1/jobs", ""}, {"/v1/jobs", bearer(readToken)}, {"/ui/", ""}} {
		var auth []string
		if rq[1] != "" {
			auth = append(auth, rq[1])
		}
		r := doHTTP(t, tr, secure.url, "GET", rq[0], "", auth...)
		if got := r.header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("GET %s over TLS: Strict-Transport-Security %q", rq[0], got)
		}
	}
	plain := startAPI(t, nil)
	if r := plain.do(t, "GET", "/v1/jobs", "", bearer(readToken)); r.header.Get("Strict-Transport-Security") != "" {
		t.Errorf("plain HTTP sends Strict-Transport-Security")
	}
}
