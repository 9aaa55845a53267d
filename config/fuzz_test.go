package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// FuzzParseConfig checks that Parse never panics, that it returns either a
// config or *Error values naming the file, and that every job of a config
// it accepts validates.
func FuzzParseConfig(f *testing.F) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, tt := range errorTests {
		if len(tt.src) < 4096 {
			f.Add([]byte(tt.src))
		}
	}
	for _, tt := range notifierErrorTests {
		f.Add([]byte(tt.src))
	}
	for _, tt := range validSnippets {
		f.Add([]byte(tt.src))
	}
	for _, tt := range chainErrorTests {
		f.Add([]byte(tt.src))
	}
	f.Add([]byte(jobAt("a", "on_success = [\"b\"]\non_failure = [\"b\", \"c\"]\n") + jobAt("b", "on_success = [\"c\"]\n") + jobAt("c", "")))

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.toml", data)
		// The client's read of the [daemon] table alone accepts every file
		// Parse accepts, with the same daemon.
		d, derr := ParseDaemon("f.toml", data)
		switch {
		case derr == nil && d == nil, derr != nil && d != nil:
			t.Fatalf("ParseDaemon = %v, %v", d, derr)
		case err == nil && derr != nil:
			t.Fatalf("ParseDaemon refused what Parse accepted: %v", derr)
		case err == nil && !reflect.DeepEqual(*d, cfg.Daemon):
			t.Fatalf("ParseDaemon's daemon %+v, Parse's %+v", *d, cfg.Daemon)
		}
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok || len(joined.Unwrap()) == 0 {
				t.Fatalf("error %T is not a join of errors", err)
			}
			for _, e := range joined.Unwrap() {
				var ce *Error
				if !errors.As(e, &ce) || ce.File != "f.toml" || ce.Msg == "" || ce.Line < 0 {
					t.Fatalf("error %#v", e)
				}
			}
			return
		}
		names := make(map[string]bool, len(cfg.Jobs))
		for _, d := range cfg.Jobs {
			if err := d.Validate(); err != nil {
				t.Fatalf("job %q does not validate: %v", d.Name, err)
			}
			if names[d.Name] {
				t.Fatalf("job name %q twice", d.Name)
			}
			names[d.Name] = true
			// Timeout 0 is "none".
			if d.Timeout < 0 || d.KillGrace <= 0 || d.MisfireGrace <= 0 || d.CatchupWindow <= 0 || d.CatchupMax < 1 ||
				d.OutputLimit < MinOutputLimit || d.OutputLimit > MaxOutputLimit || d.Overlap == "" || d.Catchup == "" ||
				d.Jitter < 0 {
				t.Fatalf("job %q has settings out of range: %+v", d.Name, d)
			}
			checkTickWindows(t, d)
		}
		checkChainGraph(t, cfg.Jobs, names)
		for _, n := range cfg.Notifiers {
			checkNotifierKind(t, n)
		}
		dm := cfg.Daemon
		if dm.Concurrency < 1 || dm.Concurrency > MaxConcurrency || dm.HeartbeatInterval <= 0 ||
			dm.InactiveThreshold-dm.HeartbeatInterval <= dm.HeartbeatInterval || dm.History < MinHistory ||
			!filepath.IsAbs(dm.StateDir) || !filepath.IsAbs(dm.Socket) {
			t.Fatalf("daemon settings out of range: %+v", dm)
		}
	})
}

// checkTickWindows checks that the ticks a cron job fires (those of its
// life) get runs whose window can open, starting at the tick or up to
// jitter after it: a few ticks from a fixed time, and a few before the
// job's not_after, where a delayed start may not fit.
func checkTickWindows(t *testing.T, d *jobs.Definition) {
	if d.Schedule == nil {
		return
	}
	froms := []time.Time{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if !d.NotAfter.IsZero() {
		froms = append(froms, d.NotAfter.Add(-d.Jitter-time.Minute))
	}
	for _, from := range froms {
		for tick, i := d.Schedule.Next(from), 0; i < 3 && !tick.IsZero(); tick, i = d.Schedule.Next(tick), i+1 {
			if !d.InLife(tick) {
				continue
			}
			nb, na := d.Window(jobs.TriggerSchedule, tick)
			if err := jobs.ValidateWindow(nb, na); err != nil {
				t.Fatalf("job %q: the run of its tick %s has the window %s..%s: %v", d.Name, tick, nb, na, err)
			}
			if start := d.TickStart(tick); start.Before(tick) || (d.Jitter > 0 && !start.Before(tick.Add(d.Jitter))) {
				t.Fatalf("job %q: tick %s starts at %s, outside [tick, tick+%s)", d.Name, tick, start, d.Jitter)
			}
		}
	}
}

// checkChainGraph checks that the chains of an accepted config name only
// its jobs and never lead back to a job: a walk of at most len(defs) steps
// from each job ends.
func checkChainGraph(t *testing.T, defs []*jobs.Definition, names map[string]bool) {
	next := make(map[string][]string, len(defs))
	for _, d := range defs {
		for _, n := range slices.Concat(d.OnSuccess, d.OnFailure) {
			if !names[n] {
				t.Fatalf("job %q chains to %q, which is no job", d.Name, n)
			}
			next[d.Name] = append(next[d.Name], n)
		}
	}
	for _, d := range defs {
		level := []string{d.Name}
		for step := 0; len(level) > 0; step++ {
			if step > len(defs) {
				t.Fatalf("the chain from job %q does not end", d.Name)
			}
			var more []string
			for _, n := range level {
				more = append(more, next[n]...)
			}
			level = slices.Compact(slices.Sorted(slices.Values(more)))
		}
	}
}

// checkNotifierKind checks that a notifier Parse accepts is of one kind,
// and a mail notifier's keys are whole: addresses that cannot end a
// header line, and a server ParseSMTP reads.
func checkNotifierKind(t *testing.T, n Notifier) {
	kinds := 0
	for _, set := range []bool{n.Webhook != "", n.Command != nil, n.Shell != "", n.MailTo != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 || n.Timeout <= 0 || len(n.Events) == 0 {
		t.Fatalf("notifier %+v", n)
	}
	if n.MailTo == nil {
		if n.SMTP != "" || n.MailFrom != "" || n.SMTPUser != "" || n.SMTPPasswordFile != "" || n.SMTPInsecure {
			t.Fatalf("notifier %q has mail keys but no mail_to: %+v", n.Name, n)
		}
		return
	}
	if _, err := ParseSMTP(n.SMTP); err != nil {
		t.Fatalf("notifier %q: smtp %q: %v", n.Name, n.SMTP, err)
	}
	if (n.SMTPUser == "") != (n.SMTPPasswordFile == "") {
		t.Fatalf("notifier %q: smtp_user %q without smtp_password_file %q, or the other way", n.Name, n.SMTPUser, n.SMTPPasswordFile)
	}
	for _, a := range append(slices.Clone(n.MailTo), n.MailFrom) {
		if strings.ContainsAny(a, "\r\n\x00,<>\" ") {
			t.Fatalf("notifier %q: address %q", n.Name, a)
		}
	}
}
