package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of HealthConfig. The health listener serves scrapers and probes
// that send one small GET and read a small reply: its timeouts are short,
// and it holds few connections.
const (
	DefaultHealthMaxConns          = 32
	DefaultHealthReadHeaderTimeout = 2 * time.Second
	DefaultHealthIdleTimeout       = 5 * time.Second
	healthReadTimeout              = 5 * time.Second
	// healthWriteTimeout covers a /readyz that waits for the health check
	// (healthTimeout at most).
	healthWriteTimeout = healthTimeout + 5*time.Second
)

// HealthConfig configures the health listener.
type HealthConfig struct {
	// Addr is health_listen, host:port.
	Addr   string
	Engine Engine
	Logger *slog.Logger
	// MaxConns bounds the connections held at once (default 32). Past it,
	// new connections wait in the kernel's queue, holding no descriptor of
	// the daemon, and a connection that has sent no request is closed to
	// make room, as on the control socket.
	MaxConns int
	// ReadHeaderTimeout bounds how long a connection may take to send a
	// request's headers (default 2s), IdleTimeout how long it stays open
	// between requests (default 5s).
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
}

func (c HealthConfig) withDefaults() HealthConfig {
	c.MaxConns = cmp.Or(c.MaxConns, DefaultHealthMaxConns)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, DefaultHealthReadHeaderTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultHealthIdleTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// HealthServer serves GET /healthz, /readyz and /metrics on TCP
// (health_listen): /healthz is 200 whenever the process answers; /readyz
// is 200 when the node is healthy and 503 with the problems otherwise;
// /metrics is the node's figures in the Prometheus text format. It changes
// nothing and needs no credentials. Nothing its clients do takes more than
// MaxConns descriptors of the daemon, which its jobs need.
type HealthServer struct {
	ln    *limitListener
	count *countListener
	http  *http.Server
	log   *slog.Logger
}

// ListenHealth binds addr (host:port) for the health endpoints, with the
// defaults of HealthConfig.
func ListenHealth(addr string, engine Engine, logger *slog.Logger) (*HealthServer, error) {
	return ListenHealthConfig(HealthConfig{Addr: addr, Engine: engine, Logger: logger})
}

// ListenHealthConfig binds cfg.Addr for the health endpoints. It warns when
// the address is not a loopback one: the endpoints need no credentials.
func ListenHealthConfig(cfg HealthConfig) (*HealthServer, error) {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("component", "health")
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("health_listen: %w", err)
	}
	count := &countListener{Listener: ln}
	hs := &HealthServer{ln: newLimitListener(count, cfg.MaxConns), count: count, log: log}
	hs.http = &http.Server{
		Handler:           markRead(HealthHandler(cfg.Engine)),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       healthReadTimeout,
		WriteTimeout:      healthWriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       withLimitConn,
		ConnState:         hs.ln.track,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if !loopback(ln.Addr()) {
		log.Warn("health_listen is not a loopback address: /healthz, /readyz and /metrics answer anyone who reaches it, "+
			"without credentials; bind 127.0.0.1 or firewall the port unless scrapers on other hosts need it",
			"addr", ln.Addr().String())
	}
	log.Info("health endpoints listening", "addr", ln.Addr().String(), "max_conns", cfg.MaxConns)
	return hs, nil
}

// loopback reports whether addr is a loopback address; a wildcard address
// (0.0.0.0, ::) is not.
func loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// countListener counts the connections accepted and not yet closed: the
// descriptors the listener holds. peak is the most there were at once.
type countListener struct {
	net.Listener
	open, peak atomic.Int64
}

func (l *countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

// countedConn is a connection of a countListener.
type countedConn struct {
	net.Conn
	l    *countListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// liveness answers GET /healthz: 200 whenever the process answers.
func liveness(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// withLimitConn puts the connection's *limitConn in its context, for
// markRead and readWhole.
func withLimitConn(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := limitConnOf(c); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// markRead tells the limit listener that the connection's request is being
// served: it is no longer closed to make room for new connections. A
// health request has no body; its headers are read when it gets here.
func markRead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok {
			lc.l.markRead(lc)
		}
		next.ServeHTTP(w, r)
	})
}

// Addr is the bound address.
func (hs *HealthServer) Addr() net.Addr { return hs.ln.Addr() }

// Start serves in a goroutine.
func (hs *HealthServer) Start() {
	go func() {
		if err := hs.http.Serve(hs.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			hs.log.Error("health endpoints stopped", "error", err)
		}
	}()
}

// Close stops the server, waiting until ctx for requests being served.
func (hs *HealthServer) Close(ctx context.Context) error {
	hs.ln.shutdown()
	err := hs.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, hs.http.Close())
	}
	_ = hs.ln.Close() // when Serve never ran
	return err
}

// HealthHandler serves /healthz and /readyz, and /metrics when the engine
// is a MetricsSource. /readyz shares one health check among the requests
// that come at once and serves its result for healthTTL (healthGate).
func HealthHandler(engine Engine) http.Handler {
	gate := newHealthGate(engine)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", liveness)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		writeHealth(w, gate.health(ctx))
	})
	endpoints := "GET /healthz or /readyz"
	if src, ok := engine.(MetricsSource); ok {
		mux.HandleFunc("GET /metrics", serveMetrics(src))
		endpoints = "GET /healthz, /readyz or /metrics"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such endpoint; use "+endpoints)
	})
	return rejectDotSegments(mux)
}
