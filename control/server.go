package control

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
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
	// polls and replies are the slots of long polls and attempts replies.
	polls   slots
	replies slots

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

// readWhole reads the whole request body, at most MaxBodyBytes of it, in
// place of r.Body (413 past it), and tells the limit listener that the
// connection's request is being served: a client stuck halfway through
// its body can be evicted to make room, and a request being served cannot.
func readWhole(w http.ResponseWriter, r *http.Request) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "read the request body: "+err.Error())
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok {
		lc.l.markRead(lc)
	}
	return true
}

// checkAttemptToken checks an AttemptTokenHeader value against the
// request: the token must be that of the run in the path, and the request
// POST .../progress or POST .../cancel of it. It returns the attempt the
// request acts as, or why it is refused.
func (s *Server) checkAttemptToken(r *http.Request, header string) (attemptScope, string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/runs/")
	id, action, _ := strings.Cut(rest, "/")
	if !ok || r.Method != http.MethodPost || (action != "progress" && action != "cancel") || id == "" {
		return attemptScope{}, "an attempt token acts only on the progress and cancel of its own run; " +
			"send other requests without it, as a user who may use the socket"
	}
	n, token, _ := strings.Cut(header, ":")
	attempt, err := strconv.Atoi(n)
	if err != nil || attempt < 1 || !s.cfg.Engine.CheckAttemptToken(id, attempt, token) {
		return attemptScope{}, "the attempt token is not one that this daemon gave an attempt of this run"
	}
	return attemptScope{runID: id, attempt: attempt}, ""
}

// routes is the API. Each route needs a caller (CallerFrom) whose role
// allows it, else 403. Each path answers 405 to other methods and every
// other path 404, both with a JSON error; a path with dot segments gets
// 400.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(method, path string, need Role, h http.HandlerFunc) {
		mux.HandleFunc(method+" "+path, requireRole(need, h))
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, path, method))
		})
	}
	handle("GET", "/v1/jobs", RoleRead, s.listJobs)
	handle("POST", "/v1/jobs/{job}/trigger", RoleOperate, s.trigger)
	handle("POST", "/v1/jobs/{job}/pause", RoleOperate, s.pause(true))
	handle("POST", "/v1/jobs/{job}/resume", RoleOperate, s.pause(false))
	handle("POST", "/v1/jobs/{job}/forget", RoleOperate, s.forget)
	handle("GET", "/v1/runs", RoleRead, s.listRuns)
	handle("GET", "/v1/runs/{id}", RoleRead, s.getRun)
	handle("GET", "/v1/runs/{id}/attempts", RoleRead, s.runAttempts)
	handle("GET", "/v1/runs/{id}/attempts/{n}/output", RoleRead, s.attemptOutput)
	handle("GET", "/v1/runs/{id}/events", RoleRead, s.runEvents)
	handle("POST", "/v1/runs/{id}/cancel", RoleOperate, s.cancel)
	handle("POST", "/v1/runs/{id}/rerun", RoleOperate, s.rerun)
	// Progress needs the attempt's token besides (the socket only).
	handle("POST", "/v1/runs/{id}/progress", RoleOperate, s.progress)
	handle("GET", "/v1/nodes", RoleRead, s.listNodes)
	handle("GET", "/v1/notifications", RoleRead, s.listNotifications)
	handle("GET", "/v1/health", RoleRead, s.health)
	handle("POST", "/v1/reload", RoleAdmin, s.reload)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, clip(r.URL.Path)))
	})
	return s.recoverPanics(rejectDotSegments(mux))
}

// recoverPanics turns a panic in a handler into a logged 500.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("control request panicked", "method", r.Method, "path", clip(r.URL.Path), "panic", p)
				writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	js, err := s.cfg.Engine.Jobs(r.Context())
	if err != nil {
		s.engineError(w, r, err, CodeUnknownJob)
		return
	}
	if js == nil {
		js = []JobInfo{}
	}
	writeJSON(w, http.StatusOK, struct {
		Jobs []JobInfo `json:"jobs"`
	}{js})
}

func (s *Server) trigger(w http.ResponseWriter, r *http.Request) {
	var req TriggerRequest
	if !checkQuery(w, r) || !decodeBody(w, r, &req, true) {
		return
	}
	p := TriggerParams{DedupID: req.DedupID, Payload: req.Payload, NotBefore: Time(req.NotBefore), NotAfter: Time(req.NotAfter)}
	switch {
	case len(p.DedupID) > MaxDedupID:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("dedup_id is longer than %d bytes", MaxDedupID))
		return
	case len(p.Payload) > MaxPayload:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("payload is longer than %d bytes", MaxPayload))
		return
	case strings.ContainsRune(p.DedupID, 0) || strings.ContainsRune(p.Payload, 0):
		// The payload reaches the job as an environment variable.
		writeError(w, http.StatusBadRequest, CodeBadRequest, "dedup_id and payload must not contain a NUL byte")
		return
	case !p.NotBefore.IsZero() && !p.NotAfter.IsZero() && !p.NotAfter.After(p.NotBefore):
		writeError(w, http.StatusBadRequest, CodeInvalidWindow, "invalid window: not_after must be after not_before")
		return
	}
	run, err := s.cfg.Engine.Trigger(r.Context(), r.PathValue("job"), p)
	if err != nil {
		s.engineError(w, r, err, CodeUnknownJob)
		return
	}
	writeJSON(w, http.StatusCreated, NewRun(run))
}

func (s *Server) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
			return
		}
		job := r.PathValue("job")
		f := s.cfg.Engine.Resume
		if paused {
			f = s.cfg.Engine.Pause
		}
		if err := f(r.Context(), job); err != nil {
			s.engineError(w, r, err, CodeUnknownJob)
			return
		}
		writeJSON(w, http.StatusOK, PauseReply{Job: job, Paused: paused})
	}
}

func (s *Server) forget(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	job := r.PathValue("job")
	if err := s.cfg.Engine.Forget(r.Context(), job); err != nil {
		s.engineError(w, r, err, CodeNotExpected)
		return
	}
	writeJSON(w, http.StatusOK, ForgetReply{Job: job, Forgotten: true})
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r, "job", "status", "limit") {
		return
	}
	q := r.URL.Query()
	f := store.RunFilter{Job: q.Get("job"), Limit: 100}
	if v := q.Get("status"); v != "" {
		st, err := jobs.ParseStatus(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "status: "+err.Error())
			return
		}
		f.Status = st
	}
	if !queryLimit(w, q, &f.Limit) {
		return
	}
	runs, err := s.cfg.Store.RunsList(r.Context(), f)
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	out := make([]Run, 0, len(runs))
	for _, run := range runs {
		out = append(out, NewRun(run))
	}
	writeJSON(w, http.StatusOK, struct {
		Runs []Run `json:"runs"`
	}{out})
}

// getRun returns a run, after a long poll when wait is given.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r, "wait", "status") {
		return
	}
	q := r.URL.Query()
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "wait: want a duration such as 60s, got "+clip(strconv.Quote(v)))
			return
		}
		wait = min(d, s.cfg.MaxWait)
	}
	var seen jobs.Status
	if v := q.Get("status"); v != "" {
		st, err := jobs.ParseStatus(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "status: "+err.Error())
			return
		}
		seen = st
	}
	ctx := r.Context()
	id := r.PathValue("id")
	run, err := s.cfg.Store.RunGet(ctx, id)
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	if seen == "" {
		seen = run.Status
	}
	if wait > 0 && run.Status == seen && !run.Status.Terminal() {
		if !s.polls.take() {
			s.log.DebugContext(ctx, "long poll refused: busy", "max_long_polls", cap(s.polls))
			writeBusy(w, fmt.Sprintf("%d long polls are waiting already, the most this daemon serves at once; ask again after Retry-After", cap(s.polls)))
			return
		}
		defer s.polls.give()
		// The long poll outlives the server's read and write timeouts.
		rc := http.NewResponseController(w)
		deadline := time.Now().Add(wait + 10*time.Second)
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline)
		run, err = s.waitRun(ctx, id, run, seen, wait)
		if err != nil {
			s.engineError(w, r, err, CodeUnknownRun)
			return
		}
	}
	writeJSON(w, http.StatusOK, NewRun(run))
}

// waitRun polls the run (another node may change it) until its status is
// not seen, it is finished, wait is over, the client is gone or the server
// closes.
func (s *Server) waitRun(ctx context.Context, id string, run *jobs.Run, seen jobs.Status, wait time.Duration) (*jobs.Run, error) {
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	tick := time.NewTicker(s.cfg.WaitPoll)
	defer tick.Stop()
	for run.Status == seen && !run.Status.Terminal() {
		select {
		case <-tick.C:
		case <-timeout.C:
			return run, nil
		case <-ctx.Done():
			return run, nil
		case <-s.done:
			return run, nil
		}
		next, err := s.cfg.Store.RunGet(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return run, nil
			}
			return nil, err
		}
		run = next
	}
	return run, nil
}

// runAttempts streams a run's attempts with their output (replyStream):
// the reply is not built in memory, whatever its size, and at most
// MaxAttemptReplies are made at once.
func (s *Server) runAttempts(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	if !s.replies.take() {
		s.log.DebugContext(r.Context(), "attempts reply refused: busy", "max_attempt_replies", cap(s.replies))
		writeBusy(w, fmt.Sprintf("%d attempts replies are being sent already, the most this daemon makes at once; ask again after Retry-After", cap(s.replies)))
		return
	}
	defer s.replies.give()
	as, err := s.cfg.Store.RunAttempts(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := newReplyStream(w, s.cfg.WriteTimeout).writeAttempts(as); err != nil {
		s.log.DebugContext(r.Context(), "attempts reply cut short", "path", clip(r.URL.Path), "error", err)
	}
}

// attemptOutput streams the output of one attempt as it is stored, as
// text/plain, within the budget of the attempts replies: the attempt's
// output is the one the daemon holds for the reply.
func (s *Server) attemptOutput(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("attempt %s: want a number from 1", clip(strconv.Quote(r.PathValue("n")))))
		return
	}
	if !s.replies.take() {
		s.log.DebugContext(r.Context(), "attempt output refused: busy", "max_attempt_replies", cap(s.replies))
		writeBusy(w, fmt.Sprintf("%d attempts replies are being sent already, the most this daemon makes at once; ask again after Retry-After", cap(s.replies)))
		return
	}
	defer s.replies.give()
	as, err := s.cfg.Store.RunAttemptsClipped(r.Context(), store.AttemptsParams{RunID: r.PathValue("id"), Number: n})
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	if len(as) == 0 {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("run %s has no attempt %d", clip(strconv.Quote(r.PathValue("id"))), n))
		return
	}
	out := as[0].Output
	as[0] = nil
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rs := newReplyStream(w, s.cfg.WriteTimeout)
	for i := 0; i < len(out) && rs.err == nil; i += streamChunk {
		rs.buf = append(rs.buf, out[i:min(i+streamChunk, len(out))]...)
		rs.flush()
	}
	if rs.err != nil {
		s.log.DebugContext(r.Context(), "attempt output cut short", "path", clip(r.URL.Path), "error", rs.err)
	}
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	es, err := s.cfg.Store.RunEvents(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	out := make([]Event, 0, len(es))
	for _, e := range es {
		out = append(out, newEvent(e))
	}
	writeJSON(w, http.StatusOK, struct {
		Events []Event `json:"events"`
	}{out})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	if scope, ok := r.Context().Value(attemptKey{}).(attemptScope); ok && scope.runID != r.PathValue("id") {
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: an attempt token acts on its own run only")
		return
	}
	run, err := s.cfg.Engine.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	writeJSON(w, http.StatusOK, NewRun(run))
}

func (s *Server) rerun(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	run, err := s.cfg.Engine.Rerun(r.Context(), r.PathValue("id"))
	if err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	writeJSON(w, http.StatusCreated, NewRun(run))
}

func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	var req ProgressRequest
	if !checkQuery(w, r) || !decodeBody(w, r, &req, false) {
		return
	}
	switch {
	case req.Attempt < 1:
		writeError(w, http.StatusBadRequest, CodeBadRequest, "attempt: want the job's SCHEDULERD_ATTEMPT, a number from 1")
		return
	case req.Percent < 0 || req.Percent > 100:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("percent: want 0 to 100, got %d", req.Percent))
		return
	case len(req.Message) > MaxProgressMessage:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("message is longer than %d bytes", MaxProgressMessage))
		return
	}
	// Only the attempt's own process reports its progress.
	scope, ok := r.Context().Value(attemptKey{}).(attemptScope)
	if c, _ := CallerFrom(r.Context()); c.Via == ViaAPI {
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: progress is reported on the control socket only, "+
			"by `schedulerd progress` from inside the job")
		return
	}
	switch {
	case !ok:
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: progress needs the attempt's token "+
			"(SCHEDULERD_ATTEMPT_TOKEN, sent by `schedulerd progress` from inside the job) in the "+AttemptTokenHeader+" header")
		return
	case scope.runID != r.PathValue("id"):
		writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: an attempt token acts on its own run only")
		return
	case scope.attempt != req.Attempt:
		writeError(w, http.StatusForbidden, CodePermissionDenied, fmt.Sprintf(
			"permission denied: the attempt token is that of attempt %d, not %d", scope.attempt, req.Attempt))
		return
	}
	if err := s.cfg.Engine.Progress(r.Context(), r.PathValue("id"), req.Attempt, req.Percent, req.Message); err != nil {
		s.engineError(w, r, err, CodeUnknownRun)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	ns, err := s.cfg.Store.NodesList(r.Context(), true)
	if err != nil {
		s.engineError(w, r, err, CodeNotFound)
		return
	}
	out := make([]Node, 0, len(ns))
	for _, n := range ns {
		out = append(out, NewNode(n, s.cfg.InactiveThreshold))
	}
	writeJSON(w, http.StatusOK, struct {
		Nodes []Node `json:"nodes"`
	}{out})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) {
		return
	}
	writeHealth(w, s.gate.health(r.Context()))
}

func writeHealth(w http.ResponseWriter, h Health) {
	if h.Problems == nil {
		h.Problems = []string{}
	}
	status := http.StatusOK
	if !h.OK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if !checkQuery(w, r) || !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	if err := s.cfg.Engine.Reload(r.Context()); err != nil {
		writeError(w, http.StatusUnprocessableEntity, CodeReloadRejected, "reload rejected, the running config stays: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ReloadReply{Applied: true})
}

// engineError maps an error of the engine or the store to a reply.
// notFound is the code of store.ErrNotFound on this route.
func (s *Server) engineError(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	msg := err.Error()
	switch {
	case errors.Is(err, ErrUnknownJob):
		writeError(w, http.StatusNotFound, CodeUnknownJob, msg)
	case errors.Is(err, ErrUnknownRun):
		writeError(w, http.StatusNotFound, CodeUnknownRun, msg)
	case errors.Is(err, store.ErrNotFound):
		if id := r.PathValue("id"); notFound == CodeUnknownRun && id != "" {
			msg = fmt.Sprintf("unknown run %s", clip(strconv.Quote(id)))
		}
		writeError(w, http.StatusNotFound, notFound, msg)
	case errors.Is(err, ErrDuplicate), errors.Is(err, store.ErrDuplicate):
		writeError(w, http.StatusConflict, CodeDuplicate, msg)
	case errors.Is(err, ErrInvalidWindow), errors.Is(err, jobs.ErrWindow):
		writeError(w, http.StatusBadRequest, CodeInvalidWindow, msg)
	case errors.Is(err, ErrFenced), errors.Is(err, store.ErrFenced):
		writeError(w, http.StatusConflict, CodeFenced, msg)
	case errors.Is(err, ErrInvalidTransition), errors.Is(err, jobs.ErrInvalidTransition):
		writeError(w, http.StatusConflict, CodeInvalidTransition, msg)
	case errors.Is(err, ErrNoSchedule):
		writeError(w, http.StatusConflict, CodeNoSchedule, msg)
	case errors.Is(err, ErrJobDeclared):
		writeError(w, http.StatusConflict, CodeJobDeclared, msg)
	case errors.Is(err, ErrNotExpected):
		writeError(w, http.StatusNotFound, CodeNotExpected, msg)
	case errors.Is(err, ErrReloadRejected):
		writeError(w, http.StatusUnprocessableEntity, CodeReloadRejected, msg)
	case errors.Is(err, ErrBadRequest):
		writeError(w, http.StatusBadRequest, CodeBadRequest, msg)
	default:
		s.log.ErrorContext(r.Context(), "control request failed", "method", r.Method, "path", clip(r.URL.Path), "error", err)
		writeError(w, http.StatusInternalServerError, CodeInternal, msg)
	}
}

// checkQuery rejects query parameters other than allowed, and repeated ones.
func checkQuery(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "malformed query: "+err.Error())
		return false
	}
	for k, vs := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		switch {
		case !ok:
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("unknown query parameter %s", clip(strconv.Quote(k))))
			return false
		case len(vs) > 1:
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("query parameter %s is given twice", clip(strconv.Quote(k))))
			return false
		}
	}
	return true
}

// decodeBody reads a JSON object into v, rejecting unknown fields, trailing
// data and bodies over MaxBodyBytes. An empty body is accepted when
// allowEmpty and leaves v alone.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "read the request body: "+err.Error())
		return false
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		if allowEmpty {
			return true
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the request needs a JSON object body")
		return false
	}
	if data[0] != '{' {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the request body must be a JSON object")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "invalid JSON body: "+clip(err.Error()))
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "invalid JSON body: data after the object")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encode reply: " + err.Error(), Code: CodeInternal})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

// clip shortens text that comes from a request before it is echoed.
func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// userName returns the name of uid, or "".
func userName(uid uint32) string {
	u, err := lookupUserID(uid)
	if err != nil {
		return ""
	}
	return u.Username
}

// queryLimit reads the query's limit, 1 to 10000, into *limit when it is
// given; a bad one gets 400 and false.
func queryLimit(w http.ResponseWriter, q url.Values, limit *int) bool {
	v := q.Get("limit")
	if v == "" {
		return true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 10000 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "limit: want a number from 1 to 10000, got "+clip(strconv.Quote(v)))
		return false
	}
	*limit = n
	return true
}
