package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/internal/testcert"
)

// cliToken is a token that `schedulerd token new` made for a test, in a
// token file of mode 0600.
type cliToken struct {
	name, token string
	// table is what token new printed after the token: comments and the
	// [[token]] table, to paste into a config.
	table string
	file  string
}

// newCLIToken runs `schedulerd token new NAME --role ROLE` and keeps what
// it printed.
func newCLIToken(t *testing.T, dir, name, role string) cliToken {
	t.Helper()
	r := runBinary(t, "", "", "token", "new", name, "--role", role)
	if r.code != 0 {
		t.Fatalf("token new %s --role %s: exit %d: %s", name, role, r.code, r.stderr)
	}
	token, table, ok := strings.Cut(r.stdout, "\n")
	if !ok || !strings.HasPrefix(token, tokenPrefix) || len(token) != len(tokenPrefix)+43 || !control.WellFormedToken(token) {
		t.Fatalf("token new printed:\n%s", r.stdout)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(token)))
	for _, want := range []string{"[[token]]\n", fmt.Sprintf("name = %q\n", name), fmt.Sprintf("role = %q\n", role), fmt.Sprintf("sha256 = %q\n", sum)} {
		if !strings.Contains(table, want) {
			t.Fatalf("token new printed no %q:\n%s", want, r.stdout)
		}
	}
	file := filepath.Join(dir, name+".token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cliToken{name: name, token: token, table: table, file: file}
}

// apiEnv is a daemon with an HTTP API and a token per role.
type apiEnv struct {
	*env
	d                      *proc
	addr                   string
	read, operate, admin   cliToken
	daemonLines, jobsLines string
}

// startAPIDaemon starts a daemon of the CLI jobs with api_listen and the
// tokens that `token new` printed pasted into its config; daemon is more
// [daemon] lines.
func startAPIDaemon(t *testing.T, daemon string) *apiEnv {
	t.Helper()
	ae := &apiEnv{env: newEnv(t), addr: freeAddr(t)}
	ae.read = newCLIToken(t, ae.dir, "grafana", "read")
	ae.operate = newCLIToken(t, ae.dir, "ci", "operate")
	ae.admin = newCLIToken(t, ae.dir, "ops", "admin")
	ae.daemonLines = fmt.Sprintf("api_listen = %q\n%s", ae.addr, daemon)
	ae.jobsLines = fmt.Sprintf(cliJobs(), filepath.Join(ae.dir, "slow.pid"))
	ae.writeConfigWith(8, ae.daemonLines, ae.jobsLines+"\n"+ae.read.table+"\n"+ae.operate.table+"\n"+ae.admin.table)
	ae.d = ae.start(true)
	return ae
}

// api runs a client command over the HTTP API (at url, default the
// daemon's over http) with tok's file, and no config to find a socket in.
func (ae *apiEnv) api(tok cliToken, args ...string) cliResult {
	ae.t.Helper()
	return runBinary(ae.t, "", "", append(args, "--api", "http://"+ae.addr, "--token-file", tok.file)...)
}

// TestCLIOverHTTPAPI: every kind of client command works over the HTTP API
// with a token that `token new` made and whose table was pasted into the
// config: runs, jobs, trigger --wait, runs show, cancel, rerun, pause,
// health, reload; with the flags and with $SCHEDULERD_API and
// $SCHEDULERD_TOKEN_FILE. A role that does not allow a command gets exit
// 4, a token removed by a reload is refused, and the client refuses to
// send a token in clear off loopback, a token file others may read, and
// progress over the API.
func TestCLIOverHTTPAPI(t *testing.T) {
	ae := startAPIDaemon(t, "")
	ok := func(tok cliToken, args ...string) string {
		t.Helper()
		r := ae.api(tok, args...)
		if r.code != 0 {
			t.Fatalf("schedulerd %s over the API: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	fails := func(tok cliToken, code int, want string, args ...string) {
		t.Helper()
		r := ae.api(tok, args...)
		if r.code != code || !strings.Contains(r.stderr, want) {
			t.Fatalf("schedulerd %s over the API: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, want)
		}
	}

	out := ok(ae.operate, "trigger", "ok", "--wait")
	if !strings.Contains(out, "completed (exit code 0)") {
		t.Fatalf("trigger --wait over the API:\n%s", out)
	}
	run := jsonOne(t, ok(ae.read, "runs", "--job", "ok", "--json"))
	id := run["id"].(string)
	if run["status"] != "completed" || run["trigger"] != "manual" {
		t.Errorf("runs --json over the API: %v", run)
	}
	show := jsonOne(t, ok(ae.read, "runs", "show", id, "--json"))
	if a := show["attempts"].([]any); len(a) != 1 || a[0].(map[string]any)["output"] != "hello\nreported\n" {
		t.Errorf("runs show over the API: %v", show)
	}
	if jobs := jsonLines(t, ok(ae.read, "jobs", "--json")); len(jobs) != 4 {
		t.Errorf("jobs over the API: %v", jobs)
	}
	ok(ae.read, "health")
	ok(ae.read, "nodes")
	ok(ae.operate, "pause", "tick")
	ok(ae.operate, "resume", "tick")
	rerun := jsonOne(t, ok(ae.operate, "rerun", id, "--wait", "--json"))
	if rerun["status"] != "completed" || rerun["rerun_of"] != id {
		t.Errorf("rerun --wait over the API: %v", rerun)
	}
	slow := jsonOne(t, ok(ae.operate, "trigger", "slow", "--json"))
	cancelled := jsonOne(t, ok(ae.operate, "cancel", slow["id"].(string), "--wait", "--json"))
	if cancelled["status"] != "cancelled" {
		t.Errorf("cancel --wait over the API: %v", cancelled)
	}
	// The same JSON as on the socket.
	if sock := jsonOne(t, ae.ok("runs", "show", id, "--json")); fmt.Sprint(sock) != fmt.Sprint(show) {
		t.Errorf("runs show on the socket:\n%v\nover the API:\n%v", sock, show)
	}

	// The environment instead of the flags.
	env := []string{"SCHEDULERD_API=http://" + ae.addr, "SCHEDULERD_TOKEN_FILE=" + ae.read.file}
	if r := runBinaryEnv(t, "", "", env, "runs", "--json"); r.code != 0 || r.stdout != ae.ok("runs", "--json") {
		t.Errorf("runs with $SCHEDULERD_API: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	if r := runBinaryEnv(t, "", "", env, "trigger", "ok"); r.code != exitPermission || !strings.Contains(r.stderr, "needs a token with the role operate") {
		t.Errorf("trigger with $SCHEDULERD_API and a read token: exit %d, %s", r.code, r.stderr)
	}
	// --socket on the command line wins over $SCHEDULERD_API.
	if r := runBinaryEnv(t, "", "", env, "jobs", "--socket", filepath.Join(ae.dir, "state", "schedulerd.sock")); r.code != 0 {
		t.Errorf("jobs --socket with $SCHEDULERD_API: exit %d, %s", r.code, r.stderr)
	}

	// Roles.
	fails(ae.read, exitPermission, "needs a token with the role operate", "trigger", "ok")
	fails(ae.read, exitPermission, "needs a token with the role operate", "cancel", id)
	fails(ae.operate, exitPermission, "needs a token with the role admin", "reload")
	ok(ae.admin, "reload")

	// Mistakes of the client, refused before anything is sent.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"runs", "--api", "http://192.0.2.1:8080", "--token-file", ae.read.file}, exitUsage, "refusing to send the token over plain http to 192.0.2.1:8080"},
		{[]string{"runs", "--api", "http://" + ae.addr}, exitUsage, "needs a token: give --token-file F"},
		{[]string{"runs", "--api", "http://" + ae.addr, "--token-file", filepath.Join(ae.dir, "none")}, exitUsage, "token file: open"},
		{[]string{"runs", "--api", "http://" + ae.addr, "--token-file", ae.read.file, "--socket", "/x.sock"}, exitUsage, "give --api or --socket, not both"},
		{[]string{"runs", "--token-file", ae.read.file, "--config", ae.config}, exitUsage, "--token-file is the token of the HTTP API"},
		{[]string{"progress", "50", "--api", "http://" + ae.addr, "--token-file", ae.read.file}, exitUsage, "SCHEDULERD_RUN_ID"},
		{[]string{"runs", "--api", "http://" + freeAddr(t), "--token-file", ae.read.file}, exitNotRunning, "nothing listens on"},
	} {
		if r := runBinary(t, "", "", tt.args...); r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("schedulerd %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.code, tt.want)
		}
	}
	progressEnv := []string{"SCHEDULERD_RUN_ID=x", "SCHEDULERD_ATTEMPT=1", "SCHEDULERD_ATTEMPT_TOKEN=y"}
	if r := runBinaryEnv(t, "", "", progressEnv, "progress", "50", "--api", "http://"+ae.addr, "--token-file", ae.read.file); r.code != exitUsage ||
		!strings.Contains(r.stderr, "not the HTTP API") {
		t.Errorf("progress --api: exit %d, %s", r.code, r.stderr)
	}
	open := filepath.Join(ae.dir, "open.token")
	if err := os.WriteFile(open, []byte(ae.admin.token), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	fails(cliToken{file: open}, exitUsage, "may be read or written by every user (mode 0644)", "runs")
	if err := os.Chmod(open, 0o640); err != nil {
		t.Fatal(err)
	}
	if r := ae.api(cliToken{file: open}, "jobs"); r.code != 0 || !strings.Contains(r.stderr, "warning: token file") {
		t.Errorf("a token file its group may read: exit %d, %s", r.code, r.stderr)
	}
	bad := filepath.Join(ae.dir, "bad.token")
	if err := os.WriteFile(bad, []byte(tokenPrefix+"not-one-of-the-config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fails(cliToken{file: bad}, exitPermission, "refused the token", "runs")

	// A token removed from the config, then a reload: refused from then on.
	ae.writeConfigWith(8, ae.daemonLines, ae.jobsLines+"\n"+ae.operate.table+"\n"+ae.admin.table)
	ok(ae.read, "runs")
	ae.ok("reload")
	fails(ae.read, exitPermission, "refused the token", "runs")
	ok(ae.operate, "runs")
	if logs := ae.d.logText(); strings.Contains(logs, ae.read.token) || strings.Contains(logs, ae.operate.token) {
		t.Errorf("a token is in the daemon's log")
	}
	ae.d.stop()
}

// rawAPI sends one request to the API with an Authorization header (none
// when auth is "") and returns the status, the headers and the body.
func rawAPI(t *testing.T, hc *http.Client, url, method, auth string, body io.Reader) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestHTTPAPIRefusals, against a daemon: no token and an unknown token get
// the same 401; a body over 64 KiB gets 413; /healthz answers anyone and
// /metrics a read token; and a token past its rate gets 429 with a
// Retry-After while another token is still served.
func TestHTTPAPIRefusals(t *testing.T) {
	ae := startAPIDaemon(t, "")
	base := "http://" + ae.addr
	hc := &http.Client{Timeout: 30 * time.Second}
	s1, h1, b1 := rawAPI(t, hc, base+"/v1/jobs/ok/trigger", "POST", "", nil)
	s2, h2, b2 := rawAPI(t, hc, base+"/v1/jobs/ok/trigger", "POST", "Bearer "+tokenPrefix+"AAAA", nil)
	h1.Del("Date")
	h2.Del("Date")
	if s1 != 401 || s1 != s2 || b1 != b2 || fmt.Sprint(h1) != fmt.Sprint(h2) || h1.Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %d %v %s\nunknown token: %d %v %s", s1, h1, b1, s2, h2, b2)
	}
	if s, _, b := rawAPI(t, hc, base+"/v1/jobs/ok/trigger", "POST", "Bearer "+ae.operate.token,
		strings.NewReader(`{"payload": "`+strings.Repeat("x", 100<<10)+`"}`)); s != 413 || !strings.Contains(b, "too_large") {
		t.Errorf("a body of 100 KiB: %d %s", s, b)
	}
	if s, _, b := rawAPI(t, hc, base+"/healthz", "GET", "", nil); s != 200 {
		t.Errorf("/healthz without a token: %d %s", s, b)
	}
	if s, _, b := rawAPI(t, hc, base+"/metrics", "GET", "Bearer "+ae.read.token, nil); s != 200 || !strings.Contains(b, "schedulerd_jobs 4") {
		t.Errorf("/metrics with a read token: %d %.300s", s, b)
	}
	if s, _, _ := rawAPI(t, hc, base+"/metrics", "GET", "", nil); s != 401 {
		t.Errorf("/metrics without a token: %d", s)
	}
	if runs := jsonLines(t, ae.ok("runs", "--json")); len(runs) != 0 {
		t.Errorf("refused requests made runs: %v", runs)
	}

	// The rate: 100 at once, then 20 a second. Eight clients ask as fast
	// as they can until one is refused.
	var (
		refused    atomic.Bool
		retryAfter atomic.Value
		wg         sync.WaitGroup
		sent       atomic.Int64
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !refused.Load() && sent.Add(1) < 5000 {
				req, _ := http.NewRequest("GET", base+"/v1/nodes", nil)
				req.Header.Set("Authorization", "Bearer "+ae.read.token)
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("GET /v1/nodes: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					retryAfter.Store(resp.Header.Get("Retry-After"))
					refused.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if !refused.Load() {
		t.Fatalf("%d requests of one token, none refused", sent.Load())
	}
	t.Logf("refused after about %d requests, Retry-After %v", sent.Load(), retryAfter.Load())
	if ra, _ := retryAfter.Load().(string); ra != "1" {
		t.Errorf("Retry-After %q, want 1 (a token comes back every 50ms)", ra)
	}
	if s, _, b := rawAPI(t, hc, base+"/v1/nodes", "GET", "Bearer "+ae.admin.token, nil); s != 200 {
		t.Errorf("another token while the first is refused: %d %s", s, b)
	}
	ae.d.stop()
}

// TestHTTPAPIOverTLS: with api_tls_cert and api_tls_key the API speaks
// HTTPS; the client trusts the self-signed certificate through
// SSL_CERT_FILE. A new pair in the files and SIGHUP: clients see the new
// certificate. A pair that does not load on SIGHUP rejects the reload and
// the running certificate stays.
func TestHTTPAPIOverTLS(t *testing.T) {
	tlsDir := t.TempDir()
	first := testcert.Write(t, tlsDir, "api", "first")
	ae := startAPIDaemon(t, fmt.Sprintf("api_tls_cert = %q\napi_tls_key = %q", first.CertFile, first.KeyFile))
	trusted := filepath.Join(t.TempDir(), "trusted.pem")
	copyTo(t, first.CertFile, trusted)
	https := func(args ...string) cliResult {
		t.Helper()
		return runBinaryEnv(t, "", "", []string{"SSL_CERT_FILE=" + trusted}, append(args, "--api", "https://"+ae.addr, "--token-file", ae.operate.file)...)
	}
	if r := https("trigger", "ok", "--wait"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Fatalf("trigger --wait over HTTPS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ae.api(ae.operate, "runs"); r.code == 0 {
		t.Errorf("plain HTTP to the TLS port: %s", r.stdout)
	}

	// A new certificate, then SIGHUP.
	second := testcert.Write(t, t.TempDir(), "api", "second")
	copyTo(t, second.CertFile, first.CertFile)
	copyTo(t, second.KeyFile, first.KeyFile)
	ae.d.signal(syscall.SIGHUP)
	ae.d.waitState("READY=1")
	if r := https("runs"); r.code == 0 || !strings.Contains(r.stderr, "not trusted") {
		t.Errorf("a client that trusts the old certificate after the reload: exit %d, %s", r.code, r.stderr)
	}
	copyTo(t, second.CertFile, trusted)
	if r := https("runs", "--json"); r.code != 0 {
		t.Fatalf("a client that trusts the new certificate: exit %d, %s", r.code, r.stderr)
	}

	// A key that is not the certificate's: the reload is rejected, the
	// second certificate stays, and `schedulerd reload` says why.
	third := testcert.Write(t, t.TempDir(), "api", "third")
	copyTo(t, third.KeyFile, first.KeyFile)
	ae.d.signal(syscall.SIGHUP)
	ae.d.waitState("READY=1")
	if !strings.Contains(ae.d.logText(), "the running certificate stays") {
		t.Errorf("no error about the certificate in the log:\n%.3000s", ae.d.logText())
	}
	if r := ae.cli("reload"); r.code != exitUsage || !strings.Contains(r.stderr, "api_tls_cert, api_tls_key") {
		t.Errorf("reload with a bad key: exit %d, %s", r.code, r.stderr)
	}
	if r := https("runs"); r.code != 0 {
		t.Errorf("after the rejected reload: exit %d, %s", r.code, r.stderr)
	}
	ae.d.stop()
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTokenNew: token new prints a different token each time, refuses a
// bad name or role, and its tables make a config that check-config takes.
func TestTokenNew(t *testing.T) {
	dir := t.TempDir()
	a, b := newCLIToken(t, dir, "a", "read"), newCLIToken(t, dir, "b", "admin")
	if a.token == b.token {
		t.Fatal("two tokens are the same")
	}
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte(a.table+b.table), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, "", "", "check-config", "--config", cfg); r.code != 0 {
		t.Errorf("check-config of the tables: exit %d, %s", r.code, r.stderr)
	}
	// check-config names the API and warns about plain HTTP off loopback.
	for _, tt := range []struct {
		daemon, out, warn string
	}{
		{"api_listen = \"127.0.0.1:8080\"\n", "api http://127.0.0.1:8080 with 2 tokens", ""},
		{"api_listen = \":8080\"\n", "api http://:8080 with 2 tokens", "is not a loopback address and the API has no TLS"},
		{"api_listen = \"[::1]:8080\"\napi_tls_cert = \"c.pem\"\napi_tls_key = \"k.pem\"\n", "api https://[::1]:8080 with 2 tokens", ""},
		{"api_listen = \"0.0.0.0:8443\"\napi_tls_cert = \"c.pem\"\napi_tls_key = \"k.pem\"\n", "api https://0.0.0.0:8443", ""},
	} {
		if err := os.WriteFile(cfg, []byte("[daemon]\n"+tt.daemon+a.table+b.table), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runBinary(t, "", "", "check-config", "--config", cfg)
		if r.code != 0 || !strings.Contains(r.stdout, tt.out) || (tt.warn == "") != (r.stderr == "") || !strings.Contains(r.stderr, tt.warn) {
			t.Errorf("check-config with %q: exit %d\n%s%s", tt.daemon, r.code, r.stdout, r.stderr)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "new", "ci"}, "give --role"},
		{[]string{"token", "new", "ci", "--role", "root"}, "--role must be one of read, operate, admin"},
		{[]string{"token", "new", "c i", "--role", "read"}, "is not a valid token name"},
		{[]string{"token", "ci", "--role", "read"}, "usage: schedulerd token new NAME"},
		{[]string{"token", "new", "--role", "read"}, "usage: schedulerd token new NAME"},
	} {
		if r := runBinary(t, "", "", tt.args...); r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("schedulerd %s: exit %d, %s; want %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.want)
		}
	}
}

// TestTokenNewOut: with --out FILE the token goes to FILE alone, a new
// file of mode 0600 whatever the umask, and stdout holds the [[token]]
// table alone, ready to append to a config; the file works as
// --token-file. An existing file, a symlink (to a file or to nothing) and
// a missing directory are refused, and nothing is written through them.
func TestTokenNewOut(t *testing.T) {
	dir := t.TempDir()
	for i, umask := range []string{"000", "277", "022"} {
		file := filepath.Join(dir, fmt.Sprintf("ci%d.token", i))
		cmd := exec.Command("/bin/sh", "-c", `umask `+umask+`; exec "$0" "$@"`, binary, "token", "new", "ci", "--role", "operate", "--out", file)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("token new --out under umask %s: %v: %s", umask, err, errb.String())
		}
		fi, err := os.Lstat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o600 {
			t.Errorf("umask %s: --out file has mode %v, want -rw-------", umask, fi.Mode())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSuffix(string(b), "\n")
		if !strings.HasPrefix(token, tokenPrefix) || len(token) != len(tokenPrefix)+43 || string(b) != token+"\n" {
			t.Fatalf("--out file holds %q, want the token and a line end", b)
		}
		if strings.Contains(out.String(), tokenPrefix) || strings.Contains(out.String(), token[len(tokenPrefix):]) {
			t.Errorf("stdout shows the token:\n%s", out.String())
		}
		if !strings.Contains(out.String(), fmt.Sprintf("sha256 = %q\n", fmt.Sprintf("%x", sha256.Sum256([]byte(token))))) ||
			!strings.Contains(out.String(), "# The token is in "+file+" (mode 0600)") {
			t.Errorf("stdout:\n%s", out.String())
		}
		if got, err := readTokenFile(file, io.Discard); err != nil || got != token {
			t.Errorf("--token-file of the --out file: %q, %v", got, err)
		}
		// stdout appended to a config is a config.
		cfg := filepath.Join(dir, fmt.Sprintf("c%d.toml", i))
		if err := os.WriteFile(cfg, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runBinary(t, "", "", "check-config", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "ok, 0 jobs") {
			t.Errorf("check-config of the table: exit %d, %s %s", r.code, r.stdout, r.stderr)
		}
	}

	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	toFile := filepath.Join(dir, "to-file")
	toNothing := filepath.Join(dir, "to-nothing")
	if err := os.Symlink(existing, toFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nothing"), toNothing); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		out, want string
	}{
		{existing, "--out " + existing + " exists: the token goes to a new file only"},
		{toFile, "--out " + toFile + " is a symlink, which is not followed"},
		{toNothing, "--out " + toNothing + " is a symlink, which is not followed"},
		{filepath.Join(dir, "no", "dir"), "no such file or directory"},
		{dir + "/a\nb", "a file name with a line break"},
	} {
		r := runBinary(t, "", "", "token", "new", "ci", "--role", "read", "--out", tt.out)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
			t.Errorf("token new --out %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.out, r.code, r.stdout, r.stderr, tt.want)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep\n" {
		t.Errorf("the existing file now holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nothing")); err == nil {
		t.Error("a symlink to nothing made its target")
	}
}

// TestHTTPAPIFloodKeepsJobsRunning: a daemon limited to 256 descriptors
// runs jobs while 2,000 idle connections flood its HTTP API and come back
// as soon as they are closed. The API holds a bounded number of them, the
// jobs run and complete, and a request with a token is answered on a
// fresh connection.
func TestHTTPAPIFloodKeepsJobsRunning(t *testing.T) {
	proctest.Long(t, "a flood of connections")
	const nofile, idle, runs = 256, 2000, 20
	e := newEnv(t)
	addr := freeAddr(t)
	tok := newCLIToken(t, e.dir, "ci", "operate")
	e.writeConfigWith(4, fmt.Sprintf("api_listen = %q", addr), `[[job]]
name = "work"
shell = 'sleep 0.2; echo done'
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "1s" }
`+tok.table)
	d := e.startWithNofile(nofile)
	pid := d.cmd.Process.Pid
	base := openFiles(pid)

	f := flood(t, addr, idle)
	defer f.stop()
	waitFor(t, "the flood's connections to be open", time.Minute, func() bool { return f.opened.Load() >= idle })
	var mostFiles atomic.Int64
	watchDone, watchStop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			if n := int64(openFiles(pid)); n > mostFiles.Load() {
				mostFiles.Store(n)
			}
			select {
			case <-watchStop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for i := range runs {
		if r := e.cli("trigger", "work"); r.code != 0 {
			t.Fatalf("trigger %d during the flood: exit %d: %s", i, r.code, r.stderr)
		}
	}
	// A fresh connection may be closed to make room before it is read, as
	// a flooding one is: the client asks again.
	waitFor(t, "the API to answer a token during the flood", time.Minute, func() bool {
		r := runBinary(t, "", "", "runs", "--job", "work", "--api", "http://"+addr, "--token-file", tok.file)
		return r.code == 0
	})
	waitFor(t, "every run to complete", 2*time.Minute, func() bool {
		return len(jsonLines(t, e.ok("runs", "--job", "work", "--status", "completed", "--json"))) == runs
	})
	close(watchStop)
	<-watchDone
	most := int(mostFiles.Load())
	t.Logf("the daemon held %d descriptors before the flood, at most %d seen during it", base, most)
	// The API holds at most DefaultMaxConns connections; the jobs, their
	// pipes and the socket's clients take a few more.
	if most > base+control.DefaultMaxConns+32 {
		t.Errorf("the daemon held up to %d descriptors during the flood, %d before it", most, base)
	}
	if strings.Contains(d.logText(), "too many open files") {
		t.Errorf("the daemon ran out of descriptors:\n%.3000s", d.logText())
	}
	f.stop()
	d.stop()
}

// TestAPIListenClash: an api_listen address that is taken stops the start
// with an error naming the key, before anything runs.
func TestAPIListenClash(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e.writeConfigWith(2, fmt.Sprintf("api_listen = %q", ln.Addr().String()), "")
	r := runBinary(t, "", "", "run", "--config", e.config)
	if r.code == 0 || !strings.Contains(r.stderr, "api_listen: ") || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("run with a taken api_listen: exit %d, %s", r.code, r.stderr)
	}
}
