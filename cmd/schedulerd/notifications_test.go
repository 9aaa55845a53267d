package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	notifypkg "github.com/schedulerd/schedulerd/notify"
	"github.com/schedulerd/schedulerd/store"
)

// hook is a webhook receiver for the daemon's notifications: it records
// each request whose signature holds, and hangs the requests while hold is
// set, telling held about each.
type hook struct {
	secret []byte
	mu     sync.Mutex
	got    []map[string]any
	ids    []string
	bad    int
	hold   bool
	held   chan string
}

func newHook(t *testing.T, secret string) (*hook, *httptest.Server) {
	h := &hook{secret: []byte(secret), held: make(chan string, 10)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	ts, _ := strconv.ParseInt(r.Header.Get(notifypkg.HeaderTimestamp), 10, 64)
	h.mu.Lock()
	if !notifypkg.Verify(h.secret, ts, body, r.Header.Get(notifypkg.HeaderSignature)) {
		h.bad++
		h.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev map[string]any
	_ = json.Unmarshal(body, &ev)
	h.got = append(h.got, ev)
	h.ids = append(h.ids, r.Header.Get(notifypkg.HeaderID))
	hold := h.hold
	h.mu.Unlock()
	if hold {
		h.held <- r.Header.Get(notifypkg.HeaderID)
		<-r.Context().Done() // until the daemon is gone
	}
}

func (h *hook) snapshot() ([]map[string]any, []string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.got...), append([]string(nil), h.ids...), h.bad
}

// notifyConfig is a job that fails once and for all, and a webhook
// notifier signed with the secret in secretFile.
func notifyConfig(url, secretFile string) string {
	return fmt.Sprintf(`[[notifier]]
name = "ops"
webhook = %q
secret_file = %q
timeout = "5s"

[[job]]
name = "broken"
shell = "echo nope >&2; exit 3"
retry = { max_attempts = 1 }
notify = ["ops"]
`, url+"/services/T0/s3cr3t", secretFile)
}

func writeSecret(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, "ops.secret")
	if err := os.WriteFile(path, []byte("k3y\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNotifyWebhook: a run's dead letter reaches a real webhook receiver,
// signed with the secret file's key, with the event's fields; the
// notification is listed as delivered by `schedulerd notifications`.
func TestNotifyWebhook(t *testing.T) {
	e := newEnv(t)
	h, srv := newHook(t, "k3y")
	e.writeConfig(notifyConfig(srv.URL, writeSecret(t, e.dir, 0o600)))
	d := e.start(true)
	defer d.stop()
	r := e.cli("trigger", "broken", "--wait", "--json")
	if r.code == 0 {
		t.Fatalf("the broken job succeeded: %s", r.stdout)
	}
	var got []map[string]any
	waitFor(t, "the webhook", 30*time.Second, func() bool { got, _, _ = h.snapshot(); return len(got) > 0 })
	ev := got[0]
	if ev["event"] != "dead_letter" || ev["job"] != "broken" || ev["status"] != "dead_letter" || ev["exit_code"] != 3.0 ||
		ev["node"] != "test-node" || ev["attempt"] != 1.0 || ev["id"] == "" || ev["run_id"] == "" || ev["at"] == "" {
		t.Errorf("event %v", ev)
	}
	var list []map[string]any
	waitFor(t, "delivered", 30*time.Second, func() bool {
		list = jsonLines(t, e.ok("notifications", "--json"))
		return len(list) == 1 && list[0]["state"] == "delivered"
	})
	if list[0]["id"] != ev["id"] || list[0]["notifier"] != "ops" || list[0]["attempts"] != 1.0 {
		t.Errorf("listed %v, delivered %v", list[0], ev)
	}
	if table := e.ok("notifications"); !strings.Contains(table, "dead_letter") || !strings.Contains(table, "delivered") {
		t.Errorf("table:\n%s", table)
	}
	if _, _, bad := h.snapshot(); bad != 0 {
		t.Errorf("%d requests with a bad signature", bad)
	}
	if strings.Contains(d.logText(), "s3cr3t") {
		t.Errorf("the log shows the webhook's path")
	}
}

// TestNotifySecretFileRefused: a secret file that others may read, or a
// symbolic link to one, stops the start with a message naming it.
func TestNotifySecretFileRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		prep func(t *testing.T, dir string) string
		want string
	}{
		{"readable by all", func(t *testing.T, dir string) string { return writeSecret(t, dir, 0o644) }, "may be read or written by every user"},
		{"symbolic link", func(t *testing.T, dir string) string {
			target := writeSecret(t, dir, 0o600)
			link := filepath.Join(dir, "link.secret")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symbolic link"},
		{"empty", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "empty.secret")
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}, "is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			path := tt.prep(t, e.dir)
			e.writeConfig(notifyConfig("http://127.0.0.1:9", path))
			out, err := exec.Command(binary, "run", "--config", e.config).CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want code 2\n%s", err, out)
			}
			if msg := string(out); !strings.Contains(msg, `notifier "ops": secret_file: `+path) || !strings.Contains(msg, tt.want) {
				t.Fatalf("message:\n%s", msg)
			}
			if strings.Contains(string(out), "k3y") {
				t.Fatalf("the message shows the secret:\n%s", out)
			}
		})
	}
}

// TestNotifyKilledMidDelivery: a daemon killed while its webhook request
// hangs leaves the notification pending; the restarted daemon delivers it
// again, with the same id, and no more than once more.
func TestNotifyKilledMidDelivery(t *testing.T) {
	e := newEnv(t)
	h, srv := newHook(t, "k3y")
	h.hold = true
	e.writeConfig(notifyConfig(srv.URL, writeSecret(t, e.dir, 0o600)))
	d := e.start(true)
	e.cli("trigger", "broken", "--wait")
	var id string
	select {
	case id = <-h.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery began\n%s", d.logText())
	}
	d.kill()
	if ns := pendingAfterKill(t, e); len(ns) != 1 || ns[0].State != store.NotificationPending || ns[0].LeaseUntil.IsZero() {
		t.Fatalf("after the kill: %+v", ns)
	}
	h.mu.Lock()
	h.hold = false
	h.mu.Unlock()
	d2 := e.start(true)
	defer d2.stop()
	waitFor(t, "the delivery after the restart", 30*time.Second, func() bool {
		l := jsonLines(t, e.ok("notifications", "--json"))
		return len(l) == 1 && l[0]["state"] == "delivered"
	})
	_, ids, _ := h.snapshot()
	if len(ids) != 2 || ids[0] != id || ids[1] != id {
		t.Errorf("requests with ids %q; want the one id %s twice (the interrupted delivery and the next)", ids, id)
	}
}

// pendingAfterKill reads the notifications from the daemon's store while
// no daemon runs, as the next process finds them.
func pendingAfterKill(t *testing.T, e *env) []*store.Notification {
	t.Helper()
	ns, err := e.openStore().NotificationsList(t.Context(), store.NotificationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestNotifyClusterKilledMidDelivery: in a 2-node PostgreSQL cluster, the
// node that is delivering a notification is killed while the receiver
// holds the request; once its lease runs out (the notifier's timeout and
// 30 s), the other node delivers it, with the same id: the receiver gets
// it twice at most, and it ends delivered.
func TestNotifyClusterKilledMidDelivery(t *testing.T) {
	proctest.Long(t, "a cluster that waits for a lease to run out")
	h, srv := newHook(t, "k3y")
	h.hold = true
	secret := writeSecret(t, t.TempDir(), 0o600)
	c := newCluster(t, 2, strings.Replace(notifyConfig(srv.URL, secret), `timeout = "5s"`, `timeout = "1s"`, 1))
	if r := c.cli("node-1", "trigger", "broken", "--wait"); r.code == 0 {
		t.Fatalf("the broken job succeeded")
	}
	var id string
	select {
	case id = <-h.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery began")
	}
	ns, err := c.st.NotificationsList(t.Context(), store.NotificationFilter{})
	if err != nil || len(ns) != 1 || ns[0].ID != id || ns[0].LeaseNode == "" {
		t.Fatalf("notifications %+v, %v", ns, err)
	}
	deliverer := ns[0].LeaseNode
	h.mu.Lock()
	h.hold = false
	h.mu.Unlock()
	c.node(deliverer).d.kill()
	waitFor(t, "the other node's delivery", 90*time.Second, func() bool {
		ns, err := c.st.NotificationsList(t.Context(), store.NotificationFilter{})
		return err == nil && len(ns) == 1 && ns[0].State == store.NotificationDelivered
	})
	_, ids, bad := h.snapshot()
	if len(ids) != 2 || ids[0] != id || ids[1] != id || bad != 0 {
		t.Errorf("requests with ids %q (bad signatures %d); want %s twice: the cut delivery and the other node's", ids, bad, id)
	}
}
