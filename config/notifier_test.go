package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

const opsWebhook = "[[notifier]]\nname = \"ops\"\nwebhook = \"https://hooks.example/x\"\n"

func TestNotifiers(t *testing.T) {
	cfg := mustParse(t, `
[defaults]
notify = ["ops"]

[[notifier]]
name = "ops"
webhook = "https://hooks.example/services/T0/B0/x"
secret_file = "/etc/schedulerd/../schedulerd/ops.secret"
body_template = '{"text": {{json (printf "%s: %s" .job .event)}}}'
timeout = "5s"
renotify = "4h"

[[notifier]]
name = "pager"
events = ["failed", "resolved"]
command = ["/usr/local/bin/page", "--team", "ops"]
user = "0"

[[notifier]]
name = "log"
shell = "cat >> /var/log/events"

[[notifier]]
name = "mail"
mail_to = ["ops@example.com", "o'brien+cron@mail.example.org"]
mail_from = "cron@example.com"
smtp = "smtp://mail.example.com:2525"
smtp_user = "cron"
smtp_password_file = "/etc/schedulerd/smtp.password"

[[notifier]]
name = "relay"
mail_to = ["root@example.com"]
smtp = "smtps://[::1]"
smtp_insecure = true

[[job]]
name = "backup"
shell = "true"
expect_success_within = "26h"

[[job]]
name = "paged"
shell = "true"
notify = ["pager", "ops"]

[[job]]
name = "quiet"
shell = "true"
notify = []
`)
	want := []Notifier{{
		Name: "ops", Events: jobs.DefaultNotifyEvents, Webhook: "https://hooks.example/services/T0/B0/x",
		SecretFile: "/etc/schedulerd/ops.secret", BodyTemplate: `{"text": {{json (printf "%s: %s" .job .event)}}}`,
		Timeout: 5 * time.Second, Renotify: 4 * time.Hour,
	}, {
		Name: "pager", Events: []jobs.NotifyEvent{jobs.EventFailed, jobs.EventResolved},
		Command: []string{"/usr/local/bin/page", "--team", "ops"}, User: "0", Timeout: DefaultNotifierTimeout,
	}, {
		Name: "log", Events: jobs.DefaultNotifyEvents, Shell: "cat >> /var/log/events", Timeout: DefaultNotifierTimeout,
	}, {
		Name: "mail", Events: jobs.DefaultNotifyEvents, MailTo: []string{"ops@example.com", "o'brien+cron@mail.example.org"},
		MailFrom: "cron@example.com", SMTP: "smtp://mail.example.com:2525", SMTPUser: "cron",
		SMTPPasswordFile: "/etc/schedulerd/smtp.password", Timeout: DefaultNotifierTimeout,
	}, {
		Name: "relay", Events: jobs.DefaultNotifyEvents, MailTo: []string{"root@example.com"}, SMTP: "smtps://[::1]",
		SMTPInsecure: true, Timeout: DefaultNotifierTimeout,
	}}
	if !reflect.DeepEqual(cfg.Notifiers, want) {
		t.Errorf("Notifiers =\n %+v, want\n %+v", cfg.Notifiers, want)
	}
	if n := cfg.Notifier("pager"); n == nil || !n.Wants(jobs.EventFailed) || n.Wants(jobs.EventDeadLetter) {
		t.Errorf("Notifier(pager) = %+v", n)
	}
	if cfg.Notifier("nope") != nil {
		t.Errorf("Notifier(nope) is not nil")
	}
	for _, tt := range []struct {
		job    string
		notify []string
		within time.Duration
	}{
		{"backup", []string{"ops"}, 26 * time.Hour},
		{"paged", []string{"pager", "ops"}, 0},
		{"quiet", nil, 0},
	} {
		d := jobNamed(t, cfg, tt.job)
		var names []string
		for _, n := range d.Notify {
			names = append(names, n.Notifier)
			if want := cfg.Notifier(n.Notifier).Target(); !reflect.DeepEqual(n, want) {
				t.Errorf("job %s: target %+v, want %+v", tt.job, n, want)
			}
		}
		if !slices.Equal(names, tt.notify) || d.ExpectSuccessWithin != tt.within {
			t.Errorf("job %s: Notify %q, ExpectSuccessWithin %s; want %q, %s", tt.job, names, d.ExpectSuccessWithin, tt.notify, tt.within)
		}
	}
}

const opsMail = "[[notifier]]\nname = \"ops\"\nmail_to = [\"ops@example.com\"]\nsmtp = \"smtp://mail.example:587\"\n"

// notifierErrorTests are [[notifier]] tables with one problem each, and
// the start of the line that names it; also seeds of FuzzParseConfig.
var notifierErrorTests = []struct{ name, src, want string }{
	{"no name", "[[notifier]]\nwebhook = \"https://h.example/\"\n", `t.toml:1: notifier[0].name: is required`},
	{"bad name", "[[notifier]]\nname = \"a b\"\nwebhook = \"https://h.example/\"\n", `t.toml:2: notifier[0].name: "a b" is not a valid notifier name`},
	{"duplicate name", opsWebhook + opsWebhook, `t.toml:5: notifier "ops": name: duplicate notifier name; the first notifier named "ops" is at line 2`},
	{"no target", "[[notifier]]\nname = \"ops\"\n", `t.toml:1: notifier "ops": webhook: is required`},
	{"two targets", opsWebhook + "shell = \"true\"\n", `t.toml:4: notifier "ops": shell: set only one of webhook, command, shell and mail_to`},
	{"unknown key", opsWebhook + "url = \"x\"\n", `t.toml:4: notifier "ops": url: unknown key`},
	{"unknown event", opsWebhook + "events = [\"dead-letter\"]\n", `t.toml:4: notifier "ops": events: element 0 must be one of failed, dead_letter, expired, recovered, skipped, overdue, resolved; got "dead-letter"`},
	{"empty events", opsWebhook + "events = []\n", `t.toml:4: notifier "ops": events: must not be empty; leave it out for the default (dead_letter, expired, overdue, resolved)`},
	{"repeated event", opsWebhook + "events = [\"failed\", \"failed\"]\n", `t.toml:4: notifier "ops": events: element 1 repeats "failed"`},
	{"events not a list", opsWebhook + "events = \"failed\"\n", `t.toml:4: notifier "ops": events: must be a list`},
	{"http to another host", "[[notifier]]\nname = \"ops\"\nwebhook = \"http://hooks.example/x\"\n", `t.toml:3: notifier "ops": webhook: must be https:// (plain http:// is allowed only to a loopback address)`},
	{"not a URL", "[[notifier]]\nname = \"ops\"\nwebhook = \"hooks.example/x\"\n", `t.toml:3: notifier "ops": webhook: must be a URL`},
	{"other scheme", "[[notifier]]\nname = \"ops\"\nwebhook = \"ftp://hooks.example/x\"\n", `t.toml:3: notifier "ops": webhook: must be an https:// URL, not "ftp://"`},
	{"credentials in the URL", "[[notifier]]\nname = \"ops\"\nwebhook = \"https://u:pw@hooks.example/x\"\n", `t.toml:3: notifier "ops": webhook: must not hold a user or password`},
	{"relative key file", opsWebhook + "secret_file = \"ops.key\"\n", `t.toml:4: notifier "ops": secret_file: must be an absolute path, got "ops.key"`},
	{"key file on a command", "[[notifier]]\nname = \"ops\"\nshell = \"true\"\nsecret_file = \"/k\"\n", `t.toml:4: notifier "ops": secret_file: is for webhook notifiers`},
	{"user on a webhook", opsWebhook + "user = \"0\"\n", `t.toml:4: notifier "ops": user: is for command and shell notifiers`},
	{"unknown user", "[[notifier]]\nname = \"ops\"\nshell = \"true\"\nuser = \"no-such-user-here\"\n", `t.toml:4: notifier "ops": user: `},
	{"bad template", opsWebhook + "body_template = \"{{.job\"\n", `t.toml:4: notifier "ops": body_template: body_template:1: unclosed action`},
	{"template with an unknown field", opsWebhook + "body_template = \"{{.jobname}}\"\n", `t.toml:4: notifier "ops": body_template: `},
	{"zero timeout", opsWebhook + "timeout = \"0s\"\n", `t.toml:4: notifier "ops": timeout: must be positive, got 0s`},
	{"long timeout", opsWebhook + "timeout = \"1h\"\n", `t.toml:4: notifier "ops": timeout: must be at most 10m0s, got 1h0m0s`},
	{"short renotify", opsWebhook + "renotify = \"5s\"\n", `t.toml:4: notifier "ops": renotify: must be 0 (no reminders) or at least 1m, got 5s`},
	{"notifier as a table", "[notifier]\nname = \"ops\"\n", `t.toml:1: notifier: must be an array of tables: write [[notifier]], not [notifier]`},
	{"job names an unknown notifier", opsWebhook + cmdJob("notify = [\"ops\", \"pager\"]\n"), `t.toml:7: job "a": notify: element 1: no [[notifier]] named "pager"`},
	{"defaults name an unknown notifier", "[defaults]\nnotify = [\"pager\"]\n", `t.toml:2: defaults.notify: element 0: no [[notifier]] named "pager"`},
	{"notify repeats", opsWebhook + cmdJob("notify = [\"ops\", \"ops\"]\n"), `t.toml:7: job "a": notify: element 1 repeats "ops"`},
	{"notify not a list", opsWebhook + cmdJob("notify = \"ops\"\n"), `t.toml:7: job "a": notify: must be a list of notifier names`},
	{"expect_success_within in defaults", "[defaults]\nexpect_success_within = \"1h\"\n", `t.toml:2: defaults.expect_success_within: cannot be set in [defaults]; set it in each [[job]]`},
	{"expect_success_within too short", cmdJob("expect_success_within = \"30s\"\n"), `t.toml:4: job "a": expect_success_within: must be at least 1m, got 30s`},
	{"expect_success_within a number", cmdJob("expect_success_within = 26\n"), `t.toml:4: job "a": expect_success_within: a bare number (26) is not a duration`},

	// Mail notifiers.
	{"mail and webhook", opsMail + "webhook = \"https://h.example/\"\n", `t.toml:5: notifier "ops": webhook: set only one of webhook, command, shell and mail_to`},
	{"mail without smtp", "[[notifier]]\nname = \"ops\"\nmail_to = [\"ops@example.com\"]\n", `t.toml:3: notifier "ops": mail_to: needs smtp, the server that takes the mail`},
	{"smtp without mail_to", opsWebhook + "smtp = \"smtp://mail.example\"\n", `t.toml:4: notifier "ops": smtp: is for mail notifiers, which set mail_to`},
	{"smtp_insecure on a command", "[[notifier]]\nname = \"ops\"\nshell = \"true\"\nsmtp_insecure = true\n", `t.toml:4: notifier "ops": smtp_insecure: is for mail notifiers`},
	{"mail_to not a list", "[[notifier]]\nname = \"ops\"\nmail_to = \"ops@example.com\"\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: must be a list of addresses such as ["ops@example.com"], not a string`},
	{"mail_to empty", "[[notifier]]\nname = \"ops\"\nmail_to = []\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: must not be empty`},
	{"mail_to with a name", "[[notifier]]\nname = \"ops\"\nmail_to = [\"Ops <ops@example.com>\"]\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: element 0: "Ops <ops@example.com>" is not a mail address`},
	{"mail_to a local user", "[[notifier]]\nname = \"ops\"\nmail_to = [\"root\"]\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: element 0: "root" is not a mail address`},
	{"mail_to with a line end", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\\r\\nBcc: x@evil.example\"]\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: element 0: "a@example.com\r\nBcc: x@evil.example" is not a mail address`},
	{"mail_to with a comma", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com,b@example.com\"]\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: element 0: "a@example.com,b@example.com" is not a mail address`},
	{"mail_to repeats", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\", \"a@example.com\"]\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: element 1 repeats "a@example.com"`},
	{"mail_to too many", "[[notifier]]\nname = \"ops\"\nmail_to = [" + strings.Repeat(`"a@example.com", `, MaxMailTo) + "\"b@example.com\"]\nsmtp = \"smtp://m.example\"\n", `t.toml:3: notifier "ops": mail_to: has 101 addresses; at most 100 are allowed`},
	{"mail_from with a header", opsMail + "mail_from = \"a@example.com\\nBcc: x@evil.example\"\n", `t.toml:5: notifier "ops": mail_from: "a@example.com\nBcc: x@evil.example" is not a mail address`},
	{"smtp an https URL", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\"]\nsmtp = \"https://m.example\"\n", `t.toml:4: notifier "ops": smtp: must be an smtp:// or smtps:// URL, not "https://"`},
	{"smtp a bare host", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\"]\nsmtp = \"m.example:25\"\n", `t.toml:4: notifier "ops": smtp: must be a URL such as "smtp://mail.example:587"`},
	{"smtp with a password", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\"]\nsmtp = \"smtp://u:pw@m.example\"\n", `t.toml:4: notifier "ops": smtp: must not hold a user or password: set smtp_user and smtp_password_file`},
	{"smtp with a path", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\"]\nsmtp = \"smtp://m.example/x\"\n", `t.toml:4: notifier "ops": smtp: must be the server alone`},
	{"smtp with a bad port", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\"]\nsmtp = \"smtp://m.example:99999\"\n", `t.toml:4: notifier "ops": smtp: port "99999" must be a number from 1 to 65535`},
	{"smtp with a bad host", "[[notifier]]\nname = \"ops\"\nmail_to = [\"a@example.com\"]\nsmtp = \"smtp://m_x.example\"\n", `t.toml:4: notifier "ops": smtp: "m_x.example" is not a host name or IP address`},
	{"smtp_user without a password", opsMail + "smtp_user = \"u\"\n", `t.toml:5: notifier "ops": smtp_user: needs smtp_password_file`},
	{"smtp_password_file without a user", opsMail + "smtp_password_file = \"/etc/pw\"\n", `t.toml:5: notifier "ops": smtp_password_file: needs smtp_user`},
	{"relative password file", opsMail + "smtp_user = \"u\"\nsmtp_password_file = \"pw\"\n", `t.toml:6: notifier "ops": smtp_password_file: must be an absolute path, got "pw"`},
	{"smtp_user with a line end", opsMail + "smtp_user = \"u\\r\\n\"\nsmtp_password_file = \"/etc/pw\"\n", `t.toml:5: notifier "ops": smtp_user: must be at most 256 bytes of text without control characters`},
	{"smtp_insecure a string", opsMail + "smtp_insecure = \"yes\"\n", `t.toml:5: notifier "ops": smtp_insecure: must be true or false, not a string ("yes")`},
	{"secret_file on mail", opsMail + "secret_file = \"/k\"\n", `t.toml:5: notifier "ops": secret_file: is for webhook notifiers; a mail notifier writes its own message`},
	{"user on mail", opsMail + "user = \"0\"\n", `t.toml:5: notifier "ops": user: is for command and shell notifiers; mail is sent by the daemon`},
	{"mail key misspelt", opsMail + "mail_too = []\n", `t.toml:5: notifier "ops": mail_too: unknown key; did you mean mail_to?`},
}

func TestNotifierErrors(t *testing.T) {
	for _, tt := range notifierErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("t.toml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			checkErrors(t, err)
			lines := strings.Split(err.Error(), "\n")
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, tt.want) }) {
				t.Errorf("error:\n%v\nhas no line starting with\n%s", err, tt.want)
			}
		})
	}
}

// A job naming a notifier whose table has a problem is not reported too:
// the one problem is the notifier's.
func TestNotifyOfABadNotifier(t *testing.T) {
	_, err := Parse("t.toml", []byte(opsWebhook+"timeout = \"0s\"\n"+cmdJob("notify = [\"ops\"]\n")))
	if err == nil {
		t.Fatal("no error")
	}
	if list := checkErrors(t, err); len(list) != 1 {
		t.Errorf("%d problems, want the notifier's alone:\n%v", len(list), err)
	}
}

// A job name or error that holds quotes cannot break a JSON body made by
// the json function.
func TestBodyTemplateJSON(t *testing.T) {
	tmpl, err := ParseBodyTemplate(`{"text": {{json .error}}}`)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, map[string]any{"error": "a \"quoted\"\n}"}); err != nil {
		t.Fatal(err)
	}
	if want := `{"text": "a \"quoted\"\n}"}`; b.String() != want {
		t.Errorf("body %s, want %s", b.String(), want)
	}
}

func TestParseSMTP(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want SMTPServer
	}{
		{"smtp://mail.example", SMTPServer{Host: "mail.example", Port: "587"}},
		{"smtp://mail.example:25", SMTPServer{Host: "mail.example", Port: "25"}},
		{"smtp://mail.example:2525/", SMTPServer{Host: "mail.example", Port: "2525"}},
		{"smtps://mail.example", SMTPServer{Host: "mail.example", Port: "465", ImplicitTLS: true}},
		{"smtps://127.0.0.1:4650", SMTPServer{Host: "127.0.0.1", Port: "4650", ImplicitTLS: true}},
		{"smtp://[::1]:25", SMTPServer{Host: "::1", Port: "25"}},
	} {
		got, err := ParseSMTP(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSMTP(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	if got := (SMTPServer{Host: "::1", Port: "25"}).Addr(); got != "[::1]:25" {
		t.Errorf("Addr = %q", got)
	}
	for _, in := range []string{"", "smtp://", "smtp://m.example?x=1", "smtp://m.example#x", "smtp://m.example:0", "smtp://m.example:x",
		"smtp:m.example", "smtp://m%0d%0a.example", "smtp://m.example:25?"} {
		if got, err := ParseSMTP(in); err == nil {
			t.Errorf("ParseSMTP(%q) = %+v, want an error", in, got)
		}
	}
}
