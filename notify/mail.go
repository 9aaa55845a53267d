package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Mail is where a mail notifier sends, and how.
type Mail struct {
	// To are the recipients; From the sender. Both are bare addresses
	// that the config checked: they go into the envelope and the headers
	// as they are.
	To   []string
	From string
	// Host and Port are the SMTP server's; with ImplicitTLS it speaks TLS
	// from the first byte (smtps://), else after STARTTLS.
	Host, Port  string
	ImplicitTLS bool
	// User and Password log in (AUTH PLAIN, or LOGIN); none when User is
	// empty.
	User     string
	Password []byte
	// Insecure accepts a server that offers no STARTTLS, and a certificate
	// that does not verify: the server is then not authenticated.
	Insecure bool
	// RootCAs verifies the server's certificate; nil for the system's
	// roots (SSL_CERT_FILE included).
	RootCAs *x509.CertPool
}

// Addr is the server's host:port.
func (m *Mail) Addr() string { return net.JoinHostPort(m.Host, m.Port) }

// Bounds of a mail's body: the run's output is its last MailOutputTail
// bytes, an event's error its first MailErrorLimit, so that a run that
// wrote megabytes makes a mail of a few KiB.
const (
	MailOutputTail = 8 << 10
	MailErrorLimit = 2 << 10
	// mailSubjectLimit bounds the subject before it is encoded, which keeps
	// its header line far under SMTP's 998 bytes.
	mailSubjectLimit = 160
)

// eventText says what each event means, in a mail's first line.
var eventText = map[jobs.NotifyEvent]string{
	jobs.EventFailed:     "An attempt failed; the run will retry.",
	jobs.EventDeadLetter: "A run failed after its last attempt.",
	jobs.EventExpired:    "A run did not start by its not_after.",
	jobs.EventRecovered:  "An attempt was taken from a lost node.",
	jobs.EventSkipped:    "Ticks were skipped.",
	jobs.EventOverdue:    "No run completed within expect_success_within.",
	jobs.EventResolved:   "The job succeeded again.",
}

// mail sends n to t's recipients.
func (d *Deliverer) mail(ctx context.Context, t *Target, n *store.Notification) error {
	var ev store.EventPayload
	if err := json.Unmarshal(n.Payload, &ev); err != nil {
		return fmt.Errorf("read the event: %w", err)
	}
	msg := MailMessage(t.Mail, ev, d.outputTail(ctx, ev), d.cfg.Clock.Now())
	return t.Mail.send(ctx, d.cfg.Hostname, msg)
}

// RunOutput is the end of the output of the attempt an event is about.
type RunOutput struct {
	// Tail is the output's last bytes, at most MailOutputTail; Total is
	// how many bytes the attempt wrote.
	Tail  string
	Total int64
	// Err says why the output could not be read; "" when it was.
	Err string
}

// outputTail reads the end of the output of the attempt ev is about; nil
// for an event of no attempt (overdue, skipped, a run that never started).
func (d *Deliverer) outputTail(ctx context.Context, ev store.EventPayload) *RunOutput {
	if ev.RunID == "" || ev.Attempt < 1 {
		return nil
	}
	as, err := d.cfg.Store.RunAttemptsClipped(ctx, store.AttemptsParams{RunID: ev.RunID, Number: ev.Attempt, Keep: MailOutputTail})
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && len(as) == 0):
		return &RunOutput{Err: "the run's history is gone (pruned)"}
	case err != nil:
		return &RunOutput{Err: clean([]byte(err.Error()), 300)}
	}
	a := as[len(as)-1]
	tail := a.Output
	if a.Tail != "" {
		tail = a.Tail
	}
	if len(tail) > MailOutputTail {
		tail = tail[len(tail)-MailOutputTail:]
	}
	return &RunOutput{Tail: tail, Total: a.OutputBytes}
}

// MailMessage writes the message of event ev for m, sent at now: headers
// made of the config's addresses and of the event's fields cleaned of
// every control character (so that no job name, host or error can end a
// header line and add one), and a quoted-printable text body with the
// event and the end of the run's output (out; nil for none), bounded.
func MailMessage(m *Mail, ev store.EventPayload, out *RunOutput, now time.Time) []byte {
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	to := make([]string, len(m.To))
	for i, a := range m.To {
		to[i] = (&mail.Address{Address: a}).String()
	}
	subject := fmt.Sprintf("[schedulerd] %s: %s on %s", ev.Job, ev.Event, ev.Node)
	if ev.Reminder {
		subject += " (reminder)"
	}
	header("From", (&mail.Address{Address: m.From}).String())
	header("To", strings.Join(to, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", oneLine(subject, mailSubjectLimit)))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", "<"+token(ev.ID)+"@schedulerd>")
	header("Auto-Submitted", "auto-generated")
	header(HeaderID, token(ev.ID))
	header(HeaderEvent, token(string(ev.Event)))
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write(mailBody(ev, out))
	_ = qp.Close()
	return b.Bytes()
}

// mailBody is the text of a mail: what happened, the event's fields, and
// the end of the output.
func mailBody(ev store.EventPayload, out *RunOutput) []byte {
	var b strings.Builder
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-10s %s\n", k+":", v)
		}
	}
	fmt.Fprintf(&b, "%s\n\n", eventText[ev.Event])
	field("Job", oneLine(ev.Job, 200))
	field("Event", oneLine(string(ev.Event), 40))
	if ev.RunID != "" {
		field("Run", fmt.Sprintf("%s (attempt %d)", oneLine(ev.RunID, 64), ev.Attempt))
	}
	if ev.Status != "" {
		status := string(ev.Status)
		if ev.Reason != "" {
			status += " (" + string(ev.Reason) + ")"
		}
		if ev.ExitCode != nil {
			status += ", exit code " + strconv.Itoa(*ev.ExitCode)
		}
		field("Status", oneLine(status, 200))
	}
	field("Node", oneLine(ev.Node, 200))
	if !ev.At.IsZero() {
		field("At", ev.At.UTC().Format(time.RFC3339))
	}
	if ev.Since != nil {
		field("Since", ev.Since.UTC().Format(time.RFC3339))
	}
	if ev.Reminder {
		field("Reminder", "yes: the job is still in this state")
	}
	if ev.Error != "" {
		fmt.Fprintf(&b, "\nError:\n%s\n", text(clipBytes(ev.Error, MailErrorLimit)))
	}
	if out != nil {
		switch {
		case out.Err != "":
			fmt.Fprintf(&b, "\nOutput: not read: %s\n", out.Err)
		case out.Total == 0:
			fmt.Fprintf(&b, "\nOutput of attempt %d: none.\n", ev.Attempt)
		case int64(len(out.Tail)) < out.Total:
			fmt.Fprintf(&b, "\nOutput of attempt %d: its last %d of %d bytes:\n\n%s\n", ev.Attempt, len(out.Tail), out.Total, text(out.Tail))
		default:
			fmt.Fprintf(&b, "\nOutput of attempt %d (%d bytes):\n\n%s\n", ev.Attempt, out.Total, text(out.Tail))
		}
	}
	if ev.RunID != "" {
		fmt.Fprintf(&b, "\n-- \nschedulerd runs show %s\n", oneLine(ev.RunID, 64))
	}
	return []byte(b.String())
}

// oneLine makes s one line of at most n bytes of valid UTF-8: every
// control character (CR and LF among them) becomes a space.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return clipBytes(s, n)
}

// text makes s valid UTF-8 text with \n line ends: a \r\n or a lone \r is
// a line end, other control characters but tab are shown as U+FFFD.
func text(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\r':
			return '\n'
		case r == '\n' || r == '\t':
			return r
		case r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '\uFFFD'
		}
		return r
	}, strings.TrimRight(s, "\n"))
}

// clipBytes cuts s to at most n bytes, at a rune boundary, with "..."
// when it cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// token keeps the letters, digits, '.', '_' and '-' of s (an id, an
// event), at most 64, for a header that takes one word.
func token(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '.' || r == '_' || r == '-' || (r >= '0' && r <= '9') || (r|0x20 >= 'a' && r|0x20 <= 'z')) {
			return r
		}
		return -1
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "none"
	}
	return s
}

// send talks SMTP to m's server: TLS from the start or after STARTTLS
// (which the server must offer unless Insecure), AUTH when m.User is set
// (never in clear unless Insecure), then one message to every recipient.
// ctx bounds the whole conversation. Its errors name the server and the
// step, never the password.
func (m *Mail) send(ctx context.Context, hostname string, msg []byte) error {
	addr := m.Addr()
	fail := func(step string, err error) error {
		msg := err.Error()
		if te := (*textproto.Error)(nil); errors.As(err, &te) {
			msg = fmt.Sprintf("%03d %s", te.Code, te.Msg) // the server's reply, unquoted
		}
		return fmt.Errorf("smtp %s: %s: %s", addr, step, clean([]byte(msg), 300))
	}
	tlsConfig := &tls.Config{ServerName: m.Host, RootCAs: m.RootCAs, MinVersion: tls.VersionTLS12, InsecureSkipVerify: m.Insecure}
	dialer := &net.Dialer{}
	var (
		conn net.Conn
		err  error
	)
	if m.ImplicitTLS {
		conn, err = (&tls.Dialer{NetDialer: dialer, Config: tlsConfig}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fail("connect", err)
	}
	// The context bounds every read and write of the conversation.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	c, err := smtp.NewClient(conn, m.Host)
	if err != nil {
		conn.Close()
		return fail("greeting", err)
	}
	defer c.Close()
	if err := c.Hello(hostname); err != nil {
		return fail("EHLO", err)
	}
	secure := m.ImplicitTLS
	if !m.ImplicitTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConfig); err != nil {
				return fail("STARTTLS", err)
			}
			secure = true
		} else if !m.Insecure {
			return fmt.Errorf("smtp %s offers no STARTTLS: the mail would cross the network in clear; "+
				"use smtps:// if the server speaks TLS from the start, or set smtp_insecure = true", addr)
		}
	}
	if m.User != "" {
		ok, offered := c.Extension("AUTH")
		if !ok {
			how := ""
			if !secure {
				how = " in clear"
			}
			return fmt.Errorf("smtp %s offers no AUTH%s, and smtp_user is set", addr, how)
		}
		mechs := strings.Fields(strings.ToUpper(offered))
		var a smtp.Auth
		switch {
		case slices.Contains(mechs, "PLAIN"):
			a = &plainAuth{user: m.User, password: m.Password, insecure: m.Insecure}
		case slices.Contains(mechs, "LOGIN"):
			a = &loginAuth{user: m.User, password: m.Password, insecure: m.Insecure}
		default:
			return fmt.Errorf("smtp %s offers AUTH %s; schedulerd logs in with PLAIN or LOGIN", addr, clean([]byte(offered), 100))
		}
		if err := c.Auth(a); err != nil {
			return fail(fmt.Sprintf("log in as %q", m.User), err)
		}
	}
	if err := c.Mail(m.From); err != nil {
		return fail("MAIL FROM", err)
	}
	for _, to := range m.To {
		if err := c.Rcpt(to); err != nil {
			return fail("RCPT TO "+to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fail("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return fail("DATA", err)
	}
	_ = c.Quit() // the server took the message: a failed QUIT changes nothing
	return nil
}

// errClear refuses to send a password where the connection is not TLS.
var errClear = errors.New("the connection is not encrypted: the password is not sent in clear (smtp_insecure allows it)")

// plainAuth is AUTH PLAIN (RFC 4616). net/smtp's PlainAuth would refuse a
// connection in clear, which smtp_insecure allows, and allows one to
// localhost, which schedulerd does not.
type plainAuth struct {
	user     string
	password []byte
	insecure bool
}

func (a *plainAuth) Start(server *smtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !a.insecure {
		return "", nil, errClear
	}
	resp := make([]byte, 0, 2+len(a.user)+len(a.password))
	resp = append(append(append(append(resp, 0), a.user...), 0), a.password...)
	return "PLAIN", resp, nil
}

func (a *plainAuth) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return nil, errors.New("unexpected challenge after AUTH PLAIN")
	}
	return nil, nil
}

// loginAuth is AUTH LOGIN: the user name, then the password, each at the
// server's prompt.
type loginAuth struct {
	user     string
	password []byte
	insecure bool
	step     int
}

func (a *loginAuth) Start(server *smtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !a.insecure {
		return "", nil, errClear
	}
	a.step = 0
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(_ []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	a.step++
	switch a.step {
	case 1:
		return []byte(a.user), nil
	case 2:
		return a.password, nil
	}
	return nil, errors.New("unexpected challenge after AUTH LOGIN")
}
