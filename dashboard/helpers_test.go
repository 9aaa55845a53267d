package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/internal/testcert"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// The tokens of the tests, one per role, of the form `token new` makes.
var (
	readToken    = testToken('r')
	operateToken = testToken('o')
)

// testToken is a token of the form `schedulerd token new` makes, of 32
// bytes b.
func testToken(b byte) string {
	return control.TokenPrefix + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// testClock is a clock that the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeEngine stands in for the scheduler, over a real store: it declares
// a cron job and a trigger-only job, makes runs in the store and records
// the calls that change something.
type fakeEngine struct {
	st store.Store

	mu     sync.Mutex
	calls  []string
	paused bool
	// live is the output of attempt 1 of the run liveRun, running on
	// this node.
	live    *fakeLive
	liveRun string
}

func (e *fakeEngine) record(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, fmt.Sprintf(format, args...))
}

// Calls returns the calls that changed something, so far.
func (e *fakeEngine) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

func (e *fakeEngine) Trigger(ctx context.Context, job string, p control.TriggerParams) (*jobs.Run, error) {
	e.record("trigger %s %q", job, p.Payload)
	if job != "backup" && job != "adhoc" {
		return nil, control.Mark(fmt.Errorf("unknown job %q", job), control.ErrUnknownJob)
	}
	now := time.Now()
	return e.st.RunInsert(ctx, store.RunInsertParams{
		Job: job, Trigger: jobs.TriggerManual, ScheduledAt: now, NotBefore: p.NotBefore, NotAfter: p.NotAfter,
		Retry: jobs.RetryPolicy{MaxAttempts: 3}, DedupID: p.DedupID, Payload: p.Payload, Node: "test-node",
		Actor: callerActor(ctx),
	})
}

func (e *fakeEngine) Cancel(ctx context.Context, id string) (*jobs.Run, error) {
	e.record("cancel %s", id)
	return e.st.RunCancel(ctx, store.RunCancelParams{ID: id, Node: "test-node", Actor: callerActor(ctx), Reason: jobs.ReasonCancelled})
}

func (e *fakeEngine) Rerun(ctx context.Context, id string) (*jobs.Run, error) {
	e.record("rerun %s", id)
	old, err := e.st.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.st.RunInsert(ctx, store.RunInsertParams{Job: old.Job, Trigger: jobs.TriggerRerun, Retry: jobs.RetryPolicy{MaxAttempts: 3},
		RerunOf: old.ID, Payload: old.Payload, Node: "test-node", Actor: callerActor(ctx)})
}

// callerActor is the actor of the request's caller, as the daemon's
// engine records it.
func callerActor(ctx context.Context) string {
	c, _ := control.CallerFrom(ctx)
	return c.Actor()
}

func (e *fakeEngine) setPaused(job string, paused bool) error {
	if job != "backup" {
		return control.Mark(fmt.Errorf("job %q has no schedule", job), control.ErrNoSchedule)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.paused = paused
	return nil
}

func (e *fakeEngine) Pause(ctx context.Context, job string) error {
	e.record("pause %s", job)
	return e.setPaused(job, true)
}

func (e *fakeEngine) Resume(ctx context.Context, job string) error {
	e.record("resume %s", job)
	return e.setPaused(job, false)
}

func (e *fakeEngine) Forget(ctx context.Context, job string) error {
	return control.Mark(fmt.Errorf("no expectation of job %q", job), control.ErrNotExpected)
}

// Backfill answers for backup: a dry run lists its one tick at From, and
// a backfill makes one backfill of it.
func (e *fakeEngine) Backfill(ctx context.Context, job string, p control.BackfillParams) (*control.BackfillReply, error) {
	e.record("backfill %s %s %s dry=%v max=%d", job, p.From, p.To, p.DryRun, p.MaxParallel)
	if job != "backup" {
		return nil, control.Mark(fmt.Errorf("job %q has no schedule", job), control.ErrNoSchedule)
	}
	from, err := time.Parse(time.DateOnly, p.From)
	if err != nil {
		return nil, control.Mark(fmt.Errorf("from: want a date, got %q", p.From), control.ErrBadRequest)
	}
	from = from.Add(3 * time.Hour)
	reply := &control.BackfillReply{Job: job, From: from, To: from, TimeZone: "UTC", Ticks: 1, DryRun: p.DryRun}
	if p.DryRun {
		reply.List = []control.BackfillTick{{At: from}}
		return reply, nil
	}
	reply.Backfill = &control.BackfillState{ID: "bf-1", MaxParallel: max(p.MaxParallel, 1), Created: 1, Done: true}
	return reply, nil
}

// Jobs reads the last runs from the store, as the daemon's engine does.
func (e *fakeEngine) Jobs(ctx context.Context) ([]control.JobInfo, error) {
	last, err := e.st.JobsLastRun(ctx, []string{"backup", "adhoc"})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	paused := e.paused
	e.mu.Unlock()
	next := time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC)
	out := []control.JobInfo{
		{Name: "backup", Kind: "cron", Schedule: "0 3 * * *", Timezone: "Europe/Berlin", NextFire: &next, Paused: paused},
		{Name: "adhoc", Kind: "trigger"},
	}
	if paused {
		out[0].NextFire = nil
	}
	for i := range out {
		if r := last[out[i].Name]; r != nil {
			out[i].LastRunID, out[i].LastRunStatus, out[i].LastRunAt = r.ID, r.Status, &r.CreatedAt
		}
	}
	return out, nil
}

// NextTicks: the cron job's next three days at 03:00 in Berlin, with a
// jitter of 90s.
func (e *fakeEngine) NextTicks(job string, n int) []Tick {
	if job != "backup" {
		return nil
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	var out []Tick
	for i := range n {
		t := time.Date(2030, 1, 1+i, 3, 0, 0, 0, berlin)
		out = append(out, Tick{Fire: t, Start: t.Add(90 * time.Second)})
	}
	return out
}

func (e *fakeEngine) Health(ctx context.Context) control.Health {
	return control.Health{OK: true, Node: "test-node"}
}

func (e *fakeEngine) Progress(ctx context.Context, runID string, attempt, percent int, message string) error {
	return errors.New("progress is not taken in these tests")
}

func (e *fakeEngine) CheckAttemptToken(string, int, string) bool { return false }

func (e *fakeEngine) Reload(ctx context.Context) error { return nil }

// LiveOutput is the output of live, for attempt 1 of the run liveRun.
func (e *fakeEngine) LiveOutput(id string) (control.LiveOutput, int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.live == nil || id != e.liveRun {
		return nil, 0, false
	}
	return e.live, 1, true
}

// setLive makes live the output of attempt 1 of run id, running on this
// node.
func (e *fakeEngine) setLive(id string, live *fakeLive) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.liveRun, e.live = id, live
}

// fakeLive is the output of a running attempt that the test writes, kept
// whole.
type fakeLive struct {
	mu      sync.Mutex
	data    []byte
	done    bool
	changed chan struct{}
}

func newFakeLive() *fakeLive { return &fakeLive{changed: make(chan struct{})} }

func (l *fakeLive) write(p string, end bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, p...)
	l.done = end
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *fakeLive) Next(ctx context.Context, from int64) ([]byte, int64, bool, error) {
	for {
		l.mu.Lock()
		data := slices.Clone(l.data[min(from, int64(len(l.data))):])
		next, done, changed := int64(len(l.data)), l.done, l.changed
		l.mu.Unlock()
		if len(data) > 0 || done {
			return data, next, done, nil
		}
		select {
		case <-ctx.Done():
			return nil, from, false, ctx.Err()
		case <-changed:
		}
	}
}

func (e *fakeEngine) NodeID() string { return "test-node" }

// testDash is a dashboard mounted on a real API server of 127.0.0.1, with
// the fake engine over a real SQLite store.
type testDash struct {
	*Dashboard
	api *control.APIServer
	eng *fakeEngine
	st  *sqlite.Store
	url string
	tr  *http.Transport
}

func apiToken(name string, role control.Role, token string) control.APIToken {
	return control.APIToken{Name: name, Role: role, SHA256: sha256.Sum256([]byte(token))}
}

// startDash serves the dashboard; mod adjusts its config.
func startDash(t *testing.T, mod func(*Config)) *testDash {
	t.Helper()
	return startDashTLS(t, mod, nil)
}

// startDashTLS serves the dashboard over TLS with pair (plain HTTP
// without); the test's requests trust it.
func startDashTLS(t *testing.T, mod func(*Config), pair *testcert.Pair) *testDash {
	t.Helper()
	// No checkpoint in the background: the tests count the statements
	// that the pages make.
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "schedulerd.db"), CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.NodeRegister(t.Context(), store.NodeRegisterParams{ID: "test-node", Incarnation: "inc", Host: "host-1", PID: 42,
		Version: "v1.2.3", Jobs: []string{"backup", "adhoc"}}); err != nil {
		t.Fatal(err)
	}
	eng := &fakeEngine{st: st}
	logger := slog.New(slog.DiscardHandler)
	var certFile, keyFile string
	if pair != nil {
		certFile, keyFile = pair.CertFile, pair.KeyFile
	}
	api, err := control.ListenAPI(control.APIConfig{
		Addr:    "127.0.0.1:0",
		TLSCert: certFile, TLSKey: keyFile,
		Tokens: []control.APIToken{apiToken("grafana", control.RoleRead, readToken), apiToken("ci", control.RoleOperate, operateToken)},
		Server: control.ServerConfig{Logger: logger, Engine: eng, Store: st},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{API: api, Engine: eng, Store: st, Logger: logger}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api.MountUI(d)
	api.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = api.Close(ctx)
	})
	td := &testDash{Dashboard: d, api: api, eng: eng, st: st, url: "http://" + api.Addr().String(), tr: &http.Transport{}}
	if pair != nil {
		td.url = "https://" + api.Addr().String()
		td.tr.TLSClientConfig = &tls.Config{RootCAs: pair.Pool()}
	}
	return td
}

// reply is a reply read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

// cookie returns the value of the session cookie the reply sets, and the
// cookie; "" when it sets none.
func (r reply) cookie() (string, *http.Cookie) {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == cookieName {
			return c.Value, c
		}
	}
	return "", nil
}

// req is one request of a test: a method and path, a form, the session
// cookie and more headers.
type req struct {
	method, path string
	form         url.Values
	cookie       string
	header       map[string]string
}

// do sends rq without following redirects. A POST is sent as a browser's
// form of the dashboard is (Sec-Fetch-Site: same-origin) unless rq's
// headers say otherwise.
func (td *testDash) do(t *testing.T, rq req) reply {
	t.Helper()
	var body io.Reader
	if rq.form != nil {
		body = strings.NewReader(rq.form.Encode())
	}
	r, err := http.NewRequest(rq.method, td.url+rq.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if rq.form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if rq.method == http.MethodPost {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if rq.cookie != "" {
		r.AddCookie(&http.Cookie{Name: cookieName, Value: rq.cookie})
	}
	for k, v := range rq.header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	hc := &http.Client{Transport: td.tr, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// login logs in with token and returns the session cookie's value.
func (td *testDash) login(t *testing.T, token string) string {
	t.Helper()
	r := td.do(t, req{method: "POST", path: "/ui/login", form: url.Values{"token": {token}}})
	v, _ := r.cookie()
	if r.status != http.StatusSeeOther || v == "" {
		t.Fatalf("login with %q: %d %v %s", token, r.status, r.header, r.body)
	}
	return v
}

// csrf is the CSRF token a page of the session carries.
func (td *testDash) csrf(t *testing.T, cookie string) string {
	t.Helper()
	r := td.do(t, req{method: "GET", path: "/ui/", cookie: cookie})
	_, rest, ok := strings.Cut(r.body, `name="csrf" value="`)
	token, _, _ := strings.Cut(rest, `"`)
	if r.status != http.StatusOK || !ok || token == "" {
		t.Fatalf("no CSRF token in the overview: %d %s", r.status, r.body)
	}
	return token
}

// insertRun makes a manual run of job in the store.
func (td *testDash) insertRun(t *testing.T, job, payload string) *jobs.Run {
	t.Helper()
	r, err := td.st.RunInsert(t.Context(), store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: time.Now(),
		Retry: jobs.RetryPolicy{MaxAttempts: 3}, Payload: payload, Node: "test-node"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// finishRun claims run and completes it with output and exit code 0.
func (td *testDash) finishRun(t *testing.T, run *jobs.Run, output string) *jobs.Run {
	t.Helper()
	ctx := t.Context()
	claimed, err := td.st.RunsClaim(ctx, store.ClaimParams{Node: "test-node", Incarnation: "inc", Jobs: store.NewJobLimits(map[string]int{run.Job: 0}), Limit: 1})
	if err != nil || len(claimed) != 1 || claimed[0].ID != run.ID {
		t.Fatalf("claim %s: %v %v", run.ID, claimed, err)
	}
	c := claimed[0]
	code := 0
	done, err := td.st.RunTransition(ctx, jobs.Complete(jobs.Fence{RunID: c.ID, Attempt: c.Attempt, Incarnation: c.Incarnation}, "test-node",
		jobs.Result{ExitCode: &code, Output: output, OutputBytes: int64(len(output))}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// insertRunOf makes a manual run of job with up to attempts attempts, due
// at once and retried at once.
func (td *testDash) insertRunOf(t *testing.T, job string, attempts int) *jobs.Run {
	t.Helper()
	r, err := td.st.RunInsert(t.Context(), store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: time.Now(),
		Retry: jobs.RetryPolicy{MaxAttempts: attempts, Backoff: jobs.BackoffFixed}, Node: "test-node"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// failAttempt claims run for its next attempt and fails it with output.
func (td *testDash) failAttempt(t *testing.T, run *jobs.Run, output string) {
	t.Helper()
	ctx := t.Context()
	claimed, err := td.st.RunsClaim(ctx, store.ClaimParams{Node: "test-node", Incarnation: "inc", Jobs: store.NewJobLimits(map[string]int{run.Job: 0}),
		Limit: 1, Now: time.Now().Add(time.Hour)})
	if err != nil || len(claimed) != 1 || claimed[0].ID != run.ID {
		t.Fatalf("claim %s: %v %v", run.ID, claimed, err)
	}
	c := claimed[0]
	code := 1
	if _, err := td.st.RunTransition(ctx, jobs.Finish(c, jobs.Fence{RunID: c.ID, Attempt: c.Attempt, Incarnation: c.Incarnation}, "test-node",
		jobs.Result{ExitCode: &code, Output: output, OutputBytes: int64(len(output))}, time.Now(), func() float64 { return 0 })); err != nil {
		t.Fatal(err)
	}
}

// snapReads returns how many snapshots the dashboard has read.
func (td *testDash) snapReads() int {
	td.snaps.mu.Lock()
	defer td.snaps.mu.Unlock()
	return td.snaps.reads
}
