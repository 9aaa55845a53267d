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

func TestNotifierErrors(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"no name", "[[notifier]]\nwebhook = \"https://h.example/\"\n", `t.toml:1: notifier[0].name: is required`},
		{"bad name", "[[notifier]]\nname = \"a b\"\nwebhook = \"https://h.example/\"\n", `t.toml:2: notifier[0].name: "a b" is not a valid notifier name`},
		{"duplicate name", opsWebhook + opsWebhook, `t.toml:5: notifier "ops": name: duplicate notifier name; the first notifier named "ops" is at line 2`},
		{"no target", "[[notifier]]\nname = \"ops\"\n", `t.toml:1: notifier "ops": webhook: is required`},
		{"two targets", opsWebhook + "shell = \"true\"\n", `t.toml:4: notifier "ops": shell: set only one of webhook, command and shell`},
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
	} {
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
