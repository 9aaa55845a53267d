package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/smtptest"
	"github.com/schedulerd/schedulerd/internal/testcert"
)

// cronLogin is the login of the test SMTP servers that ask for one.
var cronLogin = map[string]string{"cron": "s3cret"}

// mailEnv is a test SMTP server, the certificate it presents (which the
// daemon trusts through SSL_CERT_FILE), and the daemon's password file.
type mailEnv struct {
	srv      *smtptest.Server
	cert     testcert.Pair
	password string
}

func newMailEnv(t *testing.T, e *env, opts smtptest.Options, password string) *mailEnv {
	t.Helper()
	pair := testcert.Write(t, t.TempDir(), "smtp", "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	m := &mailEnv{srv: smtptest.Start(t, opts), cert: pair, password: filepath.Join(e.dir, "smtp.password")}
	m.setPassword(t, password)
	return m
}

func (m *mailEnv) setPassword(t *testing.T, password string) {
	t.Helper()
	if err := os.WriteFile(m.password, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// config is a job that writes output and fails once and for all, and a
// mail notifier of the server by scheme ("smtp" or "smtps").
func (m *mailEnv) config(scheme string) string {
	return fmt.Sprintf(`[[notifier]]
name = "mail"
mail_to = ["ops@example.com", "oncall@example.org"]
mail_from = "cron@example.com"
smtp = "%s://%s"
smtp_user = "cron"
smtp_password_file = %q
timeout = "5s"

[[job]]
name = "broken"
shell = "echo starting; echo 'rsync: connection refused' >&2; exit 3"
retry = { max_attempts = 1 }
notify = ["mail"]
`, scheme, m.srv.Addr, m.password)
}

func (m *mailEnv) awaitMessage(t *testing.T, d *proc) *smtptest.Message {
	t.Helper()
	select {
	case msg := <-m.srv.Messages:
		return msg
	case <-time.After(30 * time.Second):
		t.Fatalf("no mail reached the SMTP server\n%s", d.logText())
		return nil
	}
}

// readMail returns a message's decoded subject and body.
func readMail(t *testing.T, data []byte) (mail.Header, string, string) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("read the message: %v\n%s", err, data)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	return msg.Header, subject, strings.ReplaceAll(string(body), "\r\n", "\n")
}

// TestNotifyMail: a run's dead letter reaches a real SMTP server, through
// STARTTLS (smtp://) or TLS from the first byte (smtps://), logged in with
// the password file's password, trusting the server's certificate by
// SSL_CERT_FILE; the mail names the job, the event and the node, and has
// the run's output; `schedulerd notifications` lists it delivered.
func TestNotifyMail(t *testing.T) {
	for _, scheme := range []string{"smtp", "smtps"} {
		t.Run(scheme, func(t *testing.T) {
			e := newEnv(t)
			m := newMailEnv(t, e, smtptest.Options{StartTLS: scheme == "smtp", Implicit: scheme == "smtps", Users: cronLogin}, "s3cret")
			e.writeConfig(m.config(scheme))
			d := e.startEnv(true, "SSL_CERT_FILE="+m.cert.CertFile)
			defer d.stop()
			if r := e.cli("trigger", "broken", "--wait"); r.code == 0 {
				t.Fatalf("the broken job succeeded: %s", r.stdout)
			}
			msg := m.awaitMessage(t, d)
			if !msg.TLS || msg.User != "cron" || msg.From != "cron@example.com" || !slices.Equal(msg.To, []string{"ops@example.com", "oncall@example.org"}) {
				t.Errorf("envelope %v", msg)
			}
			header, subject, body := readMail(t, msg.Data)
			if subject != "[schedulerd] broken: dead_letter on test-node" || header.Get("To") != "<ops@example.com>, <oncall@example.org>" {
				t.Errorf("subject %q, headers %v", subject, header)
			}
			for _, want := range []string{"A run failed after its last attempt.", "exit code 3", "starting\nrsync: connection refused\n"} {
				if !strings.Contains(body, want) {
					t.Errorf("the body has no %q:\n%s", want, body)
				}
			}
			var list []map[string]any
			waitFor(t, "delivered", 30*time.Second, func() bool {
				list = jsonLines(t, e.ok("notifications", "--json"))
				return len(list) == 1 && list[0]["state"] == "delivered"
			})
			if list[0]["notifier"] != "mail" || list[0]["attempts"] != 1.0 || header.Get("X-Schedulerd-Id") != list[0]["id"] {
				t.Errorf("listed %v; mail headers %v", list[0], header)
			}
			for _, c := range m.srv.Commands() {
				if strings.HasPrefix(c.Line, "AUTH") && !c.TLS {
					t.Errorf("AUTH in clear: %q", c.Line)
				}
			}
			if strings.Contains(d.logText(), "s3cret") {
				t.Errorf("the log shows the password")
			}
		})
	}
}

// TestNotifyMailBadPassword: a password the server refuses is a clear
// error, listed by `schedulerd notifications` as the delivery's last error
// of a pending notification; with the right password in the file and a
// reload, the next attempt (after the backoff) delivers it.
func TestNotifyMailBadPassword(t *testing.T) {
	e := newEnv(t)
	m := newMailEnv(t, e, smtptest.Options{StartTLS: true, Users: cronLogin}, "wrong")
	e.writeConfig(m.config("smtp"))
	d := e.startEnv(true, "SSL_CERT_FILE="+m.cert.CertFile)
	defer d.stop()
	e.cli("trigger", "broken", "--wait")
	want := "smtp " + m.srv.Addr + `: log in as "cron": 535 5.7.8 Authentication credentials invalid`
	var list []map[string]any
	waitFor(t, "the failed attempt", 30*time.Second, func() bool {
		list = jsonLines(t, e.ok("notifications", "--json"))
		return len(list) == 1 && list[0]["attempts"] == 1.0
	})
	if list[0]["state"] != "pending" || list[0]["last_error"] != want {
		t.Fatalf("after a refused password: %v\nwant the error %q", list[0], want)
	}
	if table := e.ok("notifications"); !strings.Contains(table, "pending") || !strings.Contains(table, `log in as "cron"`) {
		t.Errorf("table:\n%s", table)
	}
	if log := d.logText(); !strings.Contains(log, "will retry") || !strings.Contains(log, "535 5.7.8 Authentication credentials invalid") ||
		strings.Contains(log, "wrong") {
		t.Errorf("log:\n%s", log)
	}
	if len(m.srv.Messages) != 0 {
		t.Fatalf("a message was taken without a login")
	}

	m.setPassword(t, "s3cret")
	d.signal(syscall.SIGHUP)
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	msg := m.awaitMessage(t, d)
	if msg.User != "cron" {
		t.Errorf("envelope %v", msg)
	}
	waitFor(t, "delivered", 30*time.Second, func() bool {
		list = jsonLines(t, e.ok("notifications", "--json"))
		return len(list) == 1 && list[0]["state"] == "delivered"
	})
	if list[0]["attempts"] != 2.0 {
		t.Errorf("delivered: %v; want it at the second attempt", list[0])
	}
}

// TestNotifyMailRefusesClearText: a server that offers no STARTTLS gets
// neither the password nor the mail; the error says why and what to set.
func TestNotifyMailRefusesClearText(t *testing.T) {
	e := newEnv(t)
	m := newMailEnv(t, e, smtptest.Options{AuthInClear: true, Users: cronLogin}, "s3cret")
	e.writeConfig(m.config("smtp"))
	d := e.startEnv(true, "SSL_CERT_FILE="+m.cert.CertFile)
	defer d.stop()
	e.cli("trigger", "broken", "--wait")
	var list []map[string]any
	waitFor(t, "the failed attempt", 30*time.Second, func() bool {
		list = jsonLines(t, e.ok("notifications", "--json"))
		return len(list) == 1 && list[0]["attempts"] == 1.0
	})
	if msg, _ := list[0]["last_error"].(string); list[0]["state"] != "pending" || !strings.Contains(msg, "offers no STARTTLS") || !strings.Contains(msg, "smtp_insecure = true") {
		t.Fatalf("%v", list[0])
	}
	for _, c := range m.srv.Commands() {
		if v, _, _ := strings.Cut(c.Line, " "); v != "EHLO" && v != "QUIT" {
			t.Errorf("the daemon sent %q in clear", c.Line)
		}
	}
}

// TestMailPasswordFileRefused: a password file that others may read stops
// the start, and fails check-config, with a message naming it; the
// password is never shown.
func TestMailPasswordFileRefused(t *testing.T) {
	e := newEnv(t)
	m := newMailEnv(t, e, smtptest.Options{StartTLS: true, Users: cronLogin}, "s3cret")
	if err := os.Chmod(m.password, 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeConfig(m.config("smtp"))
	want := `notifier "mail": smtp_password_file: ` + m.password + " may be read or written by every user (mode 0644): whoever reads it can send mail as the SMTP user"
	r := e.cli("check-config")
	if r.code != exitUsage || !strings.Contains(r.stderr, want) {
		t.Fatalf("check-config: exit %d\n%s%s\nwant %q", r.code, r.stdout, r.stderr, want)
	}
	out, err := exec.Command(binary, "run", "--config", e.config).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), want) || strings.Contains(string(out)+r.stderr, "s3cret") {
		t.Fatalf("run: %v\n%s", err, out)
	}
}

// TestImportCrontabMail: import-crontab makes a crontab's MAILTO a mail
// notifier of its jobs, which check-config accepts with a warning that
// its smtp server is yet to be filled in; filled in, a failing job's
// mail reaches the server, with the job's output.
func TestImportCrontabMail(t *testing.T) {
	e := newEnv(t)
	r := runBinary(t, "", "MAILTO=ops@example.com\n0 0 * * * echo 'disk full'; exit 1\n", "import-crontab", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "notify = [\"mail\"]") ||
		!strings.Contains(r.stderr, `schedulerd: warning: import-crontab: the jobs after MAILTO on line 1 notify the [[notifier]] "mail", which mails ops@example.com: fill in its smtp server`) {
		t.Fatalf("import-crontab: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e.writeConfig(r.stdout)
	c := e.cli("check-config")
	if c.code != 0 || !strings.Contains(c.stderr, `schedulerd: warning: notifier "mail": smtp: smtp.invalid is a name that never resolves (.invalid): write the SMTP server`) {
		t.Fatalf("check-config of the import: exit %d\n%s%s", c.code, c.stdout, c.stderr)
	}

	m := newMailEnv(t, e, smtptest.Options{StartTLS: true}, "unused") // no login: the import sets none
	filled := strings.Replace(r.stdout, `smtp = "smtp://smtp.invalid:587"`, `smtp = "smtp://`+m.srv.Addr+`"`, 1)
	e.writeConfig(filled)
	if c := e.cli("check-config"); c.code != 0 || c.stderr != "" {
		t.Fatalf("check-config once filled in: exit %d\n%s%s", c.code, c.stdout, c.stderr)
	}
	d := e.startEnv(true, "SSL_CERT_FILE="+m.cert.CertFile)
	defer d.stop()
	e.cli("trigger", "echo", "--wait")
	msg := m.awaitMessage(t, d)
	_, subject, body := readMail(t, msg.Data)
	if !slices.Equal(msg.To, []string{"ops@example.com"}) || subject != "[schedulerd] echo: dead_letter on test-node" || !strings.Contains(body, "disk full") {
		t.Errorf("envelope %v, subject %q, body:\n%s", msg, subject, body)
	}
}

// TestNotifyMailCluster: on PostgreSQL, in a 2-node cluster, a run's
// dead letter is mailed once, with the output read from the cluster's
// store, and listed delivered by both nodes.
func TestNotifyMailCluster(t *testing.T) {
	pg.Require(t)
	dir := t.TempDir()
	m := newMailEnv(t, &env{t: t, dir: dir}, smtptest.Options{StartTLS: true, Users: cronLogin}, "s3cret")
	t.Setenv("SSL_CERT_FILE", m.cert.CertFile) // the nodes' environment
	c := newCluster(t, 2, m.config("smtp"))
	if r := c.cli("node-1", "trigger", "broken", "--wait"); r.code == 0 {
		t.Fatalf("the broken job succeeded")
	}
	msg := m.awaitMessage(t, c.node("node-1").d)
	_, subject, body := readMail(t, msg.Data)
	if !msg.TLS || msg.User != "cron" || !strings.HasPrefix(subject, "[schedulerd] broken: dead_letter on node-") ||
		!strings.Contains(body, "starting\nrsync: connection refused\n") {
		t.Errorf("envelope %v, subject %q, body:\n%s", msg, subject, body)
	}
	for _, id := range c.ids() {
		waitFor(t, "delivered, seen from "+id, 30*time.Second, func() bool {
			r := c.cli(id, "notifications", "--json")
			l := jsonLines(t, r.stdout)
			return r.code == 0 && len(l) == 1 && l[0]["state"] == "delivered" && l[0]["attempts"] == 1.0
		})
	}
	if len(m.srv.Messages) != 0 {
		t.Errorf("%d more messages: the notification was mailed more than once", len(m.srv.Messages))
	}
}
