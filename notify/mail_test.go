package notify

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"net/smtp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/smtptest"
	"github.com/schedulerd/schedulerd/internal/testcert"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler/schedulertest"
	"github.com/schedulerd/schedulerd/store"
)

// smtpServer starts a test SMTP server with a certificate for 127.0.0.1,
// and returns it with a pool that trusts the certificate.
func smtpServer(t *testing.T, opts smtptest.Options) (*smtptest.Server, testcert.Pair) {
	t.Helper()
	pair := testcert.Write(t, t.TempDir(), "smtp", "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	return smtptest.Start(t, opts), pair
}

// mailTarget is a mail notifier named "mail" of the server at addr.
func mailTarget(t *testing.T, addr string, m Mail) *Target {
	t.Helper()
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		t.Fatalf("address %q", addr)
	}
	m.Host, m.Port = host, port
	if m.To == nil {
		m.To = []string{"ops@example.com", "oncall@example.org"}
	}
	if m.From == "" {
		m.From = "schedulerd@node.example"
	}
	return &Target{Name: "mail", Mail: &m, Timeout: 5 * time.Second}
}

func awaitMessage(t *testing.T, srv *smtptest.Server) *smtptest.Message {
	t.Helper()
	select {
	case m := <-srv.Messages:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message reached the SMTP server")
		return nil
	}
}

// parsed is a message as a mail reader sees it.
type parsed struct {
	header  mail.Header
	subject string
	body    string
}

// parseMessage reads a message off the wire: its line ends must all be
// CRLF, its header lines at most 998 bytes, its body quoted-printable.
func parseMessage(t *testing.T, data []byte) parsed {
	t.Helper()
	for i, c := range data {
		if (c == '\r' && (i+1 == len(data) || data[i+1] != '\n')) || (c == '\n' && (i == 0 || data[i-1] != '\r')) {
			t.Fatalf("a bare CR or LF at byte %d of the message:\n%q", i, data)
		}
	}
	head, _, _ := bytes.Cut(data, []byte("\r\n\r\n"))
	for _, l := range strings.Split(string(head), "\r\n") {
		if len(l) > 998 {
			t.Fatalf("a header line of %d bytes: %.80q", len(l), l)
		}
	}
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("read the message: %v\n%s", err, data)
	}
	if m.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Fatalf("Content-Transfer-Encoding %q", m.Header.Get("Content-Transfer-Encoding"))
	}
	body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatalf("decode the body: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("decode the subject %q: %v", m.Header.Get("Subject"), err)
	}
	return parsed{header: m.Header, subject: subject, body: strings.ReplaceAll(string(body), "\r\n", "\n")}
}

// TestMailSTARTTLS: a dead letter is mailed through a server that offers
// STARTTLS, as the config's user, to every recipient: the subject names
// the job, the event and the node, the body has the event and the end of
// the output; the password never crossed in clear.
func TestMailSTARTTLS(t *testing.T) {
	s := openStore(t)
	output := "starting the backup\nrsync: connection refused\n"
	n := failRun(t, s, "backup", "web-1", "mail", jobs.Result{ExitCode: ptr(2), Err: errors.New("exit status 2"),
		Output: output, OutputBytes: int64(len(output))}, t0)
	srv, pair := smtpServer(t, smtptest.Options{StartTLS: true, Users: map[string]string{"cron": "s3cret"}})
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5,
		mailTarget(t, srv.Addr, Mail{User: "cron", Password: []byte("s3cret"), RootCAs: pair.Pool()}))
	msg := awaitMessage(t, srv)
	await(t, finished, "the delivery")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationDelivered || got.Attempts != 1 {
		t.Fatalf("notification %+v", got)
	}
	if msg.From != "schedulerd@node.example" || !slices.Equal(msg.To, []string{"ops@example.com", "oncall@example.org"}) ||
		!msg.TLS || msg.User != "cron" {
		t.Fatalf("envelope %v", msg)
	}
	p := parseMessage(t, msg.Data)
	if want := "[schedulerd] backup: dead_letter on web-1"; p.subject != want {
		t.Errorf("subject %q, want %q", p.subject, want)
	}
	if p.header.Get("From") != "<schedulerd@node.example>" || p.header.Get("To") != "<ops@example.com>, <oncall@example.org>" ||
		p.header.Get(HeaderID) != n.ID || p.header.Get("Message-Id") != "<"+n.ID+"@schedulerd>" ||
		p.header.Get("Auto-Submitted") != "auto-generated" || p.header.Get("Date") != t0.Format(time.RFC1123Z) {
		t.Errorf("headers %v", p.header)
	}
	for _, want := range []string{"A run failed after its last attempt.", "Job:       backup", "Status:    dead_letter (failed), exit code 2",
		"Node:      web-1", "Run:       " + n.RunID + " (attempt 1)", "exit status 2",
		"Output of attempt 1 (" + strconv.Itoa(len(output)) + " bytes):\n\nstarting the backup\nrsync: connection refused\n", "schedulerd runs show " + n.RunID} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the body has no %q:\n%s", want, p.body)
		}
	}
	for _, c := range srv.Commands() {
		if strings.HasPrefix(strings.ToUpper(c.Line), "AUTH") && !c.TLS {
			t.Errorf("AUTH in clear: %q", c.Line)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestMailBadPassword: a password the server refuses is a failed attempt
// whose error says so, retried after the backoff, and failed after the
// last attempt; nothing is mailed.
func TestMailBadPassword(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "mail", t0)
	srv, pair := smtpServer(t, smtptest.Options{StartTLS: true, Users: map[string]string{"cron": "s3cret"}})
	clock := schedulertest.NewFakeClock(t0)
	_, finished := start(t, s, clock, 2, mailTarget(t, srv.Addr, Mail{User: "cron", Password: []byte("wrong"), RootCAs: pair.Pool()}))
	await(t, finished, "the first attempt")
	got := getNotification(t, s, n.ID)
	want := "smtp " + srv.Addr + `: log in as "cron": 535 5.7.8 Authentication credentials invalid`
	if got.State != store.NotificationPending || got.Attempts != 1 || got.LastError != want || !got.NextAttemptAt.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("after a refused password: %+v\nwant the error %q", got, want)
	}
	clock.Advance(5 * time.Second)
	await(t, finished, "the last attempt")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationFailed || got.Attempts != 2 || got.LastError != want {
		t.Fatalf("after the last attempt: %+v", got)
	}
	if len(srv.Messages) != 0 {
		t.Errorf("a message was taken")
	}
	for _, c := range srv.Commands() {
		if strings.HasPrefix(c.Line, "MAIL") {
			t.Errorf("MAIL after a refused login: %q", c.Line)
		}
	}
}

// TestMailImplicitTLS: smtps:// speaks TLS from the first byte, and logs
// in with LOGIN when the server offers only that.
func TestMailImplicitTLS(t *testing.T) {
	s := openStore(t)
	n := deadLetter(t, s, "backup", "mail", t0)
	srv, pair := smtpServer(t, smtptest.Options{Implicit: true, Users: map[string]string{"cron": "s3cret"}, Mechanisms: []string{"LOGIN"}})
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5,
		mailTarget(t, srv.Addr, Mail{ImplicitTLS: true, User: "cron", Password: []byte("s3cret"), RootCAs: pair.Pool()}))
	msg := awaitMessage(t, srv)
	await(t, finished, "the delivery")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationDelivered || !msg.TLS || msg.User != "cron" {
		t.Fatalf("notification %+v, message %v", got, msg)
	}
	if cs := srv.Commands(); len(cs) == 0 || slices.ContainsFunc(cs, func(c smtptest.Command) bool { return !c.TLS }) {
		t.Errorf("commands %v: every one must come inside TLS", cs)
	}
}

// TestMailNoClearText: a server that offers no STARTTLS gets no mail and
// no password unless smtp_insecure, even when it offers AUTH in clear; a
// certificate that does not verify is refused too. With smtp_insecure
// both are accepted.
func TestMailNoClearText(t *testing.T) {
	t.Run("no STARTTLS", func(t *testing.T) {
		s := openStore(t)
		n := deadLetter(t, s, "backup", "mail", t0)
		srv, _ := smtpServer(t, smtptest.Options{Users: map[string]string{"cron": "s3cret"}, AuthInClear: true})
		_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5, mailTarget(t, srv.Addr, Mail{User: "cron", Password: []byte("s3cret")}))
		await(t, finished, "the attempt")
		got := getNotification(t, s, n.ID)
		if got.State != store.NotificationPending || !strings.Contains(got.LastError, "smtp "+srv.Addr+" offers no STARTTLS: the mail would cross the network in clear") {
			t.Fatalf("notification %+v", got)
		}
		for _, c := range srv.Commands() {
			if v, _, _ := strings.Cut(c.Line, " "); v != "EHLO" && v != "QUIT" {
				t.Errorf("the client sent %q to a server without STARTTLS", c.Line)
			}
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		s := openStore(t)
		n := deadLetter(t, s, "backup", "mail", t0)
		srv, _ := smtpServer(t, smtptest.Options{StartTLS: true, Users: map[string]string{"cron": "s3cret"}})
		_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5, mailTarget(t, srv.Addr, Mail{User: "cron", Password: []byte("s3cret")}))
		await(t, finished, "the attempt")
		got := getNotification(t, s, n.ID)
		if got.State != store.NotificationPending || !strings.Contains(got.LastError, "STARTTLS: tls: failed to verify certificate") {
			t.Fatalf("notification %+v", got)
		}
		if slices.ContainsFunc(srv.Commands(), func(c smtptest.Command) bool { return c.TLS }) {
			t.Errorf("commands after a failed handshake: %v", srv.Commands())
		}
	})
	t.Run("smtp_insecure", func(t *testing.T) {
		for _, startTLS := range []bool{false, true} {
			s := openStore(t)
			n := deadLetter(t, s, "backup", "mail", t0)
			srv, _ := smtpServer(t, smtptest.Options{StartTLS: startTLS, Users: map[string]string{"cron": "s3cret"}, AuthInClear: true})
			_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5,
				mailTarget(t, srv.Addr, Mail{User: "cron", Password: []byte("s3cret"), Insecure: true}))
			msg := awaitMessage(t, srv)
			await(t, finished, "the delivery")
			if got := getNotification(t, s, n.ID); got.State != store.NotificationDelivered || msg.TLS != startTLS || msg.User != "cron" {
				t.Fatalf("STARTTLS offered %v: notification %+v, message %v", startTLS, got, msg)
			}
		}
	})
	t.Run("no AUTH", func(t *testing.T) {
		s := openStore(t)
		n := deadLetter(t, s, "backup", "mail", t0)
		srv, pair := smtpServer(t, smtptest.Options{StartTLS: true})
		_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5,
			mailTarget(t, srv.Addr, Mail{User: "cron", Password: []byte("s3cret"), RootCAs: pair.Pool()}))
		await(t, finished, "the attempt")
		if got := getNotification(t, s, n.ID); got.State != store.NotificationPending || got.LastError != "smtp "+srv.Addr+" offers no AUTH, and smtp_user is set" {
			t.Fatalf("notification %+v", got)
		}
	})
}

// TestMailAuthInClearRefused: the logins themselves refuse to send a
// password on a connection in clear unless insecure, whatever the server
// offers (net/smtp's PlainAuth would send it to localhost).
func TestMailAuthInClearRefused(t *testing.T) {
	for _, a := range []smtp.Auth{&plainAuth{user: "u", password: []byte("p")}, &loginAuth{user: "u", password: []byte("p")}} {
		if _, _, err := a.Start(&smtp.ServerInfo{Name: "localhost", Auth: []string{"PLAIN", "LOGIN"}}); !errors.Is(err, errClear) {
			t.Errorf("%T in clear: %v", a, err)
		}
		if _, _, err := a.Start(&smtp.ServerInfo{Name: "localhost", TLS: true}); err != nil {
			t.Errorf("%T inside TLS: %v", a, err)
		}
	}
	if _, _, err := (&plainAuth{insecure: true}).Start(&smtp.ServerInfo{Name: "mail.example"}); err != nil {
		t.Errorf("insecure PLAIN in clear: %v", err)
	}
}

// TestMailHeaderInjection: a job name, a node, an error and an output
// with line ends and header lines in them add no header and no
// recipient: the message has its own headers alone, the envelope the
// config's addresses alone.
func TestMailHeaderInjection(t *testing.T) {
	s := openStore(t)
	evil := "x\r\nBcc: evil@attacker.example\r\nSubject: owned\n\r\n.\r\nRCPT TO:<evil@attacker.example>\r\n"
	n := failRun(t, s, "backup"+evil, "web-1"+evil, "mail", jobs.Result{ExitCode: ptr(1), Err: errors.New("failed" + evil),
		Output: evil + "\n.\n..\r\nQUIT\r\n" + evil, OutputBytes: 1000}, t0)
	srv, pair := smtpServer(t, smtptest.Options{StartTLS: true})
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5, mailTarget(t, srv.Addr, Mail{RootCAs: pair.Pool()}))
	msg := awaitMessage(t, srv)
	await(t, finished, "the delivery")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationDelivered {
		t.Fatalf("notification %+v", got)
	}
	if !slices.Equal(msg.To, []string{"ops@example.com", "oncall@example.org"}) || msg.From != "schedulerd@node.example" {
		t.Fatalf("envelope %v", msg)
	}
	for _, c := range srv.Commands() {
		if strings.Contains(c.Line, "evil") || strings.HasPrefix(c.Line, "QUIT") && c.Line != "QUIT" {
			t.Errorf("command %q", c.Line)
		}
	}
	p := parseMessage(t, msg.Data)
	var keys []string
	for k := range p.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"Auto-Submitted", "Content-Transfer-Encoding", "Content-Type", "Date", "From", "Message-Id", "Mime-Version",
		"Subject", "To", "X-Schedulerd-Event", "X-Schedulerd-Id"}
	if !slices.Equal(keys, want) {
		t.Fatalf("headers %q, want %q\n%s", keys, want, msg.Data)
	}
	for _, k := range want {
		if len(p.header[k]) != 1 {
			t.Errorf("header %s %d times", k, len(p.header[k]))
		}
	}
	if strings.ContainsAny(p.subject, "\r\n") || !strings.HasPrefix(p.subject, "[schedulerd] backupx  Bcc: evil@attacker.example") {
		t.Errorf("subject %q", p.subject)
	}
	if !strings.Contains(p.body, "QUIT") || !strings.Contains(p.body, "\n.\n..\n") {
		t.Errorf("the output is not in the body as it was:\n%s", p.body)
	}
}

// TestMailBodyBounded: a run that wrote a megabyte is mailed with the
// last MailOutputTail bytes of its output and a clipped error: a body of a
// few KiB.
func TestMailBodyBounded(t *testing.T) {
	s := openStore(t)
	var out strings.Builder
	for i := 0; out.Len() < 1<<20; i++ {
		out.WriteString("line " + strconv.Itoa(i) + " of a long output é\n")
	}
	out.WriteString("the very end")
	n := failRun(t, s, "backup", "web-1", "mail", jobs.Result{ExitCode: ptr(1), Err: errors.New(strings.Repeat("e", 1<<20)),
		Output: out.String(), OutputBytes: int64(out.Len())}, t0)
	srv, pair := smtpServer(t, smtptest.Options{StartTLS: true})
	_, finished := start(t, s, schedulertest.NewFakeClock(t0), 5, mailTarget(t, srv.Addr, Mail{RootCAs: pair.Pool()}))
	msg := awaitMessage(t, srv)
	await(t, finished, "the delivery")
	if got := getNotification(t, s, n.ID); got.State != store.NotificationDelivered {
		t.Fatalf("notification %+v", got)
	}
	p := parseMessage(t, msg.Data)
	if limit := MailOutputTail + MailErrorLimit + 2048; len(p.body) > limit || len(msg.Data) > 3*limit {
		t.Errorf("a body of %d bytes (%d on the wire); want at most %d", len(p.body), len(msg.Data), limit)
	}
	if !strings.Contains(p.body, "the very end") || strings.Contains(p.body, "line 0 of") || !strings.Contains(p.body, "its last 8192 of "+strconv.Itoa(out.Len())+" bytes") {
		t.Errorf("body:\n%s", p.body)
	}
}

// TestMailMessageWithoutRun: an event of no run (overdue) has no output
// part.
func TestMailMessageWithoutRun(t *testing.T) {
	m := &Mail{To: []string{"ops@example.com"}, From: "s@example.com"}
	data := MailMessage(m, store.EventPayload{ID: "id-1", Event: jobs.EventOverdue, Job: "nightly", Node: "n1",
		Error: "no run completed within expect_success_within (26h)", At: t0}, nil, t0)
	p := parseMessage(t, data)
	if p.subject != "[schedulerd] nightly: overdue on n1" || strings.Contains(p.body, "Output") || strings.Contains(p.body, "runs show") ||
		!strings.Contains(p.body, "No run completed within expect_success_within.") {
		t.Errorf("subject %q, body:\n%s", p.subject, p.body)
	}
}
