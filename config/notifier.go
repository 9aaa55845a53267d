package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// Notifier is a [[notifier]] table: where the events of the jobs that name
// it in notify are sent. Exactly one of Webhook, Command and Shell is set.
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
)

var notifierKeys = []string{
	"name", "events", "webhook", "secret_file", "body_template", "command", "shell", "user", "timeout", "renotify",
}

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
	switch k {
	case "name":
	case "events":
		if evs, ok := p.events(sc, k, v); ok {
			n.Events = evs
		}
	case "webhook":
		if s, ok := p.nonEmpty(sc, k, v); ok {
			if msg := checkWebhook(s); msg != "" {
				p.errorf(sc, k, "%s", msg)
			} else {
				n.Webhook = s
			}
		}
	case "secret_file":
		if s, ok := p.nonEmpty(sc, k, v); ok {
			if !filepath.IsAbs(s) {
				p.errorf(sc, k, "must be an absolute path, got %s", clip(strconv.Quote(s)))
			} else {
				n.SecretFile = filepath.Clean(s)
			}
		}
	case "body_template":
		if s, ok := p.nonEmpty(sc, k, v); ok {
			if msg := checkBodyTemplate(s); msg != "" {
				p.errorf(sc, k, "%s", msg)
			} else {
				n.BodyTemplate = s
			}
		}
	case "command":
		if args, ok := p.command(sc, k, v); ok {
			n.Command = args
		}
	case "shell":
		if s, ok := p.nonEmpty(sc, k, v); ok {
			n.Shell = s
		}
	case "user":
		if name, ok := p.nonEmpty(sc, k, v); ok {
			if err := p.lookupUser(name); err != nil {
				p.errorf(sc, k, "%v", err)
			} else {
				n.User = name
			}
		}
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

// checkNotifier checks the keys of a [[notifier]] that go together.
func (p *parser) checkNotifier(sc scope, n *Notifier, m map[string]any) {
	var kinds []string
	for _, k := range []string{"webhook", "command", "shell"} {
		if _, ok := m[k]; ok {
			kinds = append(kinds, k)
		}
	}
	switch {
	case len(kinds) == 0:
		p.errorf(sc, "webhook", `is required: set webhook = "https://...", command = ["/path/to/program"] or shell = "a command line"`)
	case len(kinds) > 1:
		p.errorf(sc, kinds[1], "set only one of webhook, command and shell")
	case kinds[0] == "webhook":
		if _, ok := m["user"]; ok {
			p.errorf(sc, "user", "is for command and shell notifiers; a webhook is sent by the daemon")
		}
	default:
		for _, k := range []string{"secret_file", "body_template"} {
			if _, ok := m[k]; ok {
				p.errorf(sc, k, "is for webhook notifiers; a %s notifier reads the event JSON on stdin", kinds[0])
			}
		}
	}
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
	names := make([]string, 0, len(list))
	for i, e := range list {
		s, isString := e.(string)
		switch {
		case !isString:
			p.errorf(sc, k, "element %d must be a string, not %s", i, typeName(e))
			return nil, false
		case slices.Contains(names, s):
			p.errorf(sc, k, "element %d repeats %s", i, clip(strconv.Quote(s)))
			return nil, false
		}
		if _, ok := declared[s]; !ok && declared != nil {
			p.errorf(sc, k, "element %d: no [[notifier]] named %s", i, clip(strconv.Quote(s)))
			return nil, false
		}
		names = append(names, s)
	}
	return names, true
}
