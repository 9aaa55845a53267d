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
	"github.com/schedulerd/schedulerd/internal/engineconf"
	"github.com/schedulerd/schedulerd/internal/wallclock"
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
	// What is logged on behalf of an API request says where it came from.
	if d.LogFormat == "json" {
		return slog.New(control.LogRemote(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(control.LogRemote(slog.NewTextHandler(w, opts)))
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

// cmdRun is `schedulerd run`: the daemon, in named steps. Every signal
// handler is installed before anything else, so that a SIGHUP that comes
// early (systemctl reload right after the start) is a reload once the
// daemon runs, never the default action, which would end the process.
func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	fs := newFlags("run")
	cfgPath := fs.String("config", defaultConfig, "the config file `F`")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	path, err := daemonConfigPath(*cfgPath, flagGiven(fs, "config"))
	if err != nil {
		return err
	}
	hardenProcess(stderr)
	leanGC()
	n, err := configure(path, stderr)
	if err != nil {
		return err
	}
	if n.st, err = openStore(ctx, n.cfg.Daemon, true, n.logger); err != nil {
		return err
	}
	defer n.st.Close()
	if err := n.newEngine(); err != nil {
		return err
	}
	// The sockets are bound before the scheduler starts, so that a clash
	// stops the start before any run is claimed; they serve once it runs.
	// They close after the scheduler stops, so that runs can be watched
	// and cancelled while it drains.
	defer n.closeServers()
	if err := n.listen(); err != nil {
		return err
	}
	if err := n.start(ctx); err != nil {
		return err
	}
	n.serve(ctx, hup)
	return nil
}

// daemonNode is the running `schedulerd run`: what cmdRun's steps make
// and the reload changes.
type daemonNode struct {
	cfgPath string
	// cfg is the config the daemon started with: its [daemon] settings
	// stay in force until a restart. Its jobs are the scheduler's once it
	// is made (newEngine drops them here), so that a reload frees them.
	cfg     *config.Config
	logger  *slog.Logger
	targets map[string]*notifypkg.Target

	st        store.Store
	sched     *scheduler.Scheduler
	deliverer *notifypkg.Deliverer

	ctl    *control.Server
	health *control.HealthServer
	api    *control.APIServer // nil without api_listen
	// closers stop the servers that listen, in the order they were bound.
	closers []func(context.Context) error

	// reloadMu makes SIGHUP and `schedulerd reload` one reload at a time.
	reloadMu sync.Mutex
}

// configure loads and checks the config and makes the logger: everything
// that can refuse the start before the store is opened.
func configure(cfgPath string, stderr io.Writer) (*daemonNode, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	if err := checkJobUsers(cfg); err != nil {
		return nil, usageError{fmt.Errorf("config: %w", err)}
	}
	logger := newLogger(stderr, cfg.Daemon)
	slog.SetDefault(logger)
	if msg := exposedSecret(cfg); msg != "" {
		logger.Warn(msg)
	}
	targets, warnings, err := notifyTargets(cfg)
	if err != nil {
		return nil, usageError{fmt.Errorf("config: %w", err)}
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	return &daemonNode{cfgPath: cfgPath, cfg: cfg, logger: logger, targets: targets}, nil
}

// newEngine makes the scheduler on the open store, and the deliverer of
// its notifications beside it, never in its loop.
func (n *daemonNode) newEngine() error {
	d := n.cfg.Daemon
	sc := engineconf.From(d)
	sc.Version, sc.Logger, sc.Notifiers = version, n.logger, notifierTargets(n.cfg)
	// The watchdog ping comes from the scheduling loop itself, so a stuck
	// loop stops the pings; the loop must then wake at least twice per period.
	wd, err := daemon.SdWatchdogEnabled(false)
	if err == nil && wd > 0 {
		sc.PollInterval = min(10*time.Second, wd/3)
	}
	// Steps of the system clock wake the timers that wait for an instant
	// (ticks, retries, windows) at once (docs/guarantees.md).
	wallclock.WatchSystem()
	n.sched, err = scheduler.New(n.st, sc, n.cfg.Jobs)
	if err != nil {
		return err
	}
	n.cfg.Jobs = nil
	if wd > 0 {
		n.sched.OnLoop = func() { notify(daemon.SdNotifyWatchdog) }
	}
	n.deliverer = notifypkg.New(notifypkg.Config{
		Store: n.st, Node: d.NodeID, Incarnation: n.sched.Incarnation, StoreClock: d.IsPostgres(),
		Logger: n.logger, Version: version,
	}, n.targets)
	n.sched.OnNotify = n.deliverer.Wake
	return nil
}

// listen binds the control socket, and the health and HTTP API listeners
// when configured, with the dashboard on the API; none serves yet.
func (n *daemonNode) listen() error {
	d := n.cfg.Daemon
	eng := &engine{sched: n.sched, st: n.st, reload: n.reload}
	runtimeDir, _, _ := strings.Cut(os.Getenv("RUNTIME_DIRECTORY"), ":")
	ctl, err := control.Listen(control.ServerConfig{
		Path: d.Socket, Group: d.SocketGroup, Logger: n.logger, Engine: eng, Store: n.st,
		InactiveThreshold: d.InactiveThreshold,
		DirOwned:          runtimeDir != "" && filepath.Dir(d.Socket) == filepath.Clean(runtimeDir),
	})
	if err != nil {
		return err
	}
	n.ctl = ctl
	n.closers = append(n.closers, ctl.Close)
	if d.HealthListen != "" {
		if n.health, err = control.ListenHealth(d.HealthListen, eng, n.logger); err != nil {
			return err
		}
		n.closers = append(n.closers, n.health.Close)
	}
	if d.APIListen == "" {
		return nil
	}
	api, err := control.ListenAPI(control.APIConfig{
		Addr: d.APIListen, TLSCert: d.APITLSCert, TLSKey: d.APITLSKey, Tokens: apiTokens(n.cfg.Tokens),
		Server: control.ServerConfig{Logger: n.logger, Engine: eng, Store: n.st, InactiveThreshold: d.InactiveThreshold},
	})
	if err != nil {
		return err
	}
	n.closers = append(n.closers, api.Close)
	ui, err := dashboard.New(dashboard.Config{API: api, Engine: eng, Store: n.st, InactiveThreshold: d.InactiveThreshold, Logger: n.logger})
	if err != nil {
		return err
	}
	api.MountUI(ui)
	// Set last: a reload needs the API only once it can be asked for.
	n.api = api
	return nil
}

// closeServers stops the servers, the last bound first.
func (n *daemonNode) closeServers() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		closeServer(n.closers[i])
	}
}

// start starts the scheduler, the deliverer and then the servers, and
// tells systemd the daemon is ready.
func (n *daemonNode) start(ctx context.Context) error {
	if err := n.sched.Start(ctx); err != nil {
		return err
	}
	if err := n.deliverer.Start(ctx); err != nil {
		return err
	}
	n.ctl.Start()
	if n.health != nil {
		n.health.Start()
	}
	if n.api != nil {
		n.api.Start()
	}
	d := n.cfg.Daemon
	jobs := len(n.sched.Jobs())
	n.logger.Info("schedulerd running", "version", version, "config", n.cfg.Path, "node", d.NodeID,
		"store", storeLogValue(d), "jobs", jobs)
	// READY=1 as soon as the scheduler runs and the sockets serve: the
	// collection that hands the start's garbage back comes after it, so
	// that systemd does not count that time, or an attempt that ends the
	// process meanwhile, against the start.
	notify(daemon.SdNotifyReady, fmt.Sprintf("STATUS=running %d jobs", jobs))
	settleMemory()
	return nil
}

// serve reloads on SIGHUP until ctx ends, then stops the scheduler (which
// waits for running attempts up to shutdown_grace) and the deliverer.
func (n *daemonNode) serve(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-hup:
			_ = n.reload(ctx, "")
		case <-ctx.Done():
			notify(daemon.SdNotifyStopping, "STATUS=stopping: waiting for running attempts")
			n.logger.Info("stopping", "running", n.sched.Running(), "shutdown_grace", n.cfg.Daemon.ShutdownGrace)
			n.sched.Stop(context.Background())
			n.deliverer.Stop()
			return
		}
	}
}

// reload is SIGHUP's and `schedulerd reload`'s, one at a time. actor is
// who asked through the control API (control.Caller.Actor); empty for
// SIGHUP.
func (n *daemonNode) reload(ctx context.Context, actor string) error {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	notify(daemon.SdNotifyReloading, "MONOTONIC_USEC="+strconv.FormatInt(monotonicUsec(), 10))
	leanGC()
	log := n.logger
	if actor != "" {
		log = n.logger.With("actor", actor)
	}
	if c, ok := control.CallerFrom(ctx); ok && c.Remote != "" {
		log = log.With("remote", c.Remote)
	}
	err := reload(ctx, log, n.cfgPath, n.cfg, n.sched, n.api, n.deliverer)
	settleMemory()
	notify(daemon.SdNotifyReady, fmt.Sprintf("STATUS=running %d jobs", len(n.sched.Jobs())))
	return err
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

// closeServer stops a socket server, giving it 5 s.
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
	sched.SetNotifiers(notifierTargets(cfg))
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
