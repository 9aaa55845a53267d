package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/jobs"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Parse("t.toml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func jobNamed(t *testing.T, cfg *Config, name string) *jobs.Definition {
	t.Helper()
	for _, d := range cfg.Jobs {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no job %q", name)
	return nil
}

func TestParseFull(t *testing.T) {
	cfg, err := Load("testdata/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Path != "testdata/full.toml" {
		t.Errorf("Path = %q", cfg.Path)
	}

	wantDaemon := Daemon{
		NodeID:            "node-a.example",
		Store:             "sqlite:schedulerd.db",
		StateDir:          "/var/lib/schedulerd",
		Socket:            "/run/schedulerd/schedulerd.sock",
		SocketGroup:       "root",
		Concurrency:       8,
		HeartbeatInterval: 15 * time.Second,
		InactiveThreshold: time.Minute,
		ShutdownGrace:     45 * time.Second,
		History:           2160 * time.Hour,
		HealthListen:      "127.0.0.1:9464",
		APIListen:         "127.0.0.1:8080",
		APITLSCert:        testdataAbs(t, "tls/api.crt"),
		APITLSKey:         testdataAbs(t, "tls/api.key"),
		LogFormat:         "json",
		LogLevel:          "debug",
	}
	if cfg.Daemon != wantDaemon {
		t.Errorf("Daemon =\n %+v, want\n %+v", cfg.Daemon, wantDaemon)
	}
	wantTokens := []Token{
		{Name: "ci", Role: "operate", SHA256: mustHex(t, "6f1ed002ab5595859014ebf0951522d9e0b3c3d2c4e1c0b9d0f8a6b3f4e1c2a0")},
		{Name: "grafana", Role: "read", SHA256: mustHex(t, "a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2")},
	}
	if !slices.Equal(cfg.Tokens, wantTokens) {
		t.Errorf("Tokens =\n %+v, want\n %+v", cfg.Tokens, wantTokens)
	}
	if got := cfg.Daemon.StorePath(); got != "/var/lib/schedulerd/schedulerd.db" {
		t.Errorf("StorePath = %q", got)
	}

	var names []string
	for _, d := range cfg.Jobs {
		names = append(names, d.Name)
		if err := d.Validate(); err != nil {
			t.Errorf("job %q: %v", d.Name, err)
		}
	}
	if want := []string{"backup", "compress-logs", "year-end-report", "reindex"}; !slices.Equal(names, want) {
		t.Fatalf("jobs = %v, want %v (file order)", names, want)
	}

	ny, berlin := mustZone(t, "America/New_York"), mustZone(t, "Europe/Berlin")

	backup := jobNamed(t, cfg, "backup")
	if backup.Schedule == nil || backup.Schedule.String() != "0 3 * * *" {
		t.Errorf("backup schedule = %v", backup.Schedule)
	}
	// The schedule follows the job's zone: 03:00 in New York.
	from := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	if got, want := backup.Schedule.Next(from), time.Date(2026, 6, 2, 3, 0, 0, 0, ny); !got.Equal(want) {
		t.Errorf("backup next = %v, want %v", got, want)
	}
	if !slices.Equal(backup.Command, []string{"/usr/local/bin/backup", "--full"}) || backup.Shell != "" {
		t.Errorf("backup command = %q shell = %q", backup.Command, backup.Shell)
	}
	// A local datetime is read in the job's zone; one with an offset is absolute.
	if want := time.Date(2026, 3, 1, 0, 0, 0, 0, ny); !backup.NotBefore.Equal(want) {
		t.Errorf("backup not_before = %v, want %v", backup.NotBefore, want)
	}
	if want := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC); !backup.NotAfter.Equal(want) {
		t.Errorf("backup not_after = %v, want %v", backup.NotAfter, want)
	}
	// env merges key by key, the job's keys winning.
	wantEnv := map[string]string{"LANG": "C.UTF-8", "TEAM": "storage", "BACKUP_TARGET": "s3://bucket"}
	if !equalMaps(backup.Env, wantEnv) {
		t.Errorf("backup env = %v, want %v", backup.Env, wantEnv)
	}
	// retry merges field by field: job, then defaults.
	wantRetry := jobs.RetryPolicy{MaxAttempts: 5, Backoff: jobs.BackoffExponential, InitialDelay: 2 * time.Second, MaxDelay: 10 * time.Minute, Jitter: true}
	if backup.Retry != wantRetry {
		t.Errorf("backup retry = %+v, want %+v", backup.Retry, wantRetry)
	}
	checkSettings(t, backup, settingsWant{
		workdir: "/var/tmp", user: "nobody", timeout: 2 * time.Hour, killGrace: 30 * time.Second,
		misfireGrace: 2 * time.Minute, overlap: jobs.OverlapQueue, catchup: jobs.CatchupAll,
		catchupWindow: 12 * time.Hour, catchupMax: 10, startDeadline: time.Hour, jitter: 5 * time.Minute, maxConcurrency: 1,
		noRetry: []int{2, 3}, outputLimit: 32768,
	})

	logs := jobNamed(t, cfg, "compress-logs")
	if logs.Schedule == nil || logs.Schedule.String() != "@every 10m" || logs.Kind() != "cron" {
		t.Errorf("compress-logs schedule = %v", logs.Schedule)
	}
	if logs.Shell == "" || logs.Command != nil {
		t.Errorf("compress-logs shell = %q command = %q", logs.Shell, logs.Command)
	}
	// Everything else comes from [defaults].
	checkSettings(t, logs, settingsWant{
		workdir: "/tmp", user: "nobody", timeout: 30 * time.Minute, killGrace: 20 * time.Second,
		misfireGrace: 30 * time.Second, overlap: jobs.OverlapSkip, catchup: jobs.CatchupNone,
		catchupWindow: 12 * time.Hour, catchupMax: 10, startDeadline: time.Hour, jitter: 30 * time.Second, maxConcurrency: 2,
		noRetry: []int{64}, outputLimit: 32768,
	})
	if want := (map[string]string{"LANG": "C.UTF-8", "TEAM": "ops"}); !equalMaps(logs.Env, want) {
		t.Errorf("compress-logs env = %v, want %v", logs.Env, want)
	}
	wantRetry = jobs.RetryPolicy{MaxAttempts: 4, Backoff: jobs.BackoffExponential, InitialDelay: 10 * time.Second, MaxDelay: 10 * time.Minute, Jitter: true}
	if logs.Retry != wantRetry {
		t.Errorf("compress-logs retry = %+v, want %+v", logs.Retry, wantRetry)
	}

	report := jobNamed(t, cfg, "year-end-report")
	if report.Kind() != "once" || report.Schedule != nil {
		t.Errorf("year-end-report kind = %s", report.Kind())
	}
	// Local datetime in the zone of [defaults]: 23:00 in Berlin is 22:00 UTC.
	if want := time.Date(2026, 12, 31, 23, 0, 0, 0, berlin); !report.At.Equal(want) || !report.At.Equal(time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC)) {
		t.Errorf("year-end-report at = %v, want %v", report.At, want)
	}
	wantRetry = jobs.RetryPolicy{MaxAttempts: 4, Backoff: jobs.BackoffFixed, InitialDelay: 10 * time.Second, MaxDelay: 0, Jitter: false}
	if report.Retry != wantRetry {
		t.Errorf("year-end-report retry = %+v, want %+v", report.Retry, wantRetry)
	}
	if report.OutputLimit != 1<<20 {
		t.Errorf("year-end-report output_limit = %d", report.OutputLimit)
	}

	reindex := jobNamed(t, cfg, "reindex")
	if reindex.Kind() != "trigger" || reindex.User != "root" || reindex.CatchupWindow != time.Hour || reindex.CatchupMax != 1 || reindex.StartDeadline != 5*time.Minute {
		t.Errorf("reindex = %+v", reindex)
	}
}

// testdataAbs is the absolute path of name in testdata.
func testdataAbs(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustHex(t *testing.T, s string) [32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q", s)
	}
	return [32]byte(b)
}

type settingsWant struct {
	workdir, user                                                          string
	timeout, killGrace, misfireGrace, catchupWindow, startDeadline, jitter time.Duration
	overlap                                                                jobs.Overlap
	catchup                                                                jobs.Catchup
	catchupMax, maxConcurrency, outputLimit                                int
	noRetry                                                                []int
}

func checkSettings(t *testing.T, d *jobs.Definition, w settingsWant) {
	t.Helper()
	got := settingsWant{
		workdir: d.Workdir, user: d.User, timeout: d.Timeout, killGrace: d.KillGrace,
		misfireGrace: d.MisfireGrace, catchupWindow: d.CatchupWindow, startDeadline: d.StartDeadline, jitter: d.Jitter,
		overlap: d.Overlap, catchup: d.Catchup, catchupMax: d.CatchupMax,
		maxConcurrency: d.MaxConcurrency, outputLimit: d.OutputLimit, noRetry: d.NoRetryExitCodes,
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("job %q settings =\n %+v, want\n %+v", d.Name, got, w)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestProductDefaults(t *testing.T) {
	cfg := mustParse(t, `
[[job]]
name = "plain"
command = ["/bin/true"]
`)
	d := cfg.Jobs[0]
	if d.Retry != jobs.DefaultRetry {
		t.Errorf("retry = %+v, want %+v", d.Retry, jobs.DefaultRetry)
	}
	checkSettings(t, d, settingsWant{
		timeout: jobs.DefaultTimeout, killGrace: jobs.DefaultKillGrace, misfireGrace: jobs.DefaultMisfireGrace,
		overlap: jobs.DefaultOverlap, catchup: jobs.DefaultCatchup, catchupWindow: jobs.DefaultCatchupWindow,
		catchupMax: jobs.DefaultCatchupMax, outputLimit: jobs.DefaultOutputLimit,
	})
	if d.Env != nil || d.Kind() != "trigger" {
		t.Errorf("env = %v, kind = %s", d.Env, d.Kind())
	}
}

// TestNone: timeout and start_deadline take "none", which lifts the bound
// that [defaults] or the product default would give a job; a job that
// leaves them out keeps the defaults'.
func TestNone(t *testing.T) {
	cfg := mustParse(t, `
[defaults]
timeout = "2h"
start_deadline = "30m"

[[job]]
name = "unbounded"
schedule = "@daily"
shell = "true"
timeout = "none"
start_deadline = "none"

[[job]]
name = "bounded"
schedule = "@daily"
shell = "true"

[[job]]
name = "plain-none"
shell = "true"
timeout = "none"
`)
	for _, c := range []struct {
		job               string
		timeout, deadline time.Duration
	}{
		{"unbounded", 0, 0},
		{"bounded", 2 * time.Hour, 30 * time.Minute},
		{"plain-none", 0, 30 * time.Minute},
	} {
		d := jobNamed(t, cfg, c.job)
		if d.Timeout != c.timeout || d.StartDeadline != c.deadline {
			t.Errorf("%s: timeout %s, start_deadline %s; want %s, %s", c.job, d.Timeout, d.StartDeadline, c.timeout, c.deadline)
		}
	}
	// Without [defaults], "none" lifts the product's default timeout.
	cfg = mustParse(t, "[[job]]\nname = \"a\"\nshell = \"true\"\ntimeout = \"none\"\n")
	if d := cfg.Jobs[0]; d.Timeout != 0 {
		t.Errorf("timeout = none without defaults: %s, want 0 (none; the product default is %s)", d.Timeout, jobs.DefaultTimeout)
	}
}

// TestJitter: jitter is a job setting that [defaults] may give; "0s" takes
// it away from one job, and a job's jitter may be longer than its
// schedule's interval (the delay of each tick is bounded by the next tick).
func TestJitter(t *testing.T) {
	cfg := mustParse(t, `
[defaults]
jitter = "5m"
start_deadline = "10m"

[[job]]
name = "inherits"
schedule = "@hourly"
shell = "true"

[[job]]
name = "own"
schedule = "*/5 * * * *"
shell = "true"
jitter = "1h"
start_deadline = "2h"

[[job]]
name = "none"
schedule = "@hourly"
shell = "true"
jitter = "0s"

[[job]]
name = "plain"
schedule = "@hourly"
shell = "true"
start_deadline = "none"
`)
	for _, c := range []struct {
		job              string
		jitter, deadline time.Duration
	}{
		{"inherits", 5 * time.Minute, 10 * time.Minute},
		{"own", time.Hour, 2 * time.Hour},
		{"none", 0, 10 * time.Minute},
		{"plain", 5 * time.Minute, 0},
	} {
		d := jobNamed(t, cfg, c.job)
		if d.Jitter != c.jitter || d.StartDeadline != c.deadline {
			t.Errorf("%s: jitter %s, start_deadline %s; want %s, %s", c.job, d.Jitter, d.StartDeadline, c.jitter, c.deadline)
		}
	}
	if d := mustParse(t, cmdJob("schedule = \"@hourly\"\n")).Jobs[0]; d.Jitter != 0 {
		t.Errorf("jitter without the key: %s, want 0 (none)", d.Jitter)
	}
}

func TestDefaultsMerge(t *testing.T) {
	cfg := mustParse(t, `
[defaults]
retry = { max_attempts = 7, jitter = false }
no_retry_exit_codes = [3, 4]
env = { A = "defaults", B = "defaults" }
timezone = "Asia/Kolkata"

[[job]]
name = "override"
shell = "true"
retry = { backoff = "fixed", initial_delay = "0s" }
no_retry_exit_codes = []
env = { B = "job", C = "job" }
timezone = "UTC"

[[job]]
name = "inherit"
shell = "true"

[[job]]
name = "dotted"
shell = "true"
retry.max_attempts = 2
env.A = "dotted"
`)
	override := jobNamed(t, cfg, "override")
	want := jobs.RetryPolicy{MaxAttempts: 7, Backoff: jobs.BackoffFixed, InitialDelay: 0, MaxDelay: jobs.DefaultRetry.MaxDelay, Jitter: false}
	if override.Retry != want {
		t.Errorf("override retry = %+v, want %+v", override.Retry, want)
	}
	if len(override.NoRetryExitCodes) != 0 {
		t.Errorf("override no_retry_exit_codes = %v, want the job's empty list", override.NoRetryExitCodes)
	}
	if w := (map[string]string{"A": "defaults", "B": "job", "C": "job"}); !equalMaps(override.Env, w) {
		t.Errorf("override env = %v, want %v", override.Env, w)
	}

	inherit := jobNamed(t, cfg, "inherit")
	want = jobs.RetryPolicy{MaxAttempts: 7, Backoff: jobs.DefaultRetry.Backoff, InitialDelay: jobs.DefaultRetry.InitialDelay, MaxDelay: jobs.DefaultRetry.MaxDelay, Jitter: false}
	if inherit.Retry != want {
		t.Errorf("inherit retry = %+v, want %+v", inherit.Retry, want)
	}
	if !slices.Equal(inherit.NoRetryExitCodes, []int{3, 4}) {
		t.Errorf("inherit no_retry_exit_codes = %v", inherit.NoRetryExitCodes)
	}
	// Jobs do not share the defaults' slices and maps.
	inherit.NoRetryExitCodes[0] = 99
	inherit.Env["A"] = "changed"
	dotted := jobNamed(t, cfg, "dotted")
	if dotted.NoRetryExitCodes[0] != 3 {
		t.Errorf("no_retry_exit_codes is shared between jobs")
	}
	if w := (map[string]string{"A": "dotted", "B": "defaults"}); !equalMaps(dotted.Env, w) {
		t.Errorf("dotted env = %v, want %v", dotted.Env, w)
	}
	if dotted.Retry.MaxAttempts != 2 || dotted.Retry.Jitter {
		t.Errorf("dotted retry = %+v", dotted.Retry)
	}
}

func TestDatetimes(t *testing.T) {
	berlin, kolkata := mustZone(t, "Europe/Berlin"), mustZone(t, "Asia/Kolkata")
	tests := []struct {
		name, zone, value string
		want              time.Time
	}{
		{"local in zone", "Europe/Berlin", "2026-07-01T09:30:00", time.Date(2026, 7, 1, 9, 30, 0, 0, berlin)},
		{"local in half-hour zone", "Asia/Kolkata", "2026-07-01T09:30:00", time.Date(2026, 7, 1, 4, 0, 0, 0, time.UTC)},
		{"local without seconds", "Asia/Kolkata", "2026-07-01T09:30", time.Date(2026, 7, 1, 9, 30, 0, 0, kolkata)},
		{"local with fraction", "UTC", "2026-07-01T09:30:00.25", time.Date(2026, 7, 1, 9, 30, 0, 250e6, time.UTC)},
		// 02:30 does not exist in Berlin on 2026-03-29: it is read as 03:30 CEST.
		{"local in spring-forward gap", "Europe/Berlin", "2026-03-29T02:30:00", time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},
		// 02:30 happens twice in Berlin on 2026-10-25: the first one (CEST) is meant.
		{"local in fall-back hour", "Europe/Berlin", "2026-10-25T02:30:00", time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)},
		{"local just after fall-back hour", "Europe/Berlin", "2026-10-25T03:00:00", time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC)},
		// Lord Howe moves its clocks by 30 minutes: 01:45 happens at +11 and then at +10:30.
		{"local in half-hour fall-back", "Australia/Lord_Howe", "2026-04-05T01:45:00", time.Date(2026, 4, 4, 14, 45, 0, 0, time.UTC)},
		{"local in half-hour gap", "Australia/Lord_Howe", "2026-10-04T02:15:00", time.Date(2026, 10, 3, 15, 45, 0, 0, time.UTC)},
		{"local in a zone whose midnight is skipped", "America/Santiago", "2026-09-06T00:30:00", time.Date(2026, 9, 6, 4, 30, 0, 0, time.UTC)},
		{"offset is absolute", "Europe/Berlin", "2026-07-01T09:30:00+05:30", time.Date(2026, 7, 1, 4, 0, 0, 0, time.UTC)},
		{"Z is absolute", "Asia/Kolkata", "2026-07-01T09:30:00Z", time.Date(2026, 7, 1, 9, 30, 0, 0, time.UTC)},
		{"space separator", "UTC", "2026-07-01 09:30:00", time.Date(2026, 7, 1, 9, 30, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, "[[job]]\nname = \"j\"\nshell = \"true\"\ntimezone = \""+tt.zone+"\"\nat = "+tt.value+"\nnot_before = "+tt.value+"\n")
			d := cfg.Jobs[0]
			if !d.At.Equal(tt.want) || !d.NotBefore.Equal(tt.want) {
				t.Errorf("at = %v, not_before = %v, want %v", d.At, d.NotBefore, tt.want)
			}
		})
	}
}

func TestDaemonDefaults(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || !namePattern.MatchString(host) {
		t.Skipf("hostname %q is not a valid node id", host)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no environment", func(t *testing.T) {
		t.Setenv("STATE_DIRECTORY", "")
		t.Setenv("RUNTIME_DIRECTORY", "")
		d := mustParse(t, "").Daemon
		want := Daemon{
			NodeID:            host,
			StateDir:          filepath.Join(wd, "var"),
			Socket:            filepath.Join(wd, "var", "schedulerd.sock"),
			Concurrency:       min(runtime.NumCPU(), MaxConcurrency),
			HeartbeatInterval: 30 * time.Second,
			InactiveThreshold: 2 * time.Minute,
			ShutdownGrace:     30 * time.Second,
			History:           720 * time.Hour,
			LogFormat:         "text",
			LogLevel:          "info",
		}
		if len(want.Socket) > maxSocketPath {
			t.Skip("working directory too deep for a socket path")
		}
		if d != want {
			t.Errorf("Daemon =\n %+v, want\n %+v", d, want)
		}
		if d.StorePath() != filepath.Join(wd, "var", "schedulerd.db") || d.IsPostgres() {
			t.Errorf("StorePath = %q", d.StorePath())
		}
	})

	t.Run("systemd directories", func(t *testing.T) {
		t.Setenv("STATE_DIRECTORY", "/var/lib/schedulerd:/var/lib/other")
		t.Setenv("RUNTIME_DIRECTORY", "/run/schedulerd")
		d := mustParse(t, "[daemon]\nconcurrency = 0\nnode_id = \"\"\n").Daemon
		if d.StateDir != "/var/lib/schedulerd" || d.Socket != "/run/schedulerd/schedulerd.sock" {
			t.Errorf("StateDir = %q, Socket = %q", d.StateDir, d.Socket)
		}
		if d.Concurrency != min(runtime.NumCPU(), MaxConcurrency) || d.NodeID != host {
			t.Errorf("Concurrency = %d, NodeID = %q", d.Concurrency, d.NodeID)
		}
	})

	t.Run("config wins", func(t *testing.T) {
		t.Setenv("STATE_DIRECTORY", "/var/lib/schedulerd")
		t.Setenv("RUNTIME_DIRECTORY", "/run/schedulerd")
		d := mustParse(t, "[daemon]\nstate_dir = \"state\"\nsocket = \"/tmp/s.sock\"\n").Daemon
		if d.StateDir != filepath.Join(wd, "state") || d.Socket != "/tmp/s.sock" {
			t.Errorf("StateDir = %q, Socket = %q", d.StateDir, d.Socket)
		}
	})

	t.Run("socket in state_dir", func(t *testing.T) {
		t.Setenv("RUNTIME_DIRECTORY", "")
		d := mustParse(t, "[daemon]\nstate_dir = \"/srv/sd\"\n").Daemon
		if d.Socket != "/srv/sd/schedulerd.sock" {
			t.Errorf("Socket = %q", d.Socket)
		}
	})
}

func TestStore(t *testing.T) {
	tests := []struct {
		store    string
		postgres bool
		path     string
	}{
		{"", false, "/state/schedulerd.db"},
		{"postgres://u:p@db.example/sd?sslmode=disable", true, ""},
		{"postgresql://db.example/sd", true, ""},
		{"POSTGRES://db.example/sd", true, ""},
		{"postgres:///sd?host=/run/postgresql", true, ""},
		{"sqlite:/data/sd.db", false, "/data/sd.db"},
		{"sqlite:///data/sd.db", false, "/data/sd.db"},
		{"sqlite:sd.db", false, "/state/sd.db"},
		{"/data/sd.db", false, "/data/sd.db"},
		{"sub/sd.db", false, "/state/sub/sd.db"},
	}
	for _, tt := range tests {
		t.Run(tt.store, func(t *testing.T) {
			cfg := mustParse(t, "[daemon]\nstate_dir = \"/state\"\nstore = \""+tt.store+"\"\n")
			d := cfg.Daemon
			if d.Store != tt.store || d.IsPostgres() != tt.postgres || d.StorePath() != tt.path {
				t.Errorf("Store = %q, IsPostgres = %v, StorePath = %q; want %v, %q", d.Store, d.IsPostgres(), d.StorePath(), tt.postgres, tt.path)
			}
		})
	}
}

// job is a valid job on lines 1-3; extra starts on line 4.
func job(extra string) string {
	return "[[job]]\nname = \"a\"\nshell = \"true\"\n" + extra
}

// cmdJob is a valid command job on lines 1-3; extra starts on line 4.
func cmdJob(extra string) string {
	return "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n" + extra
}

// errorTests are config snippets with one problem (or a few) each. want is
// the start of one line of the error; also are substrings of the error.
var errorTests = []struct {
	name string
	src  string
	want string
	also []string
}{
	// Unknown keys.
	{"unknown top-level key", "foo = 1\n", `t.toml:1: foo: unknown key`, nil},
	{"unknown top-level table", "[jobs]\nname = \"a\"\n", `t.toml:1: jobs: unknown key; did you mean job?`, nil},
	{"job as a table", "[job]\nname = \"a\"\n", `t.toml:1: job: must be an array of tables: write [[job]], not [job]`, nil},
	{"daemon not a table", "daemon = 1\n", `t.toml:1: daemon: must be a table such as [daemon]`, nil},
	{"unknown daemon key", "[daemon]\nnode_idd = \"x\"\n", `t.toml:2: daemon.node_idd: unknown key; did you mean node_id?`, nil},
	{"job key in daemon", "[daemon]\n\ntimeout = \"1h\"\n", `t.toml:3: daemon.timeout: unknown key in [daemon]; timeout is a job setting`, nil},
	{"unknown job key", job("timout = \"1h\"\n"), `t.toml:4: job "a": timout: unknown key; did you mean timeout?`, nil},
	{"unknown quoted job key", job("\"time out\" = \"1h\"\n"), `t.toml:4: job "a": "time out": unknown key`, nil},
	{"daemon key in job", job("concurrency = 2\n"), `t.toml:4: job "a": concurrency: unknown key in [[job]]; concurrency is a [daemon] setting`, nil},
	{"unknown retry key", job("retry = { max_attempts = 2, backof = \"fixed\" }\n"), `t.toml:4: job "a": retry.backof: unknown key; did you mean backoff?`, nil},
	{"unknown retry key in sub-table", job("[job.retry]\nmax_attempts = 2\n\nbackof = \"fixed\"\n"), `t.toml:7: job "a": retry.backof: unknown key`, nil},
	{"unknown retry key on a later line of a multi-line inline table", job("retry = {\n  max_attempts = 2,\n  tries = 3,\n}\n"), `t.toml:6: job "a": retry.tries: unknown key`, nil},
	{"unknown retry key in defaults", "[defaults]\nretry = { jiter = true }\n", `t.toml:2: defaults.retry.jiter: unknown key; did you mean jitter?`, nil},
	{"job-only key in defaults", "[defaults]\nname = \"x\"\n", `t.toml:2: defaults.name: cannot be set in [defaults]; set it in each [[job]]`, nil},
	{"schedule in defaults", "[defaults]\nschedule = \"@daily\"\n", `t.toml:2: defaults.schedule: cannot be set in [defaults]`, nil},

	// Names.
	{"duplicate job names", job("[[job]]\nname = \"b\"\nshell = \"x\"\n[[job]]\nname = \"a\"\nshell = \"y\"\n"),
		`t.toml:8: job "a": name: duplicate job name; the first job named "a" is at line 2`, nil},
	{"missing name", "[[job]]\nshell = \"true\"\n", `t.toml:1: job[0].name: is required`, nil},
	{"missing name of a later job", job("\n[[job]]\nshell = \"true\"\n"), `t.toml:5: job[1].name: is required`, nil},
	{"bad job name", "[[job]]\nname = \"-bad\"\nshell = \"true\"\n", `t.toml:2: job[0].name: "-bad" is not a valid job name`, nil},
	{"job name with a space", "[[job]]\nname = \"a b\"\nshell = \"true\"\n", `t.toml:2: job[0].name: "a b" is not a valid job name`, nil},
	{"job name too long", "[[job]]\nname = \"" + strings.Repeat("x", 129) + "\"\nshell = \"true\"\n", `t.toml:2: job[0].name: "xxx`, []string{"is not a valid job name"}},
	{"empty job name", "[[job]]\nname = \"\"\nshell = \"true\"\n", `t.toml:2: job[0].name: must not be empty`, nil},
	{"job name not a string", "[[job]]\nname = 5\nshell = \"true\"\n", `t.toml:2: job[0].name: must be a string, not an integer (5)`, nil},
	{"job element not a table", "job = [1]\n", `t.toml:1: job[0]: must be a table, not an integer (1)`, nil},
	{"job after an element not a table", "job = [\n  1,\n  { shell = \"true\" },\n]\n", `t.toml:3: job[1].name: is required`, []string{"t.toml:2: job[0]: must be a table"}},

	// Wrong types.
	{"concurrency as a string", "[daemon]\nconcurrency = \"4\"\n", `t.toml:2: daemon.concurrency: must be an integer, written without quotes; got a string ("4")`, nil},
	{"concurrency as a float", "[daemon]\nconcurrency = 4.5\n", `t.toml:2: daemon.concurrency: must be an integer, not a float (4.5)`, nil},
	{"command as a string", "[[job]]\nname = \"a\"\ncommand = \"ls\"\n", `t.toml:3: job "a": command: must be a list such as ["/usr/local/bin/backup", "--full"]; for a shell command line use shell`, nil},
	{"command element not a string", "[[job]]\nname = \"a\"\ncommand = [\"/bin/x\", 1]\n", `t.toml:3: job "a": command: element 1 must be a string, not an integer (1)`, nil},
	{"shell as a list", "[[job]]\nname = \"a\"\nshell = [\"ls\"]\n", `t.toml:3: job "a": shell: must be a string (a command line for /bin/sh -c); for a list of arguments use command`, nil},
	{"env as a string", job("env = \"A=B\"\n"), `t.toml:4: job "a": env: must be a table such as { NAME = "value" }, not a string ("A=B")`, nil},
	{"env value not a string", job("env = { A = 1 }\n"), `t.toml:4: job "a": env.A: must be a string, not an integer (1)`, nil},
	{"retry as an integer", job("retry = 3\n"), `t.toml:4: job "a": retry: must be a table such as { max_attempts = 5, backoff = "exponential" }, not an integer (3)`, nil},
	{"jitter as a string", job("retry = { jitter = \"yes\" }\n"), `t.toml:4: job "a": retry.jitter: must be true or false, not a string ("yes")`, nil},
	{"no_retry_exit_codes as an integer", job("no_retry_exit_codes = 2\n"), `t.toml:4: job "a": no_retry_exit_codes: must be a list of exit codes such as [2, 3], not an integer (2)`, nil},
	{"timezone as an integer", job("timezone = 1\n"), `t.toml:4: job "a": timezone: must be a string, not an integer (1)`, nil},
	{"overlap as a boolean", job("overlap = true\n"), `t.toml:4: job "a": overlap: must be a string, not a boolean (true)`, nil},
	{"at as a string", job("at = \"2026-01-01T00:00:00Z\"\n"), `t.toml:4: job "a": at: must be a TOML datetime written without quotes, such as 2026-12-31T23:00:00Z`, nil},
	{"at as a local date", job("at = 2026-01-01\n"), `t.toml:4: job "a": at: must be a date and a time, such as 2026-01-01T00:00:00; got only a date`, nil},
	{"not_before as a local time", job("not_before = 09:30:00\n"), `t.toml:4: job "a": not_before: must be a date and a time, such as 2026-12-31T09:30:00; got only a time of day`, nil},
	{"not_after as an integer", job("not_after = 20260101\n"), `t.toml:4: job "a": not_after: must be a datetime such as 2026-12-31T23:00:00Z, not an integer (20260101)`, nil},
	{"output_limit as a string", job("output_limit = \"64KiB\"\n"), `t.toml:4: job "a": output_limit: must be an integer, written without quotes`, nil},

	// Durations.
	{"bare integer duration", job("timeout = 30\n"), `t.toml:4: job "a": timeout: a bare number (30) is not a duration; use a string such as "90s"`, nil},
	{"float duration", job("kill_grace = 1.5\n"), `t.toml:4: job "a": kill_grace: a bare number (1.5) is not a duration; use a string such as "90s"`, nil},
	{"bare integer daemon duration", "[daemon]\nheartbeat_interval = 30\n", `t.toml:2: daemon.heartbeat_interval: a bare number (30) is not a duration`, nil},
	{"bare integer retry duration", job("retry = { initial_delay = 5 }\n"), `t.toml:4: job "a": retry.initial_delay: a bare number (5) is not a duration`, nil},
	{"duration without unit", job("timeout = \"30\"\n"), `t.toml:4: job "a": timeout: "30" is not a duration; use a number with a unit such as "90s" or "2h"`, nil},
	{"duration in words", job("timeout = \"5 minutes\"\n"), `t.toml:4: job "a": timeout: "5 minutes" is not a duration; use a number with a unit such as "90s" or "2h", or "none"`, nil},
	{"kill_grace none", job("kill_grace = \"none\"\n"), `t.toml:4: job "a": kill_grace: "none" is not a duration; use a number with a unit such as "90s" or "2h"`, nil},
	{"timeout None", job("timeout = \"None\"\n"), `t.toml:4: job "a": timeout: "None" is not a duration`, nil},
	{"duration as a boolean", job("timeout = false\n"), `t.toml:4: job "a": timeout: must be a duration string such as "90s", not a boolean (false)`, nil},
	{"negative timeout", job("timeout = \"-5s\"\n"), `t.toml:4: job "a": timeout: must be positive, or "none", got -5s`, nil},
	{"zero timeout", job("timeout = \"0s\"\n"), `t.toml:4: job "a": timeout: must be positive, or "none", got 0s`, nil},
	{"negative kill_grace", job("kill_grace = \"-1s\"\n"), `t.toml:4: job "a": kill_grace: must be positive`, nil},
	{"zero misfire_grace", job("misfire_grace = \"0s\"\n"), `t.toml:4: job "a": misfire_grace: must be positive`, nil},
	{"zero catchup_window", job("catchup_window = \"0s\"\n"), `t.toml:4: job "a": catchup_window: must be positive`, nil},
	{"negative start_deadline", job("start_deadline = \"-1m\"\n"), `t.toml:4: job "a": start_deadline: must be positive, or "none", got -1m0s`, nil},
	{"negative jitter", job("jitter = \"-5m\"\n"), `t.toml:4: job "a": jitter: must not be negative, got -5m0s`, nil},
	{"bare integer jitter", job("jitter = 300\n"), `t.toml:4: job "a": jitter: a bare number (300) is not a duration; use a string such as "90s"`, nil},
	{"jitter none", job("jitter = \"none\"\n"), `t.toml:4: job "a": jitter: "none" is not a duration; use a number with a unit such as "90s" or "2h"`, nil},
	{"jitter as a boolean", job("jitter = true\n"), `t.toml:4: job "a": jitter: must be a duration string such as "90s", not a boolean (true)`, nil},
	{"negative jitter in defaults", "[defaults]\njitter = \"-1s\"\n", `t.toml:2: defaults.jitter: must not be negative, got -1s`, nil},
	{"negative retry delay", job("retry = { initial_delay = \"-1s\" }\n"), `t.toml:4: job "a": retry.initial_delay: must not be negative, got -1s`, nil},
	{"negative shutdown_grace", "[daemon]\nshutdown_grace = \"-1s\"\n", `t.toml:2: daemon.shutdown_grace: must not be negative, got -1s`, nil},
	{"negative duration in defaults", "[defaults]\ntimeout = \"-1h\"\n", `t.toml:2: defaults.timeout: must be positive, or "none", got -1h0m0s`, nil},
	{"bare duration in defaults", "[defaults]\ntimeout = 5\n", `t.toml:2: defaults.timeout: a bare number (5) is not a duration`, nil},

	// What to run.
	{"empty command", "[[job]]\nname = \"a\"\ncommand = []\n", `t.toml:3: job "a": command: must not be empty: the first element is the program`, nil},
	{"command with an empty string", "[[job]]\nname = \"a\"\ncommand = [\"/bin/echo\", \"\"]\n", `t.toml:3: job "a": command: element 1 is empty`, nil},
	{"command with an empty program", "[[job]]\nname = \"a\"\ncommand = [\"\"]\n", `t.toml:3: job "a": command: element 0 is empty`, nil},
	{"command with a NUL byte", "[[job]]\nname = \"a\"\ncommand = [\"/bin/echo\", \"a\\u0000b\"]\n", `t.toml:3: job "a": command: element 1 must not contain a NUL byte`, nil},
	{"empty shell", "[[job]]\nname = \"a\"\nshell = \"\"\n", `t.toml:3: job "a": shell: must not be empty`, nil},
	{"command and shell", job("command = [\"/bin/true\"]\n"), `t.toml:3: job "a": shell: set only one of command and shell`, nil},
	{"neither command nor shell", "\n[[job]]\nname = \"a\"\nschedule = \"@daily\"\n", `t.toml:2: job "a": command: is required: set command = ["/path/to/program", "arg"] or shell = "a command line"`, nil},
	{"unknown user", job("user = \"no-such-user-schedulerd\"\n"), `t.toml:4: job "a": user: unknown user "no-such-user-schedulerd"`, nil},
	{"unknown user in defaults", "[defaults]\nuser = \"no-such-user-schedulerd\"\n", `t.toml:2: defaults.user: unknown user`, nil},
	{"relative workdir", job("workdir = \"var/tmp\"\n"), `t.toml:4: job "a": workdir: must be an absolute path, got "var/tmp"`, nil},
	{"empty workdir", job("workdir = \"\"\n"), `t.toml:4: job "a": workdir: must not be empty`, nil},

	// Environment.
	{"env key with =", job("env = { \"A=B\" = \"x\" }\n"), `t.toml:4: job "a": env."A=B": is not a valid variable name`, nil},
	{"env key with a digit first", job("env = { \"1A\" = \"x\" }\n"), `t.toml:4: job "a": env.1A: is not a valid variable name`, nil},
	{"env key reserved", job("env = { SCHEDULERD_JOB = \"x\" }\n"), `t.toml:4: job "a": env.SCHEDULERD_JOB: names starting with SCHEDULERD_ are set by the daemon`, nil},
	{"env key reserved in defaults", "[defaults]\nenv = { SCHEDULERD_X = \"x\" }\n", `t.toml:2: defaults.env.SCHEDULERD_X: names starting with SCHEDULERD_`, nil},
	{"env value with a NUL byte", job("env = { A = \"x\\u0000\" }\n"), `t.toml:4: job "a": env.A: must not contain a NUL byte`, nil},
	{"env key on a later line", job("[job.env]\nA = \"x\"\n\"B-C\" = \"y\"\n"), `t.toml:6: job "a": env.B-C: is not a valid variable name`, nil},

	// When.
	{"unknown timezone", job("timezone = \"Mars/Olympus_Mons\"\n"), `t.toml:4: job "a": timezone: unknown time zone "Mars/Olympus_Mons"`, nil},
	{"empty timezone", job("timezone = \"\"\n"), `t.toml:4: job "a": timezone: must not be empty; leave it out for the local time zone`, nil},
	{"unknown timezone in defaults", "[defaults]\ntimezone = \"Nowhere/Land\"\n", `t.toml:2: defaults.timezone: unknown time zone "Nowhere/Land"`, nil},
	{"schedule that never fires", job("schedule = \"0 0 30 2 *\"\n"), `t.toml:4: job "a": schedule: "0 0 30 2 *": never fires`, nil},
	{"L schedule that never fires", job("schedule = \"0 0 L-30 2 *\"\n"), `t.toml:4: job "a": schedule: "0 0 L-30 2 *": never fires`, nil},
	{"W schedule that never fires", job("schedule = \"0 0 31W 4 *\"\n"), `t.toml:4: job "a": schedule: "0 0 31W 4 *": never fires`, nil},
	{"schedule with an empty list item", job("schedule = \"0 9 * * 1,,5\"\n"), `t.toml:4: job "a": schedule: "0 9 * * 1,,5": day of week field "1,,5": empty list item`, nil},
	{"@reboot", job("schedule = \"@reboot\"\n"), `t.toml:4: job "a": schedule: "@reboot": @reboot is not supported`, nil},
	{"@every 0s", job("schedule = \"@every 0s\"\n"), `t.toml:4: job "a": schedule: "@every 0s": @every`, nil},
	{"@every negative", job("schedule = \"@every -1m\"\n"), `t.toml:4: job "a": schedule: "@every -1m"`, nil},
	{"schedule with too few fields", job("schedule = \"* * *\"\n"), `t.toml:4: job "a": schedule: "* * *"`, nil},
	{"schedule with a zone prefix only", job("schedule = \"TZ=UTC\"\n"), `t.toml:4: job "a": schedule: "TZ=UTC"`, nil},
	{"empty schedule", job("schedule = \"\"\n"), `t.toml:4: job "a": schedule: must not be empty`, nil},
	{"schedule and at", job("schedule = \"@daily\"\nat = 2026-01-01T00:00:00Z\n"), `t.toml:5: job "a": at: set either schedule or at, not both`, nil},
	{"not_after before not_before", job("not_before = 2026-02-01T00:00:00Z\nnot_after = 2026-01-01T00:00:00Z\n"), `t.toml:5: job "a": not_after: must be after not_before (2026-02-01T00:00:00Z)`, nil},
	{"not_after equal to not_before", job("timezone = \"UTC\"\nnot_after = 2026-01-01T00:00:00\nnot_before = 2026-01-01T00:00:00Z\n"), `t.toml:5: job "a": not_after: must be after not_before`, nil},
	{"not_after before at", job("at = 2026-06-01T12:00:00+02:00\nnot_after = 2026-06-01T10:00:00Z\n"), `t.toml:5: job "a": not_after: must be after at`, nil},
	{"not_after equal to local at", job("timezone = \"Asia/Kolkata\"\nat = 2026-06-01T12:00:00\nnot_after = 2026-06-01T06:30:00Z\n"), `t.toml:6: job "a": not_after: must be after at`, nil},

	// Policies.
	{"bad overlap", job("overlap = \"never\"\n"), `t.toml:4: job "a": overlap: must be one of allow, skip, queue, replace; got "never"`, nil},
	{"bad catchup", job("catchup = \"some\"\n"), `t.toml:4: job "a": catchup: must be one of none, latest, all; got "some"`, nil},
	{"bad backoff", job("retry = { backoff = \"linear\" }\n"), `t.toml:4: job "a": retry.backoff: must be one of fixed, exponential; got "linear"`, nil},
	{"zero max_attempts", job("retry = { max_attempts = 0 }\n"), `t.toml:4: job "a": retry.max_attempts: must be between 1 and 1000, got 0`, nil},
	{"dotted max_attempts", job("retry.max_attempts = 0\n"), `t.toml:4: job "a": retry.max_attempts: must be between 1 and 1000, got 0`, nil},
	{"max_delay below initial_delay", job("\nretry = { initial_delay = \"10s\", max_delay = \"1s\" }\n"), `t.toml:5: job "a": retry.max_delay: 1s is less than initial_delay 10s`, nil},
	{"max_delay below the defaults' initial_delay", "[defaults]\nretry = { initial_delay = \"1m\" }\n" + job("retry = { max_delay = \"10s\" }\n"), `t.toml:6: job "a": retry.max_delay: 10s is less than initial_delay 1m0s`, nil},
	{"jitter not shorter than start_deadline", job("schedule = \"@hourly\"\nstart_deadline = \"5m\"\njitter = \"5m\"\n"),
		`t.toml:6: job "a": jitter: must be shorter than start_deadline (5m0s), which counts from the tick`, nil},
	{"jitter longer than the defaults' start_deadline", "[defaults]\nstart_deadline = \"5m\"\n" + job("schedule = \"@hourly\"\njitter = \"10m\"\n"),
		`t.toml:7: job "a": jitter: must be shorter than start_deadline (5m0s)`, nil},
	{"start_deadline not longer than the defaults' jitter", "[defaults]\njitter = \"10m\"\n" + job("schedule = \"@hourly\"\n\nstart_deadline = \"10m\"\n"),
		`t.toml:8: job "a": start_deadline: must be longer than jitter (10m0s): it counts from the tick, and a run may start up to jitter after it`, nil},
	{"jitter and start_deadline of defaults", "[defaults]\nstart_deadline = \"1m\"\njitter = \"2m\"\n" + job("schedule = \"@hourly\"\n"),
		`t.toml:3: defaults.jitter: must be shorter than start_deadline (1m0s), which counts from the tick`, nil},
	{"zero catchup_max", job("catchup_max = 0\n"), `t.toml:4: job "a": catchup_max: must be between 1 and 100000, got 0`, nil},
	{"negative max_concurrency", job("max_concurrency = -1\n"), `t.toml:4: job "a": max_concurrency: must be between 0 and`, nil},
	{"small output_limit", job("output_limit = 100\n"), `t.toml:4: job "a": output_limit: must be between 1024 and 16777216, got 100`, nil},
	{"exit code 0", job("no_retry_exit_codes = [1, 0]\n"), `t.toml:4: job "a": no_retry_exit_codes: element 1 must be an exit code from 1 to 255, got an integer (0)`, nil},
	{"exit code 256", job("no_retry_exit_codes = [256]\n"), `t.toml:4: job "a": no_retry_exit_codes: element 0 must be an exit code from 1 to 255`, nil},

	// TOML syntax.
	{"syntax error", "[daemon]\nnode_id = \"a\"\nconcurrency = \n", `t.toml:3: invalid TOML: `, nil},
	{"unterminated string", job("shell = \"true\n"), `t.toml:4: invalid TOML: `, nil},
	{"duplicate key", job("name = \"b\"\n"), `t.toml:4: invalid TOML: `, []string{"already been defined"}},
	{"too deep", "a = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", `t.toml:1: nesting deeper than 16 levels`, nil},

	// Daemon.
	{"inactive_threshold not above twice heartbeat", "[daemon]\nheartbeat_interval = \"1m\"\ninactive_threshold = \"2m\"\n", `t.toml:3: daemon.inactive_threshold: must be more than twice heartbeat_interval (1m0s), got 2m0s`, nil},
	{"heartbeat too long for the default inactive_threshold", "[daemon]\nheartbeat_interval = \"1m\"\n", `t.toml:2: daemon.inactive_threshold: must be more than twice heartbeat_interval (1m0s), got 2m0s`, nil},
	{"huge heartbeat", "[daemon]\nheartbeat_interval = \"2000000h\"\ninactive_threshold = \"2500000h\"\n", `t.toml:3: daemon.inactive_threshold: must be more than twice heartbeat_interval`, nil},
	{"zero heartbeat", "[daemon]\nheartbeat_interval = \"0s\"\n", `t.toml:2: daemon.heartbeat_interval: must be positive`, nil},
	{"unknown socket_group", "[daemon]\nsocket_group = \"no-such-group-schedulerd\"\n", `t.toml:2: daemon.socket_group: unknown group "no-such-group-schedulerd"`, nil},
	{"health_listen without port", "[daemon]\nhealth_listen = \"localhost\"\n", `t.toml:2: daemon.health_listen: must be host:port such as "127.0.0.1:9464"`, nil},
	{"health_listen with a bad port", "[daemon]\nhealth_listen = \"127.0.0.1:99999\"\n", `t.toml:2: daemon.health_listen: the port must be a number from 1 to 65535, got "99999"`, nil},
	{"bad log_format", "[daemon]\nlog_format = \"xml\"\n", `t.toml:2: daemon.log_format: must be one of text, json; got "xml"`, nil},
	{"bad log_level", "[daemon]\nlog_level = \"trace\"\n", `t.toml:2: daemon.log_level: must be one of debug, info, warn, error; got "trace"`, nil},
	{"bad node_id", "[daemon]\nnode_id = \"node one\"\n", `t.toml:2: daemon.node_id: "node one" is not a valid node id`, nil},
	{"negative concurrency", "[daemon]\nconcurrency = -1\n", `t.toml:2: daemon.concurrency: must be between 0 and 10000, got -1`, nil},
	{"huge concurrency", "[daemon]\nconcurrency = 10001\n", `t.toml:2: daemon.concurrency: must be between 0 and 10000, got 10001`, nil},
	{"short history", "[daemon]\nhistory = \"30m\"\n", `t.toml:2: daemon.history: must be at least 1h0m0s, got 30m0s`, nil},
	{"unknown store scheme", "[daemon]\nstore = \"mysql://u:secret@db/sd\"\n", `t.toml:2: daemon.store: unknown store "mysql://"; use postgres://..., a key=value DSN (host=... dbname=...), sqlite:PATH or a file path`, nil},
	{"sqlite without a path", "[daemon]\nstore = \"sqlite:\"\n", `t.toml:2: daemon.store: sqlite: needs a file path`, nil},
	{"bad postgres URL", "[daemon]\nstore = \"postgres://u:secret@db:port/sd\"\n", `t.toml:2: daemon.store: is not a valid postgres:// URL`, nil},
	{"socket path too long", "[daemon]\nsocket = \"/" + strings.Repeat("s", 120) + "\"\n", `t.toml:2: daemon.socket: the path`, []string{"a unix socket path has at most 107"}},
	{"api_listen without port", "[daemon]\napi_listen = \"localhost\"\n", `t.toml:2: daemon.api_listen: must be host:port such as "127.0.0.1:9464"`, nil},
	{"api_tls_cert without a key", "[daemon]\napi_listen = \"127.0.0.1:8080\"\napi_tls_cert = \"/etc/a.crt\"\n", `t.toml:3: daemon.api_tls_cert: is set without api_tls_key: give both files, or neither for plain HTTP`, nil},
	{"api_tls_key without a cert", "[daemon]\napi_listen = \"127.0.0.1:8080\"\napi_tls_key = \"/etc/a.key\"\n", `t.toml:3: daemon.api_tls_key: is set without api_tls_cert`, nil},
	{"api_tls without api_listen", "[daemon]\napi_tls_cert = \"/etc/a.crt\"\napi_tls_key = \"/etc/a.key\"\n", `t.toml:2: daemon.api_tls_cert: is set but api_listen is not`, nil},

	// Tokens.
	{"token without name", "[[token]]\nrole = \"read\"\nsha256 = \"" + testHash + "\"\n", `t.toml:1: token[0].name: is required`, nil},
	{"token with a bad name", "[[token]]\nname = \"a b\"\nrole = \"read\"\nsha256 = \"" + testHash + "\"\n", `t.toml:2: token[0].name: "a b" is not a valid token name`, nil},
	{"token without role", "[[token]]\nname = \"ci\"\nsha256 = \"" + testHash + "\"\n", `t.toml:1: token "ci": role: is required (read, operate, admin: what the token may do)`, nil},
	{"token with a bad role", "[[token]]\nname = \"ci\"\nrole = \"root\"\nsha256 = \"" + testHash + "\"\n", `t.toml:3: token "ci": role: must be one of read, operate, admin; got "root"`, nil},
	{"token without sha256", "[[token]]\nname = \"ci\"\nrole = \"read\"\n", `t.toml:1: token "ci": sha256: is required`, nil},
	{"token with the token instead of its hash", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"sd_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG\"\n", `t.toml:4: token "ci": sha256: must be the SHA-256 of the token in 64 hex digits`, []string{"got 46 characters"}},
	{"token with a short hash", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"" + testHash[:62] + "\"\n", `t.toml:4: token "ci": sha256: must be the SHA-256 of the token in 64 hex digits`, nil},
	{"token with the hash of nothing", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"\n", `t.toml:4: token "ci": sha256: is the SHA-256 of the empty string`, nil},
	{"token with an unknown key", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"" + testHash + "\"\nsha = 1\n", `t.toml:5: token "ci": sha: unknown key`, nil},
	{"duplicate token name", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"" + testHash + "\"\n[[token]]\nname = \"ci\"\nrole = \"admin\"\nsha256 = \"" + otherHash + "\"\n", `t.toml:6: token "ci": name: duplicate token name; the first token named "ci" is at line 2`, nil},
	{"same token twice", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"" + testHash + "\"\n[[token]]\nname = \"ops\"\nrole = \"admin\"\nsha256 = \"" + strings.ToUpper(testHash) + "\"\n", `t.toml:8: token "ops": sha256: is the same as that of token "ci"`, nil},
	{"token as a table", "[token]\nname = \"ci\"\n", `t.toml:1: token: must be an array of tables: write [[token]], not [token]`, nil},
	{"dotted daemon key", "daemon.log_format = \"xml\"\n", `t.toml:1: daemon.log_format: must be one of text, json`, nil},
	{"inline daemon table", "daemon = { log_level = \"loud\" }\n", `t.toml:1: daemon.log_level: must be one of`, nil},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range errorTests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("t.toml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("config returned with an error")
			}
			checkErrors(t, err)
			lines := strings.Split(err.Error(), "\n")
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, tt.want) }) {
				t.Errorf("error:\n%v\nhas no line starting with\n%s", err, tt.want)
			}
			for _, s := range tt.also {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error:\n%v\ndoes not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}

// checkErrors checks that err joins *Error values sorted by line, each
// naming the file.
func checkErrors(t *testing.T, err error) []*Error {
	t.Helper()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a join of errors", err)
	}
	var list []*Error
	for _, e := range joined.Unwrap() {
		ce, ok := e.(*Error)
		if !ok {
			t.Fatalf("error %T (%v) is not a *Error", e, e)
		}
		if ce.File != "t.toml" || ce.Msg == "" {
			t.Errorf("error %#v", ce)
		}
		if len(list) > 0 && list[len(list)-1].Line > ce.Line && !strings.HasSuffix(ce.Msg, "more problems not shown") {
			t.Errorf("errors not sorted by line:\n%v", err)
		}
		list = append(list, ce)
	}
	var first *Error
	if !errors.As(err, &first) || first != list[0] {
		t.Errorf("errors.As does not find the first *Error")
	}
	return list
}

// testHash and otherHash are SHA-256 sums of tokens.
const (
	testHash  = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	otherHash = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

// validSnippets are valid configs that the checks must not reject.
var validSnippets = []struct{ name, src string }{
	{"empty file", ""},
	{"comments only", "# nothing\n\n"},
	{"empty sections", "[daemon]\n[defaults]\n"},
	{"concurrency 0 means the default", "[daemon]\nconcurrency = 0\n"},
	{"shutdown_grace 0", "[daemon]\nshutdown_grace = \"0s\"\n"},
	{"numeric socket_group", "[daemon]\nsocket_group = \"0\"\n"},
	{"postgres store", "[daemon]\nstore = \"postgresql://sd@db.example:5432/sd?sslmode=verify-full\"\n"},
	{"health on all interfaces", "[daemon]\nhealth_listen = \":9464\"\n"},
	{"IPv6 health", "[daemon]\nhealth_listen = \"[::1]:9464\"\n"},
	{"API without TLS", "[daemon]\napi_listen = \"127.0.0.1:8080\"\n"},
	{"API with TLS", "[daemon]\napi_listen = \":8443\"\napi_tls_cert = \"/etc/c.pem\"\napi_tls_key = \"/etc/k.pem\"\n"},
	{"tokens without api_listen", "[[token]]\nname = \"ci\"\nrole = \"read\"\nsha256 = \"" + testHash + "\"\n"},
	{"tokens as an inline array", "token = [{ name = \"a\", role = \"admin\", sha256 = \"" + testHash + "\" }]\n"},
	{"numeric user", cmdJob("user = \"0\"\n")},
	{"max_concurrency 0", cmdJob("max_concurrency = 0\n")},
	{"retry with zero delays", cmdJob("retry = { initial_delay = \"0s\", max_delay = \"0s\", max_attempts = 1 }\n")},
	{"six-field schedule", cmdJob("schedule = \"*/10 * * * * *\"\n")},
	{"zone prefix in schedule", cmdJob("schedule = \"CRON_TZ=Asia/Tokyo 0 9 * * *\"\n")},
	{"at in the past", cmdJob("at = 2001-01-01T00:00:00Z\n")},
	{"window only", cmdJob("not_before = 2026-01-01T00:00:00Z\n")},
	{"jitter", cmdJob("schedule = \"@hourly\"\njitter = \"5m\"\n")},
	{"jitter longer than the schedule's interval", cmdJob("schedule = \"@every 1m\"\njitter = \"1h\"\n")},
	{"jitter 0s", cmdJob("schedule = \"@hourly\"\njitter = \"0s\"\n")},
	{"jitter below start_deadline", cmdJob("schedule = \"@hourly\"\njitter = \"5m\"\nstart_deadline = \"5m1s\"\n")},
	{"jitter with start_deadline none", "[defaults]\nstart_deadline = \"1m\"\n" + cmdJob("schedule = \"@hourly\"\njitter = \"5m\"\nstart_deadline = \"none\"\n")},
	{"jitter and start_deadline on a job without schedule", cmdJob("jitter = \"5m\"\nstart_deadline = \"1m\"\n")},
	{"jitter and not_after on a tick", cmdJob("schedule = \"@hourly\"\ntimezone = \"UTC\"\njitter = \"50m\"\nnot_after = 2026-01-01T00:00:00Z\n")},
	{"not_after on a tick", cmdJob("schedule = \"*/10 * * * * *\"\ntimezone = \"UTC\"\nnot_after = 2026-01-01T00:00:00Z\n")},
	{"timeout none", cmdJob("schedule = \"@hourly\"\ntimeout = \"none\"\n")},
	{"jobs as an inline array", "job = [{ name = \"a\", shell = \"true\" }, { name = \"b\", shell = \"true\" }]\n"},
	{"empty job array", "job = []\n"},
	{"crlf line ends", "[[job]]\r\nname = \"a\"\r\nshell = \"true\"\r\n"},
	{"multi-line shell", "[[job]]\nname = \"a\"\nshell = \"\"\"\nset -e\n[[job]]\nname = \"b\"\n\"\"\"\n"},
	{"command with arguments", "[[job]]\nname = \"a\"\ncommand = [\"/bin/echo\", \"-n\", \"x\"]\n"},
	{"mail notifier", "[[notifier]]\nname = \"mail\"\nmail_to = [\"ops@example.com\"]\nsmtp = \"smtp://mail.example:587\"\n" + cmdJob("notify = [\"mail\"]\n")},
	{"mail notifier with every key", "[[notifier]]\nname = \"mail\"\nevents = [\"failed\"]\nmail_to = [\"a@example.com\", \"b.c@d.example\"]\n" +
		"mail_from = \"cron@example.com\"\nsmtp = \"smtps://127.0.0.1:4650\"\nsmtp_user = \"cron\"\nsmtp_password_file = \"/etc/pw\"\nsmtp_insecure = false\ntimeout = \"1m\"\n"},
}

func TestValidSnippets(t *testing.T) {
	for _, tt := range validSnippets {
		t.Run(tt.name, func(t *testing.T) {
			mustParse(t, tt.src)
		})
	}
}

func TestMultipleErrors(t *testing.T) {
	src := `[daemon]
concurrency = "4"
log_format = "xml"
bogus = 1

[defaults]
timeout = 30

[[job]]
name = "first"
command = "ls"
retry = { max_attempts = 0, nope = 1 }

[[job]]
name = "first"
shell = "true"
schedule = "0 0 30 2 *"
env = { "A=B" = "x" }

[[job]]
command = []
timezone = "Nowhere/Land"
`
	_, err := Parse("t.toml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	list := checkErrors(t, err)
	want := []string{
		`t.toml:2: daemon.concurrency: `,
		`t.toml:3: daemon.log_format: `,
		`t.toml:4: daemon.bogus: unknown key`,
		`t.toml:7: defaults.timeout: `,
		`t.toml:11: job "first": command: `,
		`t.toml:12: job "first": retry.max_attempts: `,
		`t.toml:12: job "first": retry.nope: unknown key`,
		`t.toml:15: job "first": name: duplicate job name; the first job named "first" is at line 10`,
		`t.toml:17: job "first": schedule: `,
		`t.toml:18: job "first": env."A=B": `,
		`t.toml:20: job[2].name: is required`,
		`t.toml:21: job[2].command: must not be empty`,
		`t.toml:22: job[2].timezone: unknown time zone`,
	}
	if len(list) != len(want) {
		t.Errorf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i := range min(len(list), len(want)) {
		if got := list[i].Error(); !strings.HasPrefix(got, want[i]) {
			t.Errorf("error %d = %s\nwant prefix %s", i, got, want[i])
		}
	}
}

func TestManyErrors(t *testing.T) {
	var b strings.Builder
	for i := range MaxErrors + 50 {
		fmt.Fprintf(&b, "k%d = 1\n", i)
	}
	_, err := Parse("t.toml", []byte(b.String()))
	list := checkErrors(t, err)
	if len(list) != MaxErrors+1 {
		t.Fatalf("got %d errors, want %d", len(list), MaxErrors+1)
	}
	if last := list[MaxErrors].Error(); last != "t.toml: 50 more problems not shown" {
		t.Errorf("last error = %q", last)
	}
	if first := list[0].Error(); first != "t.toml:1: k0: unknown key" {
		t.Errorf("first error = %q", first)
	}
}

func TestLongValuesClipped(t *testing.T) {
	long := strings.Repeat("é", 5000)
	_, err := Parse("t.toml", []byte("[daemon]\n"+long+" = 1\nlog_format = \""+long+"\"\n"))
	if err == nil {
		t.Fatal("no error")
	}
	checkErrors(t, err)
	if len(err.Error()) > 400 || !utf8.ValidString(err.Error()) {
		t.Errorf("error is %d bytes (valid UTF-8: %v):\n%v", len(err.Error()), utf8.ValidString(err.Error()), err)
	}
}

func TestTooBig(t *testing.T) {
	data := make([]byte, MaxFileSize+1)
	for i := range data {
		data[i] = '\n'
	}
	_, err := Parse("t.toml", data)
	if err == nil || err.Error() != "t.toml: the file is larger than 16 MiB" {
		t.Errorf("Parse = %v", err)
	}

	path := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<30); err != nil { // sparse
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("Load = %v", err)
	}
	// Exactly the limit is allowed.
	if _, err := Parse("t.toml", data[:MaxFileSize]); err != nil {
		t.Errorf("Parse of %d bytes: %v", MaxFileSize, err)
	}
}

func TestTooManyJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 100001 jobs")
	}
	var b strings.Builder
	for range MaxJobs + 1 {
		b.WriteString("[[job]]\n")
	}
	_, err := Parse("t.toml", []byte(b.String()))
	want := "t.toml:100001: job: 100001 jobs; at most 100000 are allowed"
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v, want %s", err, want)
	}
}

func TestLoad(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file = %v", err)
	}

	path := filepath.Join(t.TempDir(), "schedulerd.toml")
	if err := os.WriteFile(path, []byte(job("timeout = 30\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	var ce *Error
	if !errors.As(err, &ce) || ce.File != path || ce.Line != 4 || ce.Key != `job "a": timeout` {
		t.Errorf("Load = %#v", ce)
	}
}

// TestLoadDaemon: a client reads the [daemon] table alone: the same
// Daemon as Load's, a job's mistake ignored, the daemon table's mistakes
// and the file's reported as Load reports them.
func TestLoadDaemon(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		t.Helper()
		path := filepath.Join(dir, "schedulerd.toml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	daemon := "[daemon]\nstate_dir = \"/var/lib/sd-test\"\nnode_id = \"n1\"\n"
	path := write(daemon + job(""))
	full, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := LoadDaemon(path)
	if err != nil || !reflect.DeepEqual(*d, full.Daemon) {
		t.Fatalf("LoadDaemon = %+v, %v; Load's daemon %+v", d, err, full.Daemon)
	}

	path = write(daemon + job("timeout = 30\n"))
	if _, err := Load(path); err == nil {
		t.Fatal("Load accepted a job with a bad timeout")
	}
	if d, err := LoadDaemon(path); err != nil || d.Socket != full.Daemon.Socket {
		t.Fatalf("LoadDaemon with a broken job = %+v, %v; want the daemon, socket %s", d, err, full.Daemon.Socket)
	}

	path = write("[daemon]\nstate_dir = \"/var/lib/sd-test\"\nconcurency = 4\n" + job("timeout = 30\n"))
	_, err = LoadDaemon(path)
	var ce *Error
	if !errors.As(err, &ce) || ce.File != path || ce.Line != 3 || ce.Key != "daemon.concurency" {
		t.Errorf("LoadDaemon of an unknown daemon key = %v", err)
	}
	if _, err := LoadDaemon(write("[daemon\n")); err == nil || !strings.Contains(err.Error(), "invalid TOML") {
		t.Errorf("LoadDaemon of invalid TOML = %v", err)
	}

	// A TOML mistake in a job (an edit half done) is read past: the lines
	// before the first table and those of [daemon] are read alone, and
	// the mistake is returned for the client to mention.
	for _, text := range []string{
		daemon + job("timeout =\n"),
		"# the cluster's config\n" + job("shell = \"unterminated\n") + daemon + "[defaults]\ntimeout = \"1h\"\n",
		"[ daemon ]  # ours\nstate_dir = \"/var/lib/sd-test\"\nnode_id = \"n1\"\n[[ job ]]\nname = \"a\"\nshell = 'x\n",
	} {
		path = write(text)
		d, past, err := LoadDaemonPast(path)
		var pe *Error
		if err != nil || !reflect.DeepEqual(*d, full.Daemon) || !errors.As(past, &pe) || pe.Line < 4 ||
			!strings.Contains(pe.Msg, "invalid TOML") {
			t.Errorf("LoadDaemonPast of %q = %+v, %v, %v; want Load's daemon %+v and the mistake", text, d, past, err, full.Daemon)
		}
	}
	// Not past a mistake in [daemon] or in the lines before the first
	// table, nor past a line that starts with [ but is no table header.
	for _, c := range []struct{ text, line string }{
		{daemon + "socket = \n" + job(""), ":4: invalid TOML"},
		{"state_dir = \n" + daemon + job(""), ":1: invalid TOML"},
		{daemon + "[[job\nname = \"a\"\n", ":5: invalid TOML"},
		{daemon + "[[job]] x\nname = \"a\"\n", ":4: invalid TOML"},
	} {
		if d, err := LoadDaemon(write(c.text)); err == nil || !strings.Contains(err.Error(), c.line) {
			t.Errorf("LoadDaemon of %q = %+v, %v; want the mistake at %s", c.text, d, err, c.line)
		}
	}
	if _, err := LoadDaemon(filepath.Join(dir, "missing.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadDaemon of a missing file = %v", err)
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "f.toml", Line: 12, Key: `job "backup": timeout`, Msg: "must be positive"}, `f.toml:12: job "backup": timeout: must be positive`},
		{Error{File: "f.toml", Key: "daemon.node_id", Msg: "m"}, `f.toml: daemon.node_id: m`},
		{Error{File: "f.toml", Line: 3, Msg: "invalid TOML: x"}, `f.toml:3: invalid TOML: x`},
		{Error{File: "f.toml", Msg: "too big"}, `f.toml: too big`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestPositions(t *testing.T) {
	src := "\ufeff# comment [[job]]\n" + // 1
		"top = 1\n" + // 2
		"[daemon]  # trailing\n" + // 3
		"node_id = 'x' # name = 1\n" + // 4
		"[[job]]\n" + // 5
		"name = \"\"\"\n" + // 6
		"[[job]]\n" + // 7
		"retry = 1\n" + // 8
		"\"\"\"\n" + // 9
		"\"quoted \\\"key\\\" \\u00e9\" = 1\n" + // 10
		"retry = { max_attempts = 1,\n" + // 11
		"  backoff = \"x\" }\n" + // 12
		"a.b . c = [ { d = 1 },\n" + // 13
		"  { e = '''\n" + // 14
		"x''' } ]\n" + // 15
		"[[job]]\r\n" + // 16
		"[job.env]\n" + // 17
		"K = \"]\"\n" + // 18
		"[[ job . sub ]]\n" + // 19
		"s = 1979-05-27 07:32:00Z\n" + // 20
		"t = 2\n" // 21
	pos, deep := scanPositions(src)
	if deep != 0 {
		t.Fatalf("deep = %d", deep)
	}
	want := map[string]int{
		"top":                       2,
		"daemon":                    3,
		"daemon.node_id":            4,
		"job":                       5,
		"job[0]":                    5,
		"job[0].name":               6,
		"job[0].quoted \"key\" é":   10,
		"job[0].retry":              11,
		"job[0].retry.max_attempts": 11,
		"job[0].retry.backoff":      12,
		"job[0].a.b.c":              13,
		"job[0].a.b.c[0].d":         13,
		"job[0].a.b.c[1].e":         14,
		"job[1]":                    16,
		"job[1].env":                17,
		"job[1].env.K":              18,
		"job[1].sub[0]":             19,
		"job[1].sub[0].s":           20,
		"job[1].sub[0].t":           21,
	}
	for path, line := range want {
		if pos[path] != line {
			t.Errorf("line of %s = %d, want %d", path, pos[path], line)
		}
	}
	if l, ok := pos["job[2]"]; ok {
		t.Errorf("job[2] recorded at line %d; it is inside a string", l)
	}
	if got := pos.line("job[1].env.MISSING"); got != 17 {
		t.Errorf("fallback line = %d, want 17", got)
	}
	if got := pos.line("nothing.here"); got != 0 {
		t.Errorf("line of an unknown key = %d", got)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"timeout", "timeout", 0}, {"timout", "timeout", 1},
		{"backof", "backoff", 1}, {"jiter", "jitter", 1}, {"abc", "xyz", 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	if got := nearest("Timeout", jobKeys); got != "timeout" {
		t.Errorf("nearest(Timeout) = %q", got)
	}
	if got := nearest("zzzzzzzz", jobKeys); got != "" {
		t.Errorf("nearest(zzzzzzzz) = %q", got)
	}
}

// TestCompactedJobsShareLists: jobs with equal commands, or equal notify
// lists, share one copy of each (a config generated for many jobs repeats
// them), and appending to one job's list leaves the others as they were.
func TestCompactedJobsShareLists(t *testing.T) {
	cfg := mustParse(t, opsWebhook+`
[[notifier]]
name = "pager"
events = ["dead_letter"]
command = ["/usr/local/bin/page"]

[[job]]
name = "a"
command = ["/bin/report", "--daily"]
notify = ["ops", "pager"]

[[job]]
name = "b"
shell = "true"
notify = ["ops"]

[[job]]
name = "c"
command = ["/bin/report", "--daily"]
notify = ["ops", "pager"]

[[job]]
name = "d"
command = ["/bin/report", "--weekly"]
notify = ["pager", "ops"]
`)
	a, b, c, d := jobNamed(t, cfg, "a"), jobNamed(t, cfg, "b"), jobNamed(t, cfg, "c"), jobNamed(t, cfg, "d")
	if &a.Command[0] != &c.Command[0] || &a.Notify[0] != &c.Notify[0] {
		t.Errorf("the equal command and notify list of a and c are not shared")
	}
	if &a.Command[0] == &d.Command[0] || &a.Notify[0] == &b.Notify[0] || &a.Notify[0] == &d.Notify[0] {
		t.Errorf("lists that differ are shared")
	}
	if !slices.Equal(d.Command, []string{"/bin/report", "--weekly"}) || len(d.Notify) != 2 || d.Notify[0].Notifier != "pager" ||
		len(b.Notify) != 1 || b.Notify[0].Notifier != "ops" {
		t.Errorf("d: command %q notify %v; b: notify %v", d.Command, d.Notify, b.Notify)
	}
	a.Command = append(a.Command, "more")
	a.Notify = append(a.Notify, jobs.NotifyTarget{Notifier: "more"})
	if !slices.Equal(c.Command, []string{"/bin/report", "--daily"}) || len(c.Notify) != 2 ||
		c.Notify[0].Notifier != "ops" || c.Notify[1].Notifier != "pager" {
		t.Errorf("appending to a's lists changed c's: command %q notify %v", c.Command, c.Notify)
	}
}

// TestCompactedJobs: parsed jobs are compacted (compact.go) without changing
// them: equal schedules are shared, commands do not alias, and every field
// read is the one written.
func TestCompactedJobs(t *testing.T) {
	cfg := mustParse(t, `
[defaults]
workdir = "/srv"
env = { A = "1" }

[[job]]
name = "a"
schedule = "0 * * * *"
timezone = "UTC"
command = ["/bin/echo", "a"]

[[job]]
name = "b"
schedule = "0 * * * *"
timezone = "UTC"
command = ["/bin/echo", "b"]
env = { B = "2" }

[[job]]
name = "c"
schedule = "0 * * * *"
timezone = "Europe/Paris"
shell = "echo c"
user = "root"
overlap = "skip"
`)
	a, b, c := jobNamed(t, cfg, "a"), jobNamed(t, cfg, "b"), jobNamed(t, cfg, "c")
	if a.Schedule != b.Schedule {
		t.Errorf("equal schedules of a and b not shared")
	}
	if a.Schedule == c.Schedule || c.Schedule.String() != "0 * * * *" {
		t.Errorf("schedule of c %v (%p, a %p)", c.Schedule, c.Schedule, a.Schedule)
	}
	a.Command = append(a.Command, "more")
	if !slices.Equal(b.Command, []string{"/bin/echo", "b"}) {
		t.Errorf("appending to a's command changed b's: %q", b.Command)
	}
	if c.Shell != "echo c" || c.User != "root" || c.Overlap != jobs.OverlapSkip || c.Workdir != "/srv" {
		t.Errorf("c: shell %q user %q overlap %q workdir %q", c.Shell, c.User, c.Overlap, c.Workdir)
	}
	if !maps.Equal(a.Env, map[string]string{"A": "1"}) || !maps.Equal(b.Env, map[string]string{"A": "1", "B": "2"}) {
		t.Errorf("env a %v b %v", a.Env, b.Env)
	}
	a.Env["X"] = "changed"
	if _, ok := b.Env["X"]; ok {
		t.Errorf("env maps of a and b are shared")
	}
}
