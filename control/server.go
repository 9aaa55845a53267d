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
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// Defaults of ServerConfig.
const (
	DefaultMaxConns          = 64
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxWait           = 5 * time.Minute
	// DefaultMaxAttemptReplies bounds the attempts replies sent at once.
	DefaultMaxAttemptReplies = 2
	// DefaultMaxFollows bounds the outputs followed at once.
	DefaultMaxFollows = 8
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes = 64 << 10
	// maxHeaderBytes bounds the request line and headers.
	maxHeaderBytes = 16 << 10
)

// ServerConfig configures the socket server.
type ServerConfig struct {
	// Path is the socket file. Its directory is made (0750) if missing.
	Path string
	// Group is socket_group: a group name or numeric id whose members may
	// use the socket besides root and the daemon's user; "" for none.
	Group string
	// DirOwned says that the socket's directory was made for the daemon
	// (systemd's RuntimeDirectory): like a directory Listen makes, it is set
	// to 0750 and given to Group. Any other existing directory is left alone.
	DirOwned bool
	Logger   *slog.Logger
	Engine   Engine
	// Store serves the reads: runs, attempts, events and nodes.
	Store store.Store
	// MaxConns bounds the connections served at once (default 64). When
	// all are taken, a new connection evicts the oldest one that has not
	// sent a request, or waits for a free slot.
	MaxConns int
	// MaxLongPolls bounds the long polls (GET /v1/runs/{id}?wait=) that
	// wait at once (default MaxConns/4, at least 1), and MaxAttemptReplies
	// the replies of GET /v1/runs/{id}/attempts, which carry the output,
	// being made at once (default 2). A request past either bound is
	// refused at once with 429 busy and a Retry-After, so that these
	// requests never hold the connections that short ones need.
	MaxLongPolls      int
	MaxAttemptReplies int
	// MaxFollows bounds the outputs followed at once (GET
	// /v1/runs/{id}/output?follow=1, default DefaultMaxFollows); past it,
	// 429 busy as above. A follow holds its connection while the attempt
	// runs.
	MaxFollows int
	// InactiveThreshold decides the state a node is shown in (default 2m).
	InactiveThreshold time.Duration

	// Timeouts; zero means the default. WriteTimeout does not bound a long
	// poll (GET /v1/runs/{id}?wait=), which MaxWait bounds instead.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxWait           time.Duration
	// WaitPoll is how often a long poll reads the run (default 250ms).
	WaitPoll time.Duration
}

func (c ServerConfig) withDefaults() ServerConfig {
	c.MaxConns = cmp.Or(c.MaxConns, DefaultMaxConns)
	c.MaxLongPolls = cmp.Or(c.MaxLongPolls, max(c.MaxConns/4, 1))
	c.MaxAttemptReplies = cmp.Or(c.MaxAttemptReplies, DefaultMaxAttemptReplies)
	c.MaxFollows = cmp.Or(c.MaxFollows, DefaultMaxFollows)
	c.InactiveThreshold = cmp.Or(c.InactiveThreshold, 2*time.Minute)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	c.WaitPoll = cmp.Or(c.WaitPoll, 250*time.Millisecond)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Server serves the control API on a unix socket.
type Server struct {
	cfg     ServerConfig
	log     *slog.Logger
	handler http.Handler
	peers   *peerPolicy
	gate    *healthGate
	// polls, replies and follows are the slots of long polls, attempts
	// replies and followed outputs; stats those of the stats of runs
	// (maxRunStats).
	polls   slots
	replies slots
	follows slots
	stats   slots

	sock   *socketFile
	ln     *limitListener
	http   *http.Server
	done   chan struct{} // closed by Close: long polls return
	closed sync.Once
	served chan struct{} // closed when Serve returns
	serve  sync.Once
}

// newServer builds the server and its handler, without a socket.
func newServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Engine == nil || cfg.Store == nil {
		return nil, errors.New("control: the server needs an engine and a store")
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "control"),
		done:    make(chan struct{}),
		served:  make(chan struct{}),
		gate:    newHealthGate(cfg.Engine),
		polls:   newSlots(cfg.MaxLongPolls),
		replies: newSlots(cfg.MaxAttemptReplies),
		follows: newSlots(cfg.MaxFollows),
		stats:   newSlots(maxRunStats),
	}
	s.handler = s.routes()
	return s, nil
}

// Listen binds the control socket at cfg.Path, applying the rules of the
// package doc: a stale socket file left by a killed daemon is replaced, a
// live daemon on the path or a symlink at it is refused. Requests are not
// served until Serve or Start.
func Listen(cfg ServerConfig) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	if s.peers, err = newPeerPolicy(s.cfg.Group); err != nil {
		return nil, fmt.Errorf("control socket: socket_group: %w", err)
	}
	s.sock, err = bindSocket(s.cfg.Path, s.peers.gid, s.cfg.Group, s.cfg.DirOwned, s.log)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s.ln = newLimitListener(s.sock.ln, s.cfg.MaxConns)
	s.http = &http.Server{
		Handler:           s.checkPeer(s.handler),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       s.connContext,
		ConnState:         s.ln.track,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.log.Info("control socket listening", "socket", s.cfg.Path, "socket_group", s.cfg.Group, "max_conns", s.cfg.MaxConns)
	return s, nil
}

// Path is the socket file.
func (s *Server) Path() string { return s.cfg.Path }

// Handler is the API without the peer check, for tests that do not go
// through a socket: its requests act as an allowed user of the socket.
func (s *Server) Handler() http.Handler {
	local := Caller{Name: "local", Role: RoleAdmin, Via: ViaSocket}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handler.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), local)))
	})
}

// Serve serves requests until Close; it then returns nil.
func (s *Server) Serve() error {
	var err error
	s.serve.Do(func() {
		defer close(s.served)
		err = s.http.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	})
	return err
}

// Start serves in a goroutine; an error of Serve is logged.
func (s *Server) Start() {
	go func() {
		if err := s.Serve(); err != nil {
			s.log.Error("control socket stopped", "error", err)
		}
	}()
}

// Close stops accepting connections, makes long polls return, waits until
// ctx for the requests being served, then closes the rest and removes the
// socket file (unless another process has replaced it).
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closed.Do(func() {
		close(s.done)
		s.ln.shutdown()
		err = s.http.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, s.http.Close())
		}
		_ = s.ln.Close() // when Serve never ran
		s.sock.remove(s.log)
	})
	return err
}

type ctxKey struct{}

// connKey carries the *limitConn of a request's connection.
type connKey struct{}

// peerInfo is what the connection context carries about the peer.
type peerInfo struct {
	known   bool // SO_PEERCRED answered
	allowed bool // root, the daemon's user or a member of socket_group
	uid     uint32
	gid     uint32
	pid     int32
	// caller is the peer's user, as the handlers see it, when allowed.
	caller Caller
}

// attemptKey carries the attemptScope of a request that presented a valid
// attempt token.
type attemptKey struct{}

// attemptScope is the one attempt a request with a valid token acts as.
type attemptScope struct {
	runID   string
	attempt int
}

// connContext reads the peer of a new connection once and stores it for
// checkPeer.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	cred, err := peerCredentials(c)
	if err != nil {
		s.log.Warn("control socket: refused a connection whose peer is unknown", "error", err)
		return context.WithValue(ctx, ctxKey{}, peerInfo{})
	}
	if lc, isLimited := c.(*limitConn); isLimited {
		ctx = context.WithValue(ctx, connKey{}, lc)
	}
	p := peerInfo{known: true, allowed: s.peers.allowed(cred), uid: cred.Uid, gid: cred.Gid, pid: cred.Pid}
	if p.allowed {
		name := userName(cred.Uid)
		if name == "" {
			name = fmt.Sprintf("uid %d", cred.Uid)
		}
		p.caller = Caller{Name: name, Role: RoleAdmin, Via: ViaSocket}
	}
	return context.WithValue(ctx, ctxKey{}, p)
}

// checkPeer refuses the requests of connections whose peer may not use the
// socket, before anything is read or done. A request that presents an
// attempt token (AttemptTokenHeader) is a job's: it is served only when
// the token is that of the run it names and it asks for that run's
// progress or cancel.
func (s *Server) checkPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := r.Context().Value(ctxKey{}).(peerInfo)
		if !p.allowed {
			if p.known {
				s.log.Warn("control socket: refused a connection from a user who may not use it",
					"pid", p.pid, "uid", p.uid, "gid", p.gid, "user", userName(p.uid))
			}
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusForbidden, CodePermissionDenied, fmt.Sprintf(
				"permission denied: uid %d may not use this socket (allowed: root, the daemon's user and members of socket_group)", p.uid))
			return
		}
		if tok := r.Header.Get(AttemptTokenHeader); tok != "" {
			scope, msg := s.checkAttemptToken(r, tok)
			if msg != "" {
				s.log.Warn("control socket: refused a request with an attempt token", "reason", msg,
					"method", r.Method, "path", clip(r.URL.Path), "pid", p.pid, "uid", p.uid, "user", userName(p.uid))
				writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: "+msg)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), attemptKey{}, scope))
		}
		if !readWhole(w, r) {
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), p.caller)))
	})
}
