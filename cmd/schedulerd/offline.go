package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/store/postgres"
)

func cmdCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check-config")
	cfgPath := fs.String("config", defaultConfig, "the config file `F`")
	n := fs.Int("n", 3, "print `N` fire times per job")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	for _, msg := range []string{exposedSecret(cfg), exposedAPI(cfg.Daemon)} {
		if msg != "" {
			fmt.Fprintln(stderr, "schedulerd: warning:", msg)
		}
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
			loc := time.Local
			if s, ok := d.Schedule.(*schedule.Schedule); ok {
				loc = s.Location()
				when += " (" + loc.String() + ")"
			}
			var ts []string // in the job's own zone, as its schedule reads
			for t, i := d.Schedule.Next(now), 0; i < *n && !t.IsZero(); t, i = d.Schedule.Next(t), i+1 {
				ts = append(ts, t.In(loc).Format(time.RFC3339))
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
	from := fs.String("from", "", "the `TIME` to start from, RFC 3339 (default: now)")
	n := fs.Int("n", 10, "print `N` fire times")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *spec == "" {
		return usageError{fmt.Errorf("next: --schedule is required")}
	}
	if *n < 1 || *n > 100000 {
		return usageError{fmt.Errorf("next: -n must be between 1 and 100000")}
	}
	loc := time.Local
	if *tz != "" {
		l, err := time.LoadLocation(*tz)
		if err != nil {
			return usageError{fmt.Errorf("next: --timezone: unknown time zone %q", *tz)}
		}
		loc = l
	}
	s, err := schedule.Parse(*spec, loc)
	if err != nil {
		return usageError{fmt.Errorf("next: --schedule: %w", err)}
	}
	t := time.Now()
	if *from != "" {
		t, err = time.Parse(time.RFC3339, *from)
		if err != nil {
			return usageError{fmt.Errorf("next: --from: want RFC 3339 such as 2026-03-29T00:00:00+01:00: %w", err)}
		}
	}
	for i := 0; i < *n; i++ {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		fmt.Fprintln(stdout, t.In(s.Location()).Format(time.RFC3339))
	}
	return nil
}

func cmdMigrate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("migrate")
	cfgPath := fs.String("config", defaultConfig, "the config file `F`")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
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
