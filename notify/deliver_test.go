package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler/schedulertest"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func openStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "state", "schedulerd.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// deadLetter makes a run of job fail its only attempt at at, telling
// notifier, and returns the notification it made.
func deadLetter(t *testing.T, s store.Store, job, notifier string, at time.Time) *store.Notification {
	t.Helper()
	return failRun(t, s, job, "n", notifier, jobs.Result{ExitCode: new(int), Err: errors.New("exit status 7")}, at)
}

// failRun makes a run of job fail its only attempt on node with res at
// at, telling notifier, and returns the notification it made.
func failRun(t *testing.T, s store.Store, job, node, notifier string, res jobs.Result, at time.Time) *store.Notification {
	t.Helper()
	ctx := t.Context()
	_, err := s.RunInsert(ctx, store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: at, NotBefore: at,
		Retry: jobs.RetryPolicy{MaxAttempts: 1, Backoff: jobs.BackoffFixed}, Node: "n", Now: at})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "inc", Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 1, Now: at})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(runs))
	}
	r := runs[0]
	tr := jobs.FailAttempt(r, jobs.Fence{RunID: r.ID, Attempt: 1, Incarnation: "inc"}, node, res, jobs.ReasonFailed, at, nil)
	tr.Notify = []jobs.NotifyTarget{{Notifier: notifier, Events: jobs.DefaultNotifyEvents}}
	if _, err := s.RunTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	ns, err := s.NotificationsList(ctx, store.NotificationFilter{Job: job})
	if err != nil || len(ns) != 1 {
		t.Fatalf("notifications: %v, %d", err, len(ns))
	}
	return ns[0]
}

// start runs a Deliverer of targets on s with a fake clock at t0 and no
// jitter, and returns it with the ids of the attempts it records.
func start(t *testing.T, s store.Store, clock *schedulertest.FakeClock, maxAttempts int, targets ...*Target) (*Deliverer, chan string) {
	t.Helper()
	m := map[string]*Target{}
	for _, tg := range targets {
		m[tg.Name] = tg
	}
	d := New(Config{
		Store: s, Node: "n", Incarnation: func() string { return "inc" }, MaxAttempts: maxAttempts,
		Backoff: jobs.RetryPolicy{MaxAttempts: maxAttempts, Backoff: jobs.BackoffFixed, InitialDelay: 5 * time.Second},
		Clock:   clock,
	}, m)
	finished := make(chan string, 100)
	d.Signals.Finished = finished
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d, finished
}

func await(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

func getNotification(t *testing.T, s store.Store, id string) *store.Notification {
	t.Helper()
	ns, err := s.NotificationsList(t.Context(), store.NotificationFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("no notification %s", id)
	return nil
}

// receiver is a webhook receiver that fails (503), hangs, or takes each
// request, as told, and checks each signature.
type receiver struct {
	mode   atomic.Value // "fail", "hang", "ok"
	secret []byte
	mu     sync.Mutex
	bodies [][]byte
	hdrs   []http.Header
	badSig atomic.Int32
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ts, _ := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
	if !Verify(rc.secret, ts, body, r.Header.Get(HeaderSignature)) {
		rc.badSig.Add(1)
	}
	switch rc.mode.Load() {
	case "fail":
		http.Error(w, "down for maintenance\x1b[31m", http.StatusServiceUnavailable)
		return
	case "hang":
		<-r.Context().Done()
		return
	}
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, body)
	rc.hdrs = append(rc.hdrs, r.Header.Clone())
	rc.mu.Unlock()
}

// TestWebhookFailsHangsRecovers: a receiver that fails, then hangs past
// the timeout, then recovers gets the notification at its third attempt,
// each attempt after the backoff by the injected clock, signed, with its
// id in a header and the body made by the template.
func TestWebhookFailsHangsRecovers(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "chat", t0)
	rc := &receiver{secret: []byte("k3y")}
	rc.mode.Store("fail")
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tmpl, err := config.ParseBodyTemplate(`{"text": {{json (printf "%s %s: %s" .job .event .error)}}, "id": {{json .id}}}`)
	if err != nil {
		t.Fatal(err)
	}
	clock := schedulertest.NewFakeClock(t0)
	_, finished := start(t, s, clock, 5, &Target{Name: "chat", Webhook: srv.URL + "/hook", Secret: rc.secret, Body: tmpl, Timeout: 300 * time.Millisecond})

	await(t, finished, "the first attempt")
	got := getNotification(t, s, n.ID)
	if got.State != store.NotificationPending || got.Attempts != 1 || !strings.Contains(got.LastError, "503") ||
		!strings.Contains(got.LastError, "down for maintenance") || strings.ContainsRune(got.LastError, 0x1b) ||
		!got.NextAttemptAt.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("after a 503: %+v", got)
	}
	rc.mode.Store("hang")
	clock.Advance(5 * time.Second)
	await(t, finished, "the second attempt")
	got = getNotification(t, s, n.ID)
	if got.State != store.NotificationPending || got.Attempts != 2 || !strings.Contains(got.LastError, "deadline exceeded") {
		t.Fatalf("after a hang: %+v", got)
	}
	rc.mode.Store("ok")
	clock.Advance(5 * time.Second)
	await(t, finished, "the third attempt")
	got = getNotification(t, s, n.ID)
	if got.State != store.NotificationDelivered || got.Attempts != 3 {
		t.Fatalf("after recovery: %+v", got)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) != 1 {
		t.Fatalf("%d deliveries, want 1", len(rc.bodies))
	}
	var body struct{ Text, ID string }
	if err := json.Unmarshal(rc.bodies[0], &body); err != nil {
		t.Fatalf("body %s: %v", rc.bodies[0], err)
	}
	if body.Text != "backup dead_letter: exit status 7" || body.ID != n.ID || rc.hdrs[0].Get(HeaderID) != n.ID ||
		rc.hdrs[0].Get(HeaderEvent) != "dead_letter" || rc.hdrs[0].Get("Content-Type") != "application/json" {
		t.Errorf("body %s, headers %v", rc.bodies[0], rc.hdrs[0])
	}
	if rc.badSig.Load() != 0 {
		t.Errorf("%d requests with a bad signature", rc.badSig.Load())
	}
}

// TestWebhookFailedAfterLastAttempt: a receiver that never takes it
// leaves the notification failed, visible, after MaxAttempts attempts.
func TestWebhookFailedAfterLastAttempt(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "chat", t0)
	rc := &receiver{}
	rc.mode.Store("fail")
	srv := httptest.NewServer(rc)
	defer srv.Close()
	clock := schedulertest.NewFakeClock(t0)
	_, finished := start(t, s, clock, 2, &Target{Name: "chat", Webhook: srv.URL, Timeout: time.Second})
	await(t, finished, "the first attempt")
	clock.Advance(5 * time.Second)
	await(t, finished, "the last attempt")
	got := getNotification(t, s, n.ID)
	if got.State != store.NotificationFailed || got.Attempts != 2 || !strings.Contains(got.LastError, "503") {
		t.Fatalf("after the last attempt: %+v", got)
	}
	if rc.badSig.Load() != 2 {
		t.Errorf("unsigned requests were taken as signed: %d", rc.badSig.Load())
	}
}

// TestWebhookNoRedirect: a receiver that redirects elsewhere does not get
// the event sent on; the attempt fails.
func TestWebhookNoRedirect(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "chat", t0)
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5, &Target{Name: "chat", Webhook: srv.URL, Secret: []byte("k"), Timeout: time.Second})
	await(t, finished, "the attempt")
	got := getNotification(t, s, n.ID)
	if got.State != store.NotificationPending || !strings.Contains(got.LastError, "307") || elsewhere.Load() != 0 {
		t.Fatalf("after a redirect: %+v; requests elsewhere: %d", got, elsewhere.Load())
	}
}

// TestWebhookErrorHidesPath: the URL's path, a secret for chat webhooks,
// is in no recorded error.
func TestWebhookErrorHidesPath(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "chat", t0)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/services/T0/B0/s3cr3tpath"
	srv.Close() // connection refused
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5, &Target{Name: "chat", Webhook: url, Timeout: time.Second})
	await(t, finished, "the attempt")
	got := getNotification(t, s, n.ID)
	if got.LastError == "" || strings.Contains(got.LastError, "s3cr3t") {
		t.Fatalf("error %q", got.LastError)
	}
}

// TestCommandNotifier: a command notifier reads the event on stdin, in an
// environment without the daemon's variables; a command that fails is
// retried with its output in the error.
func TestCommandNotifier(t *testing.T) {
	t.Setenv("SCHEDULERD_STORE_PASSWORD", "hunter2")
	s := openStore(t)
	n := deadLetter(t, s, "backup", "page", t0)
	dir := t.TempDir()
	clock := schedulertest.NewFakeClock(t0)
	script := fmt.Sprintf(`if [ ! -e %[1]s/failed ]; then touch %[1]s/failed; echo "pager down" >&2; exit 3; fi
cat > %[1]s/event.json; env > %[1]s/env`, dir)
	_, finished := start(t, s, clock, 5, &Target{Name: "page", Shell: script, Timeout: 10 * time.Second})
	await(t, finished, "the first attempt")
	got := getNotification(t, s, n.ID)
	if got.State != store.NotificationPending || !strings.Contains(got.LastError, "exit code 3: pager down") {
		t.Fatalf("after a failed command: %+v", got)
	}
	clock.Advance(5 * time.Second)
	await(t, finished, "the second attempt")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationDelivered {
		t.Fatalf("after the second attempt: %+v", got)
	}
	event, err := os.ReadFile(filepath.Join(dir, "event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pl store.EventPayload
	if err := json.Unmarshal(event, &pl); err != nil || pl.ID != n.ID || pl.Event != jobs.EventDeadLetter || pl.Job != "backup" {
		t.Fatalf("stdin %s: %v", event, err)
	}
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "hunter2") || !strings.Contains(string(env), "SCHEDULERD_NOTIFICATION_ID="+n.ID) {
		t.Errorf("environment:\n%s", env)
	}
}

// TestUnknownNotifier: a notification for a notifier this node does not
// know (a reload removed it) is retried, then kept failed, with the reason.
func TestUnknownNotifier(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "gone", t0)
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 1)
	await(t, finished, "the attempt")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationFailed || !strings.Contains(got.LastError, `notifier "gone" is not in this node's config`) {
		t.Fatalf("%+v", got)
	}
}

func TestSignature(t *testing.T) {
	secret, body := []byte("k3y"), []byte(`{"id":"x"}`)
	sig := Sign(secret, 1700000000, body)
	if !strings.HasPrefix(sig, "sha256=") || len(sig) != len("sha256=")+64 {
		t.Fatalf("signature %q", sig)
	}
	for _, tt := range []struct {
		name   string
		secret []byte
		ts     int64
		body   []byte
		sig    string
		ok     bool
	}{
		{"as signed", secret, 1700000000, body, sig, true},
		{"another body", secret, 1700000000, []byte(`{"id":"y"}`), sig, false},
		{"another time", secret, 1700000001, body, sig, false},
		{"another secret", []byte("k3y2"), 1700000000, body, sig, false},
		{"no signature", secret, 1700000000, body, "", false},
	} {
		if got := Verify(tt.secret, tt.ts, tt.body, tt.sig); got != tt.ok {
			t.Errorf("%s: Verify = %t", tt.name, got)
		}
	}
}
