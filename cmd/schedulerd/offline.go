package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/store/postgres"
)

func cmdCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check-config")
	cfgPath := fs.String("config", defaultConfig, "the config file `F`; without it, ./schedulerd.toml when the default does not exist")
	n := fs.Int("n", 3, "print `N` fire times per job")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	path, err := configPath(*cfgPath, flagGiven(fs, "config"))
	if err != nil {
		return err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	secretWarnings, err := checkSecretFiles(cfg)
	warnings := append([]string{exposedSecret(cfg), exposedAPI(cfg.Daemon)}, secretWarnings...)
	for _, msg := range append(warnings, checkUsers(cfg)...) {
		if msg != "" {
			fmt.Fprintln(stderr, "schedulerd: warning:", msg)
		}
	}
	if err != nil { // as run refuses to start
		return usageError{fmt.Errorf("config: %w", err)}
	}
	now := time.Now()
	api := ""
	if d := cfg.Daemon; d.APIListen != "" {
		scheme := "http"
		if d.APITLSCert != "" {
			scheme = "https"
		}
		api = fmt.Sprintf(", api %s://%s with %d tokens", scheme, d.APIListen, len(cfg.Tokens))
	}
	fmt.Fprintf(stdout, "%s: ok, %d jobs, store %s, socket %s%s\n", cfg.Path, len(cfg.Jobs), storeName(cfg.Daemon), cfg.Daemon.Socket, api)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tKIND\tWHEN\tNEXT")
	for _, d := range cfg.Jobs {
		when, next := "on trigger", "-"
		switch {
		case d.Schedule != nil:
			when = d.Schedule.String()
			loc := scheduleZone(d)
			if _, ok := d.Schedule.(*schedule.Schedule); ok {
				when += " (" + loc.String() + ")"
			}
			var ts []string // in the job's own zone, as its schedule reads
			for t, i := d.Schedule.Next(now), 0; i < *n && !t.IsZero(); t, i = d.Schedule.Next(t), i+1 {
				ts = append(ts, tickText(d, t, loc))
			}
			next = strings.Join(ts, ", ")
		case !d.At.IsZero():
			when = "at " + d.At.Format(time.RFC3339)
			next = d.At.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, d.Kind(), when, next)
	}
	return tw.Flush()
}

// storeName names the store for check-config: a DSN's password never
// appears.
func storeName(d config.Daemon) string {
	if d.IsPostgres() {
		return "postgres " + postgres.RedactDSN(d.Store)
	}
	return "sqlite " + d.StorePath()
}

func cmdNext(args []string, stdout io.Writer) error {
	fs := newFlags("next")
	spec := fs.String("schedule", "", "the cron `SPEC`, such as \"0 3 * * *\" or \"@every 10m\"")
	tz := fs.String("timezone", "", "the IANA time zone `TZ` of the schedule (default: local)")
	name := fs.String("job", "", "the job `NAME` of the config, with its schedule, zone and jitter; with --schedule, the name the delays of --jitter depend on")
	jitter := fs.String("jitter", "", "with --schedule and --job, delay each tick's start as a job's jitter `D` does")
	cfgPath := fs.String("config", defaultConfig, "the config file `F` that declares --job; without it, ./schedulerd.toml when the default does not exist")
	from := fs.String("from", "", "the `TIME` to start from, RFC 3339, 1970 or later (default: now); fire times end with year 9999")
	n := fs.Int("n", 10, "print `N` fire times")
	asJSON := fs.Bool("json", false, "print one JSON object per fire time: tick, start")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *n < 1 || *n > 100000 {
		return usageError{fmt.Errorf("next: -n must be between 1 and 100000")}
	}
	path, err := configPath(*cfgPath, flagGiven(fs, "config"))
	if err != nil && *spec == "" {
		return err
	}
	d, err := nextJob(*spec, *tz, *name, *jitter, path)
	if err != nil {
		return err
	}
	t := time.Now()
	if *from != "" {
		t, err = time.Parse(time.RFC3339, *from)
		if err != nil {
			return usageError{fmt.Errorf("next: --from: want RFC 3339 such as 2026-03-29T00:00:00+01:00: %w", err)}
		}
		// Before the epoch a fire time could be Go's zero time, which a
		// schedule returns for "no more fire times"; the daemon keeps no
		// time before it.
		if t.Before(time.Unix(0, 0)) {
			return usageError{fmt.Errorf("next: --from %s is before 1970-01-01T00:00:00Z: schedulerd has no fire times before then", *from)}
		}
	}
	// A job of the config fires within its life only (not_before,
	// not_after).
	if t.Before(d.NotBefore) {
		t = d.NotBefore.Add(-time.Nanosecond)
	}
	loc := scheduleZone(d)
	for i := 0; i < *n; i++ {
		t = d.Schedule.Next(t)
		if t.IsZero() || !d.InLife(t) || t.Year() > 9999 { // RFC 3339 has four digits of year
			break
		}
		if *asJSON {
			if err := printJSON(stdout, nextTick{Tick: t.UTC(), Start: d.TickStart(t).UTC(), OnSuccess: d.OnSuccess, OnFailure: d.OnFailure}); err != nil {
				return err
			}
			continue
		}
		if d.Jitter > 0 {
			// The start first: it is when the run starts.
			start := d.TickStart(t)
			fmt.Fprintf(stdout, "%s  tick %s\n", start.In(loc).Format(rfc3339Milli), tickText(d, t, loc))
			continue
		}
		fmt.Fprintln(stdout, t.In(loc).Format(time.RFC3339))
	}
	if then := chainLine(d.OnSuccess, d.OnFailure); then != "" && !*asJSON {
		fmt.Fprintln(stdout, then)
	}
	return nil
}

// chainLine is the line that `schedulerd next` ends with for a job of a
// chain: which jobs each of its runs makes a run of; "" for none.
func chainLine(onSuccess, onFailure []string) string {
	var parts []string
	if len(onSuccess) > 0 {
		parts = append(parts, "on success "+strings.Join(onSuccess, ", "))
	}
	if len(onFailure) > 0 {
		parts = append(parts, "on failure "+strings.Join(onFailure, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "each run then triggers: " + strings.Join(parts, "; ")
}

// rfc3339Milli is RFC 3339 with milliseconds, the resolution of a jitter's
// delay.
const rfc3339Milli = "2006-01-02T15:04:05.000Z07:00"

// nextTick is a line of `schedulerd next --json`.
type nextTick struct {
	Tick  time.Time `json:"tick"`  // the tick: the run's scheduled_at
	Start time.Time `json:"start"` // when its run may start: the tick, delayed by the jitter
	// OnSuccess and OnFailure are the jobs the run makes a run of (the
	// job's chain); left out for none.
	OnSuccess []string `json:"on_success,omitempty"`
	OnFailure []string `json:"on_failure,omitempty"`
}

// nextJob returns the job whose ticks `schedulerd next` prints: one made
// of --schedule (with --timezone, and --jitter under the name --job), or
// without --schedule the job --job of the config.
func nextJob(spec, tz, name, jitter, cfgPath string) (*jobs.Definition, error) {
	if spec == "" {
		if name == "" {
			return nil, usageError{fmt.Errorf("next: give --schedule, or --job to read a job of the config")}
		}
		if tz != "" || jitter != "" {
			return nil, usageError{fmt.Errorf("next: --timezone and --jitter go with --schedule; --job alone takes the job's own")}
		}
		cfg, err := loadConfig(cfgPath)
		if err != nil {
			return nil, err
		}
		for _, d := range cfg.Jobs {
			if d.Name != name {
				continue
			}
			if d.Schedule == nil {
				return nil, usageError{fmt.Errorf("next: job %s has no schedule (%s)", name, d.Kind())}
			}
			return d, nil
		}
		return nil, usageError{fmt.Errorf("next: %s declares no job %q", cfgPath, name)}
	}
	loc := time.Local
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, usageError{fmt.Errorf("next: --timezone: unknown time zone %q", tz)}
		}
		loc = l
	}
	s, err := schedule.Parse(spec, loc)
	if err != nil {
		return nil, usageError{fmt.Errorf("next: --schedule: %w", err)}
	}
	d := &jobs.Definition{Name: name, Schedule: s}
	if jitter != "" {
		j, err := time.ParseDuration(jitter)
		switch {
		case err != nil || j < 0:
			return nil, usageError{fmt.Errorf("next: --jitter: want a duration such as \"5m\", got %q", jitter)}
		case name == "":
			return nil, usageError{fmt.Errorf("next: --jitter needs --job: the delays depend on the job's name")}
		}
		d.Jitter = j
	}
	return d, nil
}

// scheduleZone is the zone a job's schedule reads its fields in.
func scheduleZone(d *jobs.Definition) *time.Location {
	if s, ok := d.Schedule.(*schedule.Schedule); ok {
		return s.Location()
	}
	return time.Local
}

// tickText writes a tick of a cron job in loc: RFC 3339, and with jitter
// the delay of its start after it, "+2m13.5s".
func tickText(d *jobs.Definition, tick time.Time, loc *time.Location) string {
	text := tick.In(loc).Format(time.RFC3339)
	if d.Jitter > 0 {
		text += " +" + d.TickStart(tick).Sub(tick).String()
	}
	return text
}

func cmdMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("migrate")
	cfgPath := fs.String("config", defaultConfig, "the config file `F`")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	path, err := daemonConfigPath(*cfgPath, flagGiven(fs, "config"))
	if err != nil {
		return err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	// Opening a store applies the pending migrations (each in its own
	// transaction; on PostgreSQL under an advisory lock, so nodes starting
	// at once are safe). A SQLite store in use by a running daemon is
	// refused: that daemon has migrated it already.
	st, err := openStore(ctx, cfg.Daemon, true, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	where := "sqlite " + cfg.Daemon.StorePath()
	if cfg.Daemon.IsPostgres() {
		where = "postgres " + postgres.RedactDSN(cfg.Daemon.Store)
	}
	fmt.Fprintf(stdout, "store %s is migrated to the newest schema\n", where)
	return nil
}
