package control

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of APIConfig.
const (
	// DefaultAPIRate is how many requests a second each token may make,
	// on average; DefaultAPIBurst how many at once after a pause. A
	// `runs show` makes three requests and a `trigger --wait` one per
	// status change; a script that triggers a hundred runs in a row gets
	// them at once, then twenty a second.
	DefaultAPIRate  = 20
	DefaultAPIBurst = 100
)

// Over a network a client takes longer than on the socket to send its
// first bytes (a TLS handshake is a round trip or two before them) and its
// body: when every connection is taken, the API evicts one that has sent
// nothing for apiSilentAge, or not its whole request in apiSlowAge, to
// make room.
const (
	apiSilentAge = 250 * time.Millisecond
	apiSlowAge   = 2 * time.Second
)

// APIConfig configures the HTTP API over TCP (api_listen).
type APIConfig struct {
	// Addr is api_listen, host:port.
	Addr string
	// TLSCert and TLSKey are the PEM files of the certificate (its chain
	// after it) and its key; "" for plain HTTP. They are read at Listen
	// and again by PrepareReload.
	TLSCert, TLSKey string
	// Tokens are the bearer tokens the API takes.
	Tokens []APIToken
	// Server is the configuration of the routes and their bounds, as the
	// socket has them: Engine, Store, Logger, MaxConns, MaxLongPolls,
	// MaxAttemptReplies, the timeouts. Path, Group and DirOwned are not
	// used.
	Server ServerConfig
	// Rate is how many requests a second each token may make on average
	// (default DefaultAPIRate), Burst how many at once (default
	// DefaultAPIBurst). Past them a request gets 429 with a Retry-After.
	Rate  rate.Limit
	Burst int
}

// APIServer serves the /v1 routes of the socket on TCP (api_listen), to
// the holders of bearer tokens, with the bounds of the socket: see the
// package documentation.
type APIServer struct {
	cfg APIConfig
	srv *Server // the routes, their slots and their health gate
	log *slog.Logger

	tokens atomic.Pointer[TokenSet]
	cert   atomic.Pointer[tls.Certificate] // nil without TLS

	limMu    sync.Mutex
	limiters map[string]*rate.Limiter // by token name

	// fails counts the failed authentications of each client address.
	fails *authLimiter
	// refusals logs the refused requests, a count a minute past the
	// first: a client that tries token after token does not flood the
	// log.
	refusals *RefusalLog

	handler http.Handler
	// ui serves UIPath when set (MountUI).
	ui    atomic.Pointer[http.Handler]
	ln    *limitListener
	count *countListener // the connections held, for tests
	http  *http.Server
}

// ListenAPI binds cfg.Addr for the HTTP API, after reading the
// certificate when TLS is configured. It warns when the address is not a
// loopback one and there is no TLS, and when there are no tokens.
// Requests are not served until Start.
func ListenAPI(cfg APIConfig) (*APIServer, error) {
	s, err := newAPIServer(cfg)
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if s.tls() {
		cert, err := s.loadCertificate()
		if err != nil {
			return nil, fmt.Errorf("api_tls_cert, api_tls_key: %w", err)
		}
		s.cert.Store(cert)
		tlsConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return s.cert.Load(), nil
			},
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("api_listen: %w", err)
	}
	s.count = &countListener{Listener: ln}
	s.ln = newLimitListener(s.count, s.srv.cfg.MaxConns)
	s.ln.silent, s.ln.slow = apiSilentAge, apiSlowAge
	// HTTP/1.1 alone: one request at a time on a connection, so that the
	// bounds on connections bound the requests too.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.srv.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.srv.cfg.ReadTimeout,
		WriteTimeout:      s.srv.cfg.WriteTimeout,
		IdleTimeout:       s.srv.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       withLimitConn,
		ConnState:         s.ln.track,
		TLSConfig:         tlsConfig,
		Protocols:         &protocols,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if !s.tls() && !loopback(ln.Addr()) {
		s.log.Warn("api_listen is not a loopback address and has no TLS: tokens and replies cross the network in clear; "+
			"set api_tls_cert and api_tls_key, or bind 127.0.0.1 behind a reverse proxy that does TLS",
			"addr", ln.Addr().String())
	}
	n := s.tokens.Load().Len()
	if n == 0 {
		s.log.Warn("api_listen is set but the config has no [[token]]: every request but GET /healthz gets 401; "+
			"make one with `schedulerd token new NAME --role ROLE`", "addr", ln.Addr().String())
	}
	s.log.Info("HTTP API listening", "addr", ln.Addr().String(), "tls", s.tls(), "tokens", n,
		"max_conns", s.srv.cfg.MaxConns, "rate", float64(s.cfg.Rate), "burst", s.cfg.Burst)
	return s, nil
}

// newAPIServer builds the server and its handler, without a listener.
func newAPIServer(cfg APIConfig) (*APIServer, error) {
	cfg.Rate = cmp.Or(cfg.Rate, DefaultAPIRate)
	cfg.Burst = cmp.Or(cfg.Burst, DefaultAPIBurst)
	srv, err := newServer(cfg.Server)
	if err != nil {
		return nil, err
	}
	set, err := NewTokenSet(cfg.Tokens)
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	s := &APIServer{
		cfg: cfg, srv: srv, log: srv.cfg.Logger.With("component", "api"),
		limiters: map[string]*rate.Limiter{},
		fails:    newAuthLimiter(),
	}
	s.refusals = NewRefusalLog(s.log, "HTTP API: ")
	s.tokens.Store(set)
	s.handler = s.routes()
	return s, nil
}

func (s *APIServer) tls() bool { return s.cfg.TLSCert != "" }

// Addr is the bound address.
func (s *APIServer) Addr() net.Addr { return s.ln.Addr() }

// Start serves in a goroutine; an error of Serve is logged.
func (s *APIServer) Start() {
	go func() {
		var err error
		if s.tls() {
			err = s.http.ServeTLS(s.ln, "", "")
		} else {
			err = s.http.Serve(s.ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP API stopped", "error", err)
		}
	}()
}

// Close stops accepting connections, makes long polls return, and waits
// until ctx for the requests being served, then closes the rest.
func (s *APIServer) Close(ctx context.Context) error {
	s.srv.closed.Do(func() { close(s.srv.done) })
	s.ln.shutdown()
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.http.Close())
	}
	_ = s.ln.Close() // when Serve never ran
	return err
}

// Authenticate returns the caller that token, presented by request r,
// stands for. A token that is not one of the API's, or not of their form
// (WellFormedToken: it is refused before it is hashed), is a failed
// authentication of r's client address (ClientAddr), logged as a
// refusal: the error is ErrUnknownToken, or *TooManyFailuresError when
// the address has failed past its budget. A token of the API is never
// refused, whatever its address failed before. For the bearer check and
// for other handlers of the listener, such as the dashboard's login.
func (s *APIServer) Authenticate(r *http.Request, token string) (Caller, error) {
	if WellFormedToken(token) {
		if t, ok := s.tokens.Load().Lookup(token); ok {
			return Caller{Name: t.Name, Role: t.Role, Via: ViaAPI, Remote: r.RemoteAddr}, nil
		}
	}
	addr := ClientAddr(r)
	wait := s.fails.fail(addr, time.Now())
	s.refusals.Refused(r, "a token that is not one of the config's")
	if wait > 0 {
		return Caller{}, &TooManyFailuresError{Addr: addr, RetryAfter: wait}
	}
	return Caller{}, ErrUnknownToken
}

// Holder returns the caller of the token whose SHA-256 is sum, while that
// token is one of the API's: for the dashboard's sessions, which keep the
// hash of the token they were opened with, so that a token removed or
// changed by a reload ends them.
func (s *APIServer) Holder(sum [sha256.Size]byte) (Caller, bool) {
	t, ok := s.tokens.Load().holder(sum)
	if !ok {
		return Caller{}, false
	}
	return Caller{Name: t.Name, Role: t.Role, Via: ViaAPI}, true
}

// WriteRetryAfter sets a Retry-After header of whole seconds, at least
// one, for a wait of d.
func WriteRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
}

// Allow takes one request from the budget of the caller's token, or
// answers 429 rate_limited with a Retry-After and returns false.
func (s *APIServer) Allow(w http.ResponseWriter, c Caller) bool {
	s.limMu.Lock()
	lim := s.limiters[c.Name]
	if lim == nil {
		lim = rate.NewLimiter(s.cfg.Rate, s.cfg.Burst)
		s.limiters[c.Name] = lim
	}
	s.limMu.Unlock()
	now := time.Now()
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d == 0 {
		return true
	}
	r.CancelAt(now)
	secs := 1
	if !r.OK() || d == rate.InfDuration {
		secs = 60
	} else if d > time.Second {
		secs = int(math.Ceil(d.Seconds()))
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, CodeRateLimited, fmt.Sprintf(
		"rate limited: the token %q may make %g requests a second on average, %d at once; ask again after Retry-After",
		c.Name, float64(s.cfg.Rate), s.cfg.Burst))
	return false
}

// UIPath is where MountUI serves its handler: /ui/ and the paths under it,
// and /ui.
const UIPath = "/ui/"

// FaviconPath is the icon a browser asks for on its own; MountUI's
// handler serves it too.
const FaviconPath = "/favicon.ico"

// MountUI serves h at UIPath and FaviconPath, outside the bearer check: h authenticates
// its requests itself (Authenticate), takes them from the caller's rate
// (Allow) and acts through the routes of the API (Act). Its requests have
// the API's bounds: connections, timeouts, and a body of at most
// MaxBodyBytes, read before h is called. Without it, UIPath is a path
// like any other: 401 without a token. Call it before Start.
func (s *APIServer) MountUI(h http.Handler) { s.ui.Store(&h) }

// Act serves one request of the /v1 routes as caller c and returns the
// reply's status and body, for a handler of UIPath that has authenticated
// c: the route's role check applies to c as to a request with c's token.
// path is a URL path with its segments escaped (url.PathEscape) and may
// carry a query; body is the JSON body, nil for none. The request is
// taken from no rate: the handler took its own from c's (Allow).
func (s *APIServer) Act(ctx context.Context, c Caller, method, path string, body []byte) (int, []byte) {
	r, err := http.NewRequestWithContext(WithCaller(ctx, c), method, path, bytes.NewReader(body))
	if err != nil || !strings.HasPrefix(path, "/v1/") {
		b, _ := json.Marshal(errorBody{Error: fmt.Sprintf("no such endpoint: %s %s", method, clip(path)), Code: CodeNotFound})
		return http.StatusNotFound, b
	}
	rec := &replyRecorder{header: http.Header{}}
	s.srv.handler.ServeHTTP(rec, r)
	return cmp.Or(rec.status, http.StatusOK), rec.body.Bytes()
}

// Relay serves a GET of the /v1 routes as caller c and writes its reply
// to w as the route writes it, streamed, for a handler of UIPath that has
// authenticated c and taken its rate (Allow): a reply too large to hold,
// such as an attempt's output, within the route's own bounds. path is
// as for Act; r is the handler's request, whose context and connection
// the route's reply uses.
func (s *APIServer) Relay(w http.ResponseWriter, r *http.Request, c Caller, path string) {
	u, err := url.Parse(path)
	if err != nil || !strings.HasPrefix(path, "/v1/") || u.Host != "" || u.Scheme != "" {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint: GET %s", clip(path)))
		return
	}
	rr := r.Clone(WithCaller(r.Context(), c))
	rr.Method, rr.URL, rr.RequestURI, rr.Body, rr.ContentLength = http.MethodGet, u, u.RequestURI(), http.NoBody, 0
	s.srv.handler.ServeHTTP(w, rr)
}

// replyRecorder keeps the reply of a request that Act serves.
type replyRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rr *replyRecorder) Header() http.Header { return rr.header }

func (rr *replyRecorder) WriteHeader(status int) {
	if rr.status == 0 {
		rr.status = status
	}
}

func (rr *replyRecorder) Write(b []byte) (int, error) {
	rr.WriteHeader(http.StatusOK)
	return rr.body.Write(b)
}

// routes are GET /healthz, open to all, the handler of MountUI, and
// behind the token check the routes of the socket and GET /metrics.
// Anything else gets 401 without a token and 404 with one: the paths say
// nothing to a client without one.
func (s *APIServer) routes() http.Handler {
	authed := http.NewServeMux()
	authed.Handle("/v1/", s.srv.handler)
	if src, ok := s.srv.cfg.Engine.(MetricsSource); ok {
		authed.HandleFunc("GET /metrics", requireRole(RoleRead, serveMetrics(src)))
	}
	authed.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, clip(r.URL.Path)))
	})
	// No ServeMux in front of the token check: it would answer some paths
	// (an empty one) with a redirect before the check.
	private := s.authenticate(authed)
	return s.srv.recoverPanics(rejectDotSegments(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tls() {
			w.Header().Set("Strict-Transport-Security", strictTransportSecurity)
		}
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			liveness(w, r)
			return
		}
		if ui := s.ui.Load(); ui != nil && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, UIPath) || r.URL.Path == FaviconPath) {
			if readWhole(w, r) {
				(*ui).ServeHTTP(w, r)
			}
			return
		}
		private.ServeHTTP(w, r)
	})))
}

// strictTransportSecurity is sent with every reply of an API that speaks
// TLS (api_tls_cert): a browser that has seen it goes to the host over
// HTTPS alone for a year, whatever link or address bar says http://.
const strictTransportSecurity = "max-age=31536000"

// unauthorizedMessage is the one reply to a request without a valid token.
const unauthorizedMessage = "unauthorized: send a token of this API as Authorization: Bearer TOKEN"

// authenticate serves next to requests with a valid bearer token, within
// the token's rate, with the caller in their context. A missing,
// malformed and unknown token get the same 401, header for header; past
// the failures an address may make, a token that is not valid gets 429
// with a Retry-After instead (Authenticate).
func (s *APIServer) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers := r.Header.Values("Authorization")
		if len(headers) == 0 {
			if browserAsset(r.URL.Path) {
				s.log.DebugContext(r.Context(), "HTTP API: a request without a token for what a browser asks on its own",
					"remote", r.RemoteAddr, "path", clip(r.URL.Path))
			} else {
				s.refusals.Refused(r, "a request without a token")
			}
			unauthorized(w)
			return
		}
		token := ""
		if len(headers) == 1 {
			token, _ = bearerToken(headers[0])
		}
		c, err := s.Authenticate(r, token)
		if tooMany := (*TooManyFailuresError)(nil); errors.As(err, &tooMany) {
			WriteRetryAfter(w.Header(), tooMany.RetryAfter)
			writeError(w, http.StatusTooManyRequests, CodeRateLimited,
				"too many requests without a valid token from this address: ask again after Retry-After")
			return
		} else if err != nil {
			unauthorized(w)
			return
		}
		if !s.Allow(w, c) {
			return
		}
		if r.Header.Get(AttemptTokenHeader) != "" {
			writeError(w, http.StatusForbidden, CodePermissionDenied,
				"permission denied: attempt tokens are taken on the control socket only; send the request without "+AttemptTokenHeader)
			return
		}
		if !readWhole(w, r) {
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
	})
}

// unauthorized writes the one reply to a request without a valid token.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="schedulerd"`)
	writeError(w, http.StatusUnauthorized, CodeUnauthorized, unauthorizedMessage)
}

// browserAsset reports whether path is one that browsers ask for on their
// own (an icon, robots.txt): a request for it without a token is no
// probe, and is not logged as a refusal.
func browserAsset(path string) bool {
	return path == "/favicon.ico" || path == "/robots.txt" ||
		(strings.HasPrefix(path, "/apple-touch-icon") && strings.HasSuffix(path, ".png"))
}

// refusalEvery is how long the RefusalLog counts refusals after it has
// logged one.
const refusalEvery = time.Minute

// RefusalLog logs refused requests so that a probe is seen and a flood
// does not fill the log: the first refusal after a quiet minute is logged
// at once, with what was refused and from where; the others of that
// minute are counted, and told in one line at its end (how many, from
// how many addresses, and the last of them), and so on each minute while
// they go on.
type RefusalLog struct {
	log    *slog.Logger
	prefix string

	mu    sync.Mutex
	timer *time.Timer // counting the minute; nil when quiet
	count int64
	addrs map[string]struct{}
	last  []any
}

// maxRefusalAddrs bounds the addresses a minute's count tells apart.
const maxRefusalAddrs = 1024

// NewRefusalLog returns a RefusalLog whose lines start with prefix.
func NewRefusalLog(log *slog.Logger, prefix string) *RefusalLog {
	return &RefusalLog{log: log, prefix: prefix, addrs: map[string]struct{}{}}
}

// Refused logs, or counts, the refusal of r: what was refused.
func (l *RefusalLog) Refused(r *http.Request, what string) {
	attrs := []any{"remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer == nil {
		l.log.Warn(l.prefix+"refused "+what, attrs...)
		l.timer = time.AfterFunc(refusalEvery, l.tell)
		return
	}
	l.count++
	if len(l.addrs) < maxRefusalAddrs {
		l.addrs[ClientAddr(r)] = struct{}{}
	}
	l.last = append([]any{"last", what}, attrs...)
}

// tell logs the count of the minute that ends, and counts another minute;
// after a quiet minute, the next refusal is logged at once again.
func (l *RefusalLog) tell() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 {
		l.timer = nil
		return
	}
	l.log.Warn(fmt.Sprintf("%srefused %d more requests in the last minute", l.prefix, l.count),
		append([]any{"refused", l.count, "addresses", len(l.addrs)}, l.last...)...)
	l.count, l.last = 0, nil
	clear(l.addrs)
	l.timer = time.AfterFunc(refusalEvery, l.tell)
}

// loadCertificate reads the certificate and key files.
func (s *APIServer) loadCertificate() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(s.cfg.TLSKey); err == nil && fi.Mode().Perm()&0o004 != 0 {
		s.log.Warn("api_tls_key is readable by every user: chmod o-r it", "file", s.cfg.TLSKey, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	if leaf := cert.Leaf; leaf != nil {
		if time.Now().After(leaf.NotAfter) {
			s.log.Warn("the API's certificate has expired: clients refuse it", "file", s.cfg.TLSCert, "not_after", leaf.NotAfter)
		} else {
			s.log.Info("the API's certificate", "file", s.cfg.TLSCert, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
		}
	}
	return &cert, nil
}

// APIReload is what a reload changes in the API, read and checked but not
// in use yet: the tokens of the new config, and the certificate read
// again from its files.
type APIReload struct {
	s      *APIServer
	tokens *TokenSet
	cert   *tls.Certificate // nil without TLS
}

// PrepareReload checks the tokens of a new config and reads the
// certificate files again. On an error nothing changes: the running
// tokens and certificate stay.
func (s *APIServer) PrepareReload(tokens []APIToken) (*APIReload, error) {
	set, err := NewTokenSet(tokens)
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	p := &APIReload{s: s, tokens: set}
	if s.tls() {
		if p.cert, err = s.loadCertificate(); err != nil {
			return nil, fmt.Errorf("api_tls_cert, api_tls_key: %w (the running certificate stays)", err)
		}
	}
	return p, nil
}

// Apply puts the tokens and certificate in use: a token that is no longer
// in the config is refused from the next request on, and new TLS
// connections get the new certificate.
func (p *APIReload) Apply() {
	s := p.s
	s.tokens.Store(p.tokens)
	s.limMu.Lock()
	for name := range s.limiters {
		if !p.tokens.has(name) {
			delete(s.limiters, name)
		}
	}
	s.limMu.Unlock()
	if p.cert != nil {
		s.cert.Store(p.cert)
	}
	s.log.Info("HTTP API reloaded", "tokens", p.tokens.Len(), "tls", p.cert != nil)
}
