package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/dashboard"
	"github.com/schedulerd/schedulerd/jobs/command"
	notifypkg "github.com/schedulerd/schedulerd/notify"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("config: %w", err)}
	}
	return cfg, nil
}

func newLogger(w io.Writer, d config.Daemon) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(d.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if d.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openStore opens the configured store. lock makes a second daemon on the
// same SQLite database refuse to start.
func openStore(ctx context.Context, d config.Daemon, lock bool, logger *slog.Logger) (store.Store, error) {
	if d.IsPostgres() {
		// Several nodes share the database: no lock; the node registry
		// keeps node ids apart. Errors never repeat the password.
		st, err := postgres.Open(ctx, postgres.Options{DSN: d.Store, Logger: logger})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, sqlite.Options{Path: d.StorePath(), Lock: lock, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	// Every signal handler is installed before anything else, so that a
	// SIGHUP that comes early (systemctl reload right after the start) is
	// a reload once the daemon runs, never the default action, which
	// would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	fs := newFlags("run")
	cfgPath := fs.String("config", defaultConfig, "the config file `F`")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	hardenProcess(stderr)
	leanGC()
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if err := checkJobUsers(cfg); err != nil {
		return usageError{fmt.Errorf("config: %w", err)}
	}
	logger := newLogger(stderr, cfg.Daemon)
	slog.SetDefault(logger)
	if msg := exposedSecret(cfg); msg != "" {
		logger.Warn(msg)
	}
	targets, warnings, err := notifyTargets(cfg)
	if err != nil {
		return usageError{fmt.Errorf("config: %w", err)}
	}
	for _, w := range warnings {
		logger.Warn(w)
	}

	st, err := openStore(ctx, cfg.Daemon, true, logger)
	if err != nil {
		return err
	}
	defer st.Close()

	d := cfg.Daemon
	sc := scheduler.Config{
		NodeID: d.NodeID, Concurrency: d.Concurrency,
		HeartbeatInterval: d.HeartbeatInterval, InactiveThreshold: d.InactiveThreshold,
		ShutdownGrace: d.ShutdownGrace, History: d.History,
		Version: version, SocketPath: d.Socket, Logger: logger,
		// SQLite: the lock is held, so no earlier process of this node
		// lives, and the machine clock is the store's. PostgreSQL: the
		// database clock judges leases, windows and liveness.
		ExclusiveStore: !d.IsPostgres(),
		StoreClock:     d.IsPostgres(),
	}
	// The watchdog ping comes from the scheduling loop itself, so a stuck
	// loop stops the pings; the loop must then wake at least twice per period.
	wd, err := daemon.SdWatchdogEnabled(false)
	if err == nil && wd > 0 {
		sc.PollInterval = min(10*time.Second, wd/3)
	}
	sched, err := scheduler.New(st, sc, cfg.Jobs)
	if err != nil {
		return err
	}
	if wd > 0 {
		sched.OnLoop = func() { notify(daemon.SdNotifyWatchdog) }
	}
	// Notifications are delivered beside the scheduling loop, never in it.
	deliverer := notifypkg.New(notifypkg.Config{
		Store: st, Node: d.NodeID, Incarnation: sched.Incarnation, StoreClock: d.IsPostgres(),
		Logger: logger, Version: version,
	}, targets)
	sched.OnNotify = deliverer.Wake

	// SIGHUP and `schedulerd reload` share one reload, one at a time.
	var (
		reloadMu sync.Mutex
		api      *control.APIServer // set before anything can reload
	)
	// actor is who asked through the control API (control.Caller.Actor);
	// empty for SIGHUP.
	reloadConfig := func(ctx context.Context, actor string) error {
		reloadMu.Lock()
		defer reloadMu.Unlock()
		notify(daemon.SdNotifyReloading, "MONOTONIC_USEC="+strconv.FormatInt(monotonicUsec(), 10))
		leanGC()
		log := logger
		if actor != "" {
			log = logger.With("actor", actor)
		}
		err := reload(ctx, log, *cfgPath, cfg, sched, api, deliverer)
		settleMemory()
		notify(daemon.SdNotifyReady, fmt.Sprintf("STATUS=running %d jobs", len(sched.Jobs())))
		return err
	}
	// The sockets are bound before the scheduler starts, so that a clash
	// stops the start before any run is claimed; they serve once it runs.
	eng := &engine{sched: sched, st: st, reload: reloadConfig}
	runtimeDir, _, _ := strings.Cut(os.Getenv("RUNTIME_DIRECTORY"), ":")
	ctl, err := control.Listen(control.ServerConfig{
		Path: d.Socket, Group: d.SocketGroup, Logger: logger, Engine: eng, Store: st,
		InactiveThreshold: d.InactiveThreshold,
		DirOwned:          runtimeDir != "" && filepath.Dir(d.Socket) == filepath.Clean(runtimeDir),
	})
	if err != nil {
		return err
	}
	defer closeServer(ctl.Close)
	var hs *control.HealthServer
	if d.HealthListen != "" {
		if hs, err = control.ListenHealth(d.HealthListen, eng, logger); err != nil {
			return err
		}
		defer closeServer(hs.Close)
	}
	if d.APIListen != "" {
		api, err = control.ListenAPI(control.APIConfig{
			Addr: d.APIListen, TLSCert: d.APITLSCert, TLSKey: d.APITLSKey, Tokens: apiTokens(cfg.Tokens),
			Server: control.ServerConfig{Logger: logger, Engine: eng, Store: st, InactiveThreshold: d.InactiveThreshold},
		})
		if err != nil {
			return err
		}
		defer closeServer(api.Close)
		ui, err := dashboard.New(dashboard.Config{API: api, Engine: eng, Store: st, InactiveThreshold: d.InactiveThreshold, Logger: logger})
		if err != nil {
			return err
		}
		api.MountUI(ui)
	}
	if err := sched.Start(ctx); err != nil {
		return err
	}
	if err := deliverer.Start(ctx); err != nil {
		return err
	}
	ctl.Start()
	if hs != nil {
		hs.Start()
	}
	if api != nil {
		api.Start()
	}
	logger.Info("schedulerd running", "version", version, "config", cfg.Path, "node", d.NodeID,
		"store", storeLogValue(d), "jobs", len(cfg.Jobs))
	// READY=1 as soon as the scheduler runs and the sockets serve: the
	// collection that hands the start's garbage back comes after it, so
	// that systemd does not count that time, or an attempt that ends the
	// process meanwhile, against the start.
	notify(daemon.SdNotifyReady, fmt.Sprintf("STATUS=running %d jobs", len(cfg.Jobs)))
	settleMemory()

	for {
		select {
		case <-hup:
			_ = reloadConfig(ctx, "")
		case <-ctx.Done():
			notify(daemon.SdNotifyStopping, "STATUS=stopping: waiting for running attempts")
			logger.Info("stopping", "running", sched.Running(), "shutdown_grace", d.ShutdownGrace)
			sched.Stop(context.Background())
			deliverer.Stop()
			return nil
		}
	}
}

// checkJobUsers refuses the jobs whose user this daemon cannot switch to
// (it runs as another user than root), so that the mistake stops the
// start or the reload instead of failing every attempt of the job.
func checkJobUsers(cfg *config.Config) error {
	var errs []error
	for _, d := range cfg.Jobs {
		if d.User == "" {
			continue
		}
		if err := command.CheckSwitch(d.User); err != nil {
			errs = append(errs, fmt.Errorf("%s: job %q: user: %w", cfg.Path, d.Name, err))
		}
	}
	if len(errs) > 0 {
		errs = append(errs, errors.New("to run jobs as other users, run the daemon as root (the unit's drop-in root.conf: docs/operations.md)"))
	}
	return errors.Join(errs...)
}

// closeServer stops a socket server at the end of cmdRun, after the
// scheduler, so that runs can be watched and cancelled while it drains.
func closeServer(stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = stop(ctx)
}

// reload re-reads the config, and with an HTTP API (api not nil) its
// certificate files. A config or a certificate that does not load is
// rejected whole and the running one stays; the error says why. The
// tokens and the certificate are put in use once the jobs are.
func reload(ctx context.Context, logger *slog.Logger, path string, running *config.Config, sched *scheduler.Scheduler,
	api *control.APIServer, deliverer *notifypkg.Deliverer) error {
	cfg, err := config.Load(path)
	if err == nil {
		err = checkJobUsers(cfg)
	}
	var (
		targets  map[string]*notifypkg.Target
		warnings []string
	)
	if err == nil {
		targets, warnings, err = notifyTargets(cfg)
	}
	if err != nil {
		logger.Error("reload rejected: keeping the running config", "config", path, "error", err)
		return fmt.Errorf("config: %w", err)
	}
	var apiReload *control.APIReload
	if api != nil {
		if apiReload, err = api.PrepareReload(apiTokens(cfg.Tokens)); err != nil {
			logger.Error("reload rejected: keeping the running config", "config", path, "error", err)
			return err
		}
	}
	if cfg.Daemon != running.Daemon {
		logger.Warn("reload: [daemon] settings changed; they take effect at the next restart", "config", path)
	}
	if err := sched.Reload(ctx, cfg.Jobs); err != nil {
		logger.Error("reload rejected: keeping the running config", "config", path, "error", err)
		return err
	}
	if apiReload != nil {
		apiReload.Apply()
	}
	deliverer.SetTargets(targets)
	for _, w := range warnings {
		logger.Warn(w)
	}
	logger.Info("reload applied", "config", path, "jobs", len(cfg.Jobs), "tokens", len(cfg.Tokens))
	return nil
}

// apiTokens are the config's [[token]] tables as the API takes them.
func apiTokens(ts []config.Token) []control.APIToken {
	out := make([]control.APIToken, len(ts))
	for i, t := range ts {
		out[i] = control.APIToken{Name: t.Name, Role: control.Role(t.Role), SHA256: t.SHA256}
	}
	return out
}

// notify sends the states to systemd in one message (RELOADING=1 must come
// with its MONOTONIC_USEC); a no-op without NOTIFY_SOCKET.
func notify(states ...string) {
	_, _ = daemon.SdNotify(false, strings.Join(states, "\n"))
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, as systemd wants with RELOADING=1.
func monotonicUsec() int64 {
	var ts syscall.Timespec
	if err := clockGettime(&ts); err != nil {
		return 0
	}
	return ts.Sec*1e6 + ts.Nsec/1e3
}

// storeLogValue names the store for logs; a DSN's password never appears.
func storeLogValue(d config.Daemon) slog.LogValuer {
	if d.IsPostgres() {
		return postgres.DSN(d.Store)
	}
	return sqliteLog(d.StorePath())
}

type sqliteLog string

func (s sqliteLog) LogValue() slog.Value { return slog.StringValue("sqlite:" + string(s)) }
