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
	"syscall"
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

// TestCheckConfigSecretFile: check-config checks each notifier's
// secret_file as run does at start: a missing file and one that every user
// may read are errors (exit 2) with the line run prints, naming the config,
// the notifier and the file; a file its group may read draws run's warning;
// a good one passes quietly.
func TestCheckConfigSecretFile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		mode    os.FileMode // 0: no file
		code    int
		want    string // in the error, or the warning when code is 0
		warning bool
	}{
		{name: "good", mode: 0o600},
		{name: "missing", code: exitUsage, want: "no such file or directory"},
		{name: "readable by all", mode: 0o644, code: exitUsage, want: "may be read or written by every user (mode 0644)"},
		{name: "readable by its group", mode: 0o640, want: "is readable by its group (mode 0640)", warning: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			path := filepath.Join(e.dir, "ops.secret")
			if tt.mode != 0 {
				path = writeSecret(t, e.dir, tt.mode)
			}
			e.writeConfig(notifyConfig("http://127.0.0.1:9", path))
			r := e.cli("check-config")
			if r.code != tt.code {
				t.Fatalf("check-config: exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
			prefix := `notifier "ops": secret_file: ` + path
			switch {
			case tt.code != 0:
				line := "schedulerd: config: " + e.config + `: notifier "ops": secret_file: `
				if !strings.HasPrefix(r.stderr, line) || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, tt.want) {
					t.Fatalf("check-config: stderr %q, want %q, the file and %q", r.stderr, line, tt.want)
				}
				out, _ := exec.Command(binary, "run", "--config", e.config).CombinedOutput()
				if !strings.Contains(string(out), strings.TrimSpace(r.stderr)) {
					t.Errorf("run says\n%s\ncheck-config says\n%s", out, r.stderr)
				}
			case tt.warning:
				if want := "schedulerd: warning: " + prefix; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, tt.want) {
					t.Errorf("check-config: stderr %q, want %q ... %q", r.stderr, want, tt.want)
				}
			default:
				if r.stderr != "" || !strings.Contains(r.stdout, ": ok, 1 jobs") {
					t.Errorf("check-config of a good secret file:\n%s%s", r.stdout, r.stderr)
				}
			}
			if strings.Contains(r.stdout+r.stderr, "k3y") {
				t.Errorf("check-config shows the secret:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}

// TestCheckConfigSecretFileOfAnotherUser: check-config may run as another
// user than the daemon (root, while the packaged unit runs as schedulerd).
// Where the answer depends on the daemon's user, it warns instead of
// refusing: a file owned by another user, which run as root refuses, and a
// file it may not open, whose mode it still checks.
func TestCheckConfigSecretFileOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("files of another user, and check-config run as one, need root")
	}
	const nobody = 65534
	e := newEnv(t)
	for _, dir := range []string{filepath.Dir(e.dir), e.dir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := writeSecret(t, e.dir, 0o600)
	e.writeConfig(notifyConfig("http://127.0.0.1:9", path))
	prefix := `notifier "ops": secret_file: ` + path

	// Owned by nobody: the daemon accepts it only when it runs as nobody.
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	r := e.cli("check-config")
	if want := prefix + " is owned by uid 65534, neither root nor uid 0, which runs check-config: the daemon accepts it only if it runs as uid 65534"; r.code != 0 ||
		!strings.Contains(r.stderr, "schedulerd: warning: "+want) {
		t.Errorf("check-config as root of a file of nobody: exit %d\n%s%s\nwant the warning %q", r.code, r.stdout, r.stderr, want)
	}
	out, err := exec.Command(binary, "run", "--config", e.config).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), prefix+" is owned by uid 65534, neither root nor the daemon's user") {
		t.Errorf("run as root with a secret file of nobody: %v\n%s", err, out)
	}

	// Run by nobody, of a file of root: its mode is checked, not its content.
	if err := os.Chown(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	bin := publicBinary(t)
	asNobody := func() cliResult {
		cmd := exec.Command(bin, "check-config", "--config", e.config)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}
	r = asNobody()
	if want := prefix + " cannot be read by uid 65534, which runs check-config"; r.code != 0 || !strings.Contains(r.stderr, "schedulerd: warning: "+want) {
		t.Errorf("check-config as nobody of a 0600 file of root: exit %d\n%s%s\nwant the warning %q", r.code, r.stdout, r.stderr, want)
	}
	if err := os.Chmod(path, 0o602); err != nil { // written by all, read by none but root
		t.Fatal(err)
	}
	r = asNobody()
	if want := prefix + " may be read or written by every user (mode 0602)"; r.code != exitUsage || !strings.Contains(r.stderr, want) {
		t.Errorf("check-config as nobody of a 0602 file of root: exit %d\n%s%s\nwant %q", r.code, r.stdout, r.stderr, want)
	}
}

// TestCheckConfigUsers: that the daemon may run a job or a notifier as
// its user depends on the daemon's user, so check-config run by another
// user than root warns where run would refuse. (An unknown user is a
// config error, with its line.)
func TestCheckConfigUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("check-config run as another user than root needs root")
	}
	jobAs := func(user string) string {
		return fmt.Sprintf("[[job]]\nname = \"a\"\nshell = \"true\"\nuser = %q\n", user)
	}
	notifierAs := func(user string) string {
		return fmt.Sprintf("[[notifier]]\nname = \"ops\"\nshell = \"cat\"\nuser = %q\n\n[[job]]\nname = \"a\"\nshell = \"true\"\nnotify = [\"ops\"]\n", user)
	}
	e := newEnv(t)
	for _, dir := range []string{filepath.Dir(e.dir), e.dir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := publicBinary(t)
	for _, tt := range []struct{ name, config, want string }{
		{"job", jobAs("root"), `job "a": user "root"`},
		{"notifier", notifierAs("root"), `notifier "ops": user "root"`},
	} {
		e.writeConfig(tt.config)
		if r := e.cli("check-config"); r.code != 0 || r.stderr != "" {
			t.Errorf("%s: check-config as root: exit %d\n%s%s", tt.name, r.code, r.stdout, r.stderr)
		}
		cmd := exec.Command(bin, "check-config", "--config", e.config)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		want := "schedulerd: warning: " + tt.want + ": the daemon can run it only if it runs as root"
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: check-config as nobody: %v\n%s\nwant the warning %q", tt.name, err, out, want)
		}
	}
}
