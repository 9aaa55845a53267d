package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/mail"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/jobs"
)

// Notifier is a [[notifier]] table: where the events of the jobs that name
// it in notify are sent. Exactly one of Webhook, Command, Shell and MailTo
// is set.
type Notifier struct {
	// Name is what jobs name in notify: unique, up to 128 letters, digits,
	// '.', '_' and '-', starting with a letter or digit.
	Name string
	// Events are the events sent, in config order; jobs.DefaultNotifyEvents when
	// the table leaves events out.
	Events []jobs.NotifyEvent
	// Webhook is an https:// URL (http:// only to a loopback address) that
	// each event is POSTed to as JSON. It may hold a secret in its path (as
	// chat webhooks do): logs show only its host.
	Webhook string
	// SecretFile is the absolute path of the file whose content (without a
	// final newline) keys the HMAC-SHA256 of each webhook body; "" for
	// none. It is read at start and on each reload.
	SecretFile string
	// BodyTemplate, when set, is a text/template that makes the webhook
	// body from the event's fields ({{.job}}, {{.event}}, ...; the json
	// function quotes a value as a JSON string) instead of the event JSON.
	BodyTemplate string
	// Command and Shell run a program with the event as JSON on stdin,
	// contained as a job is (process group, scrubbed environment, timeout).
	Command []string
	Shell   string
	// User runs Command or Shell as this user ("" for the daemon's).
	User string
	// MailTo makes a mail notifier: each event is mailed to these
	// addresses through the server SMTP.
	MailTo []string
	// MailFrom is the sender; "" for schedulerd@ and the host's name.
	MailFrom string
	// SMTP is the server: smtp://host[:port] (STARTTLS; port 587 by
	// default) or smtps://host[:port] (TLS from the start; port 465). See
	// ParseSMTP.
	SMTP string
	// SMTPUser and SMTPPasswordFile, set together, log in to the server;
	// the password is read from the file as a secret_file is.
	SMTPUser, SMTPPasswordFile string
	// SMTPInsecure gives up the server's authentication: a server that
	// offers no STARTTLS gets the mail (and the password) in clear, and a
	// certificate is not verified.
	SMTPInsecure bool
	// Timeout bounds one delivery. Default DefaultNotifierTimeout.
	Timeout time.Duration
	// Renotify is the interval of reminders while a job stays failing or
	// overdue; 0 for none.
	Renotify time.Duration
}

// Wants reports whether n sends events of kind e.
func (n *Notifier) Wants(e jobs.NotifyEvent) bool { return slices.Contains(n.Events, e) }

// Bounds and defaults of [[notifier]] tables.
const (
	// MaxNotifiers is the largest number of [[notifier]] tables.
	MaxNotifiers = 100
	// DefaultNotifierTimeout bounds a delivery when timeout is left out.
	DefaultNotifierTimeout = 10 * time.Second
	// MaxNotifierTimeout is the longest timeout.
	MaxNotifierTimeout = 10 * time.Minute
	// MaxBodyTemplate is the size of the largest body_template, in bytes.
	MaxBodyTemplate = 64 << 10
	// MaxMailTo is the largest number of mail_to addresses.
	MaxMailTo = 100
)

var notifierKeys = []string{
	"name", "events", "webhook", "secret_file", "body_template", "command", "shell", "user", "timeout", "renotify",
	"mail_to", "mail_from", "smtp", "smtp_user", "smtp_password_file", "smtp_insecure",
}

// kindKeys are the keys that each make a kind of notifier.
var kindKeys = []string{"webhook", "command", "shell", "mail_to"}

// mailKeys are the keys of mail notifiers alone.
var mailKeys = []string{"mail_from", "smtp", "smtp_user", "smtp_password_file", "smtp_insecure"}

// TemplateFuncs are the functions a body_template may call: json writes a
// value as JSON (a string quoted and escaped), so that a job name or an
// error cannot break the body.
var TemplateFuncs = template.FuncMap{"json": templateJSON}

// ParseBodyTemplate parses a body_template.
func ParseBodyTemplate(text string) (*template.Template, error) {
	return template.New("body_template").Option("missingkey=error").Funcs(TemplateFuncs).Parse(text)
}

// SampleEvent has every field of an event's JSON, for checking templates.
var SampleEvent = map[string]any{
	"id": "00000000-0000-0000-0000-000000000000", "event": "dead_letter", "job": "backup",
	"run_id": "00000000-0000-0000-0000-000000000000", "attempt": 3, "status": "dead_letter",
	"reason": "failed", "exit_code": 1, "error": "exit status 1", "node": "node-a",
	"at": "2026-01-01T00:00:00Z", "since": "2026-01-01T00:00:00Z",
}

// notifiers reads the [[notifier]] tables. names holds the name of each
// table that has a valid one, whether or not the table has problems, so
// that a job naming it is not also reported.
func (p *parser) notifiers(tables []map[string]any) (out []Notifier, names map[string]string) {
	names = map[string]string{} // name -> path of its first notifier
	if len(tables) > MaxNotifiers {
		p.errAt(p.line(indexPath("notifier", MaxNotifiers)), "notifier", "%d notifiers; at most %d are allowed", len(tables), MaxNotifiers)
		return nil, nil
	}
	for i, m := range tables {
		if m == nil {
			continue
		}
		sc := scope{path: indexPath("notifier", i), label: indexPath("notifier", i) + "."}
		before := len(p.errs)
		n := Notifier{Events: slices.Clone(jobs.DefaultNotifyEvents), Timeout: DefaultNotifierTimeout}
		if v, ok := m["name"]; !ok {
			p.errorf(sc, "name", "is required")
		} else if name, ok := p.nonEmpty(sc, "name", v); ok {
			if namePattern.MatchString(name) {
				n.Name = name
				sc.label = fmt.Sprintf("notifier %q: ", name)
				if first, dup := names[name]; dup {
					p.errorf(sc, "name", "duplicate notifier name; the first notifier named %q is at line %d", name, p.line(joinPath(first, "name")))
				} else {
					names[name] = sc.path
				}
			} else {
				p.errorf(sc, "name", "%s is not a valid notifier name: use up to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", clip(strconv.Quote(name)))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			p.notifierKey(sc, &n, k, m[k])
		}
		p.checkNotifier(sc, &n, m)
		if len(p.errs) == before {
			out = append(out, n)
		}
	}
	return out, names
}

// notifierKey reads key k of a [[notifier]] into n.
func (p *parser) notifierKey(sc scope, n *Notifier, k string, v any) {
	if p.mailKey(sc, n, k, v) {
		return
	}
	switch k {
	case "name":
	case "events":
		if evs, ok := p.events(sc, k, v); ok {
			n.Events = evs
		}
	case "webhook":
		p.setChecked(sc, k, v, &n.Webhook, checkWebhook)
	case "secret_file":
		p.setAbsolute(sc, k, v, &n.SecretFile)
	case "body_template":
		p.setChecked(sc, k, v, &n.BodyTemplate, checkBodyTemplate)
	case "command":
		if args, ok := p.command(sc, k, v); ok {
			n.Command = args
		}
	case "shell":
		p.setChecked(sc, k, v, &n.Shell, func(string) string { return "" })
	case "user":
		p.setChecked(sc, k, v, &n.User, func(name string) string { return errText(p.lookupUser(name)) })
	case "timeout":
		if d, ok := p.duration(sc, k, v, positive); ok {
			if d > MaxNotifierTimeout {
				p.errorf(sc, k, "must be at most %s, got %s", MaxNotifierTimeout, d)
			} else {
				n.Timeout = d
			}
		}
	case "renotify":
		if d, ok := p.duration(sc, k, v, nonNegative); ok {
			if d > 0 && d < time.Minute {
				p.errorf(sc, k, "must be 0 (no reminders) or at least 1m, got %s", d)
			} else {
				n.Renotify = d
			}
		}
	default:
		p.unknown(sc, k, notifierKeys)
	}
}

// mailKey reads key k of a mail notifier into n; false when k is not one
// of the mail keys.
func (p *parser) mailKey(sc scope, n *Notifier, k string, v any) bool {
	switch k {
	case "mail_to":
		if to, ok := p.mailTo(sc, k, v); ok {
			n.MailTo = to
		}
	case "mail_from":
		p.setChecked(sc, k, v, &n.MailFrom, checkMailAddress)
	case "smtp":
		p.setChecked(sc, k, v, &n.SMTP, func(s string) string {
			_, err := ParseSMTP(s)
			return errText(err)
		})
	case "smtp_user":
		p.setChecked(sc, k, v, &n.SMTPUser, func(s string) string {
			if len(s) > 256 || strings.ContainsFunc(s, unicode.IsControl) || !utf8.ValidString(s) {
				return "must be at most 256 bytes of text without control characters"
			}
			return ""
		})
	case "smtp_password_file":
		p.setAbsolute(sc, k, v, &n.SMTPPasswordFile)
	case "smtp_insecure":
		if b, ok := p.boolean(sc, k, v); ok {
			n.SMTPInsecure = b
		}
	default:
		return false
	}
	return true
}

// setChecked sets *dst to the string of key k, which must not be empty,
// when check finds nothing wrong with it (""); else it reports what check
// says.
func (p *parser) setChecked(sc scope, k string, v any, dst *string, check func(string) string) {
	s, ok := p.nonEmpty(sc, k, v)
	if !ok {
		return
	}
	if msg := check(s); msg != "" {
		p.errorf(sc, k, "%s", msg)
		return
	}
	*dst = s
}

// setAbsolute sets *dst to the absolute path of key k, cleaned.
func (p *parser) setAbsolute(sc scope, k string, v any, dst *string) {
	p.setChecked(sc, k, v, dst, func(s string) string {
		if !filepath.IsAbs(s) {
			return "must be an absolute path, got " + clip(strconv.Quote(s))
		}
		return ""
	})
	if *dst != "" {
		*dst = filepath.Clean(*dst)
	}
}

// errText is the text of err, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkNotifier checks the keys of a [[notifier]] that go together.
func (p *parser) checkNotifier(sc scope, n *Notifier, m map[string]any) {
	var kinds []string
	for _, k := range kindKeys {
		if _, ok := m[k]; ok {
			kinds = append(kinds, k)
		}
	}
	has := func(k string) bool { _, ok := m[k]; return ok }
	switch {
	case len(kinds) == 0:
		p.errorf(sc, "webhook", `is required: set webhook = "https://...", command = ["/path/to/program"], shell = "a command line" or mail_to = ["ops@example.com"]`)
		return
	case len(kinds) > 1:
		// At the second of them in the file.
		slices.SortStableFunc(kinds, func(a, b string) int {
			return cmp.Compare(p.line(joinPath(sc.path, a)), p.line(joinPath(sc.path, b)))
		})
		p.errorf(sc, kinds[1], "set only one of webhook, command, shell and mail_to")
		return
	}
	kind := kinds[0]
	if kind != "mail_to" {
		for _, k := range mailKeys {
			if has(k) {
				p.errorf(sc, k, "is for mail notifiers, which set mail_to")
			}
		}
	}
	switch kind {
	case "webhook":
		if has("user") {
			p.errorf(sc, "user", "is for command and shell notifiers; a webhook is sent by the daemon")
		}
	case "mail_to":
		for _, k := range []string{"secret_file", "body_template"} {
			if has(k) {
				p.errorf(sc, k, "is for webhook notifiers; a mail notifier writes its own message")
			}
		}
		if has("user") {
			p.errorf(sc, "user", "is for command and shell notifiers; mail is sent by the daemon")
		}
		if !has("smtp") {
			p.errorf(sc, "mail_to", `needs smtp, the server that takes the mail: set smtp = "smtp://mail.example:587" (STARTTLS) or "smtps://mail.example:465"`)
		}
		switch {
		case has("smtp_user") && !has("smtp_password_file"):
			p.errorf(sc, "smtp_user", "needs smtp_password_file, the file that holds the password")
		case has("smtp_password_file") && !has("smtp_user"):
			p.errorf(sc, "smtp_password_file", "needs smtp_user, the user the password is of")
		}
	default:
		for _, k := range []string{"secret_file", "body_template"} {
			if has(k) {
				p.errorf(sc, k, "is for webhook notifiers; a %s notifier reads the event JSON on stdin", kind)
			}
		}
	}
}

// mailTo reads a non-empty list of distinct mail addresses.
func (p *parser) mailTo(sc scope, k string, v any) ([]string, bool) {
	list, ok := v.([]any)
	switch {
	case !ok:
		p.errorf(sc, k, `must be a list of addresses such as ["ops@example.com"], not %s`, typeName(v))
		return nil, false
	case len(list) == 0:
		p.errorf(sc, k, `must not be empty: write the addresses, such as ["ops@example.com"]`)
		return nil, false
	case len(list) > MaxMailTo:
		p.errorf(sc, k, "has %d addresses; at most %d are allowed", len(list), MaxMailTo)
		return nil, false
	}
	return p.distinctStrings(sc, k, list, checkMailAddress)
}

// distinctStrings reads list as strings, none repeated, each of which
// check finds nothing wrong with (""); else it reports the first element
// that is not so.
func (p *parser) distinctStrings(sc scope, k string, list []any, check func(string) string) ([]string, bool) {
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, isString := e.(string)
		if !isString {
			p.errorf(sc, k, "element %d must be a string, not %s", i, typeName(e))
			return nil, false
		}
		if msg := check(s); msg != "" {
			p.errorf(sc, k, "element %d: %s", i, msg)
			return nil, false
		}
		if slices.Contains(out, s) {
			p.errorf(sc, k, "element %d repeats %s", i, clip(strconv.Quote(s)))
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// checkMailAddress returns what is wrong with a mail address, or "": it
// must be a bare address (no display name, no angle brackets) of ASCII
// letters, digits and the punctuation of an unquoted local part, an @ and
// a domain name, which goes into the envelope and the headers as it is.
func checkMailAddress(s string) string {
	bad := fmt.Sprintf("%s is not a mail address such as \"ops@example.com\" (a bare address: no name, no <>, no quotes)", clip(strconv.Quote(s)))
	local, domain, ok := strings.Cut(s, "@")
	if !ok || len(s) > 254 || local == "" || len(local) > 64 || strings.Contains(domain, "@") || !validDomain(domain) {
		return bad
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" || strings.Trim(atom, atext) != "" {
			return bad
		}
	}
	if a, err := mail.ParseAddress(s); err != nil || a.Address != s || a.Name != "" {
		return bad
	}
	return ""
}

// ValidMailAddress reports whether s is a mail address as mail_to and
// mail_from take it.
func ValidMailAddress(s string) bool { return checkMailAddress(s) == "" }

// atext are the characters of a dot-atom's atoms (RFC 5322).
const atext = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~"

// validDomain reports whether s is a domain name of letters, digits and
// hyphens, dot-separated labels of at most 63 bytes.
func validDomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
			return false
		}
	}
	return true
}

// SMTPServer is where a mail notifier sends: Host and Port, with TLS from
// the first byte (smtps://) or after STARTTLS (smtp://).
type SMTPServer struct {
	Host, Port  string
	ImplicitTLS bool
}

// Addr is the server's host:port.
func (s SMTPServer) Addr() string { return net.JoinHostPort(s.Host, s.Port) }

// ParseSMTP reads an smtp key: smtp://host[:port] (port 587, STARTTLS) or
// smtps://host[:port] (port 465, TLS from the start), with no user,
// password, path or query. The host is a name or an IP address.
func ParseSMTP(s string) (SMTPServer, error) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return SMTPServer{}, fmt.Errorf(`must be a URL such as "smtp://mail.example:587" or "smtps://mail.example:465", got %s`, clip(strconv.Quote(s)))
	}
	srv := SMTPServer{Host: u.Hostname(), Port: u.Port()}
	switch u.Scheme {
	case "smtp":
		srv.Port = cmp.Or(srv.Port, "587")
	case "smtps":
		srv.Port, srv.ImplicitTLS = cmp.Or(srv.Port, "465"), true
	default:
		return SMTPServer{}, fmt.Errorf("must be an smtp:// or smtps:// URL, not %s", clip(strconv.Quote(u.Scheme+"://")))
	}
	switch {
	case u.User != nil:
		return SMTPServer{}, errors.New("must not hold a user or password: set smtp_user and smtp_password_file")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return SMTPServer{}, errors.New(`must be the server alone, such as "smtp://mail.example:587": no path, query or fragment`)
	case net.ParseIP(srv.Host) == nil && !validDomain(srv.Host):
		return SMTPServer{}, fmt.Errorf("%s is not a host name or IP address", clip(strconv.Quote(srv.Host)))
	}
	if port, err := strconv.Atoi(srv.Port); err != nil || port < 1 || port > 65535 {
		return SMTPServer{}, fmt.Errorf("port %s must be a number from 1 to 65535", clip(strconv.Quote(srv.Port)))
	}
	return srv, nil
}

// events reads a non-empty list of distinct events.
func (p *parser) events(sc scope, k string, v any) ([]jobs.NotifyEvent, bool) {
	list, ok := v.([]any)
	if !ok {
		p.errorf(sc, k, `must be a list such as ["dead_letter", "resolved"], not %s`, typeName(v))
		return nil, false
	}
	if len(list) == 0 {
		p.errorf(sc, k, "must not be empty; leave it out for the default (%s)", eventList(jobs.DefaultNotifyEvents))
		return nil, false
	}
	evs := make([]jobs.NotifyEvent, 0, len(list))
	for i, e := range list {
		s, isString := e.(string)
		switch {
		case !isString:
			p.errorf(sc, k, "element %d must be a string, not %s", i, typeName(e))
			return nil, false
		case !jobs.ValidNotifyEvent(jobs.NotifyEvent(s)):
			p.errorf(sc, k, "element %d must be one of %s; got %s", i, eventList(jobs.NotifyEvents), clip(strconv.Quote(s)))
			return nil, false
		case slices.Contains(evs, jobs.NotifyEvent(s)):
			p.errorf(sc, k, "element %d repeats %q", i, s)
			return nil, false
		}
		evs = append(evs, jobs.NotifyEvent(s))
	}
	return evs, true
}

func eventList(evs []jobs.NotifyEvent) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = string(e)
	}
	return strings.Join(s, ", ")
}

// checkWebhook returns what is wrong with a webhook URL, or "". Plain
// http:// is for a receiver on this host only: the body and its signature
// would cross the network in clear.
func checkWebhook(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "must be a URL such as \"https://hooks.example/x\""
	}
	if u.User != nil {
		return "must not hold a user or password; put the credentials in the path, or sign with secret_file"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return ""
		}
		return "must be https:// (plain http:// is allowed only to a loopback address)"
	}
	return fmt.Sprintf("must be an https:// URL, not %s", clip(strconv.Quote(u.Scheme+"://")))
}

// checkBodyTemplate returns what is wrong with a body_template, or "": it
// must parse and run over an event with every field.
func checkBodyTemplate(s string) string {
	if len(s) > MaxBodyTemplate {
		return fmt.Sprintf("must be at most %d KiB", MaxBodyTemplate>>10)
	}
	t, err := ParseBodyTemplate(s)
	if err != nil {
		return clipN(strings.TrimPrefix(err.Error(), "template: "), 300)
	}
	if err := t.Execute(discard{}, SampleEvent); err != nil {
		return clipN(strings.TrimPrefix(err.Error(), "template: "), 300)
	}
	return ""
}

// templateJSON is the json function of a body_template.
func templateJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// targets returns the notify targets of the notifiers named, which the
// file declares (checked by notify); nil for none.
func (p *parser) targets(names []string) []jobs.NotifyTarget {
	if len(names) == 0 {
		return nil
	}
	out := make([]jobs.NotifyTarget, 0, len(names))
	for _, name := range names {
		if n := p.notifierByName[name]; n != nil {
			out = append(out, n.Target())
		}
	}
	return out
}

// Target is what a job's transitions carry of n for the store.
func (n *Notifier) Target() jobs.NotifyTarget {
	return jobs.NotifyTarget{Notifier: n.Name, Events: n.Events, Renotify: n.Renotify}
}

// notify reads a notify list: distinct names of [[notifier]] tables of
// the file (declared). An empty list is a job's way to notify no one when
// [defaults] sets notify.
func (p *parser) notify(sc scope, k string, v any, declared map[string]string) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		p.errorf(sc, k, `must be a list of notifier names such as ["ops"], not %s`, typeName(v))
		return nil, false
	}
	// A repeated name is declared as its first was: the order of the
	// checks does not matter.
	return p.distinctStrings(sc, k, list, func(s string) string {
		if _, ok := declared[s]; !ok && declared != nil {
			return "no [[notifier]] named " + clip(strconv.Quote(s))
		}
		return ""
	})
}
