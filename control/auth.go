package control

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Role says what a caller may do. Each role allows what the one before it
// does, and more.
type Role string

// Roles of the API's tokens. A user of the socket has RoleAdmin.
const (
	// RoleRead reads: jobs, runs, attempts with their output, events,
	// nodes, health and metrics.
	RoleRead Role = "read"
	// RoleOperate also changes runs and schedules: trigger, cancel, rerun,
	// pause, resume and forget.
	RoleOperate Role = "operate"
	// RoleAdmin also reloads the config.
	RoleAdmin Role = "admin"
)

// rank orders the roles; 0 for an unknown one, which allows nothing.
func (r Role) rank() int {
	switch r {
	case RoleRead:
		return 1
	case RoleOperate:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Allows reports whether a caller with role r may do what needs role need.
func (r Role) Allows(need Role) bool { return need.rank() > 0 && r.rank() >= need.rank() }

// ParseRole returns the role called s.
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.rank() > 0 {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: want read, operate or admin", clip(s))
}

// Caller is who makes a request: the holder of an API token, or a user of
// the control socket. Handlers find it in the request's context
// (CallerFrom), to check its role and to say who made a change.
type Caller struct {
	// Name is the token's name on the API, the user's name (else "uid N")
	// on the socket.
	Name string
	Role Role
	// Via is ViaAPI or ViaSocket.
	Via string
	// Remote is the client's address (host:port) on the API, for the
	// log (LogRemote); "" on the socket.
	Remote string
}

// Where a caller came in.
const (
	ViaAPI    = "api"
	ViaSocket = "socket"
)

// Actor is how runs and events record the caller: "api:NAME" for a token,
// "socket:NAME" for a user of the socket ("socket:uid N" when the uid has
// no name); "" for no caller.
func (c Caller) Actor() string {
	if c.Name == "" {
		return ""
	}
	return c.Via + ":" + c.Name
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of a request's context.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// APIToken is a bearer token of the API, known by its SHA-256 alone.
type APIToken struct {
	Name   string
	Role   Role
	SHA256 [sha256.Size]byte
}

// MaxTokenBytes bounds a token a request presents.
const MaxTokenBytes = 512

// The tokens of the API are those `schedulerd token new` makes:
// TokenPrefix, then 32 random bytes (256 bits) in URL-safe base64 without
// padding, TokenLen characters in all. The API takes no other kind: a
// token presented in another form is refused, as a failed
// authentication, before it is hashed.
const (
	TokenPrefix = "sd_"
	TokenLen    = len(TokenPrefix) + 43
)

// WellFormedToken reports whether token has the form of the tokens that
// `schedulerd token new` makes.
func WellFormedToken(token string) bool {
	if len(token) != TokenLen || !strings.HasPrefix(token, TokenPrefix) {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token[len(TokenPrefix):])
	return err == nil && len(b) == 32
}

// TokenSet holds the tokens of the API; it does not change once made (a
// reload makes a new one).
type TokenSet struct {
	tokens []APIToken
}

// NewTokenSet checks tokens (a name and a known role each, names and
// hashes unique) and returns them as a set.
func NewTokenSet(tokens []APIToken) (*TokenSet, error) {
	names := map[string]bool{}
	sums := map[[sha256.Size]byte]string{}
	empty := sha256.Sum256(nil)
	var errs []error
	for _, t := range tokens {
		switch {
		case t.Name == "":
			errs = append(errs, errors.New("a token has no name"))
		case names[t.Name]:
			errs = append(errs, fmt.Errorf("token %q: the name is taken by another token", t.Name))
		case t.Role.rank() == 0:
			errs = append(errs, fmt.Errorf("token %q: unknown role %q", t.Name, t.Role))
		case t.SHA256 == empty:
			errs = append(errs, fmt.Errorf("token %q: the SHA-256 of the empty string would let in requests without a token", t.Name))
		case sums[t.SHA256] != "":
			errs = append(errs, fmt.Errorf("token %q: the same token as %q", t.Name, sums[t.SHA256]))
		}
		names[t.Name], sums[t.SHA256] = true, t.Name
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &TokenSet{tokens: append([]APIToken(nil), tokens...)}, nil
}

// Len is the number of tokens.
func (s *TokenSet) Len() int { return len(s.tokens) }

// has reports whether a token is called name.
func (s *TokenSet) has(name string) bool {
	for _, t := range s.tokens {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Lookup returns the token whose SHA-256 is that of token. It hashes the
// token and compares the hash with every token's in constant time, with
// no branch on the result until all are compared: how long it takes says
// nothing about which token, if any, was close.
func (s *TokenSet) Lookup(token string) (APIToken, bool) {
	sum := sha256.Sum256([]byte(token))
	found, at := 0, 0
	for i := range s.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], s.tokens[i].SHA256[:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	if found == 0 || token == "" {
		return APIToken{}, false
	}
	return s.tokens[at], true
}

// holder returns the token whose SHA-256 is sum.
func (s *TokenSet) holder(sum [sha256.Size]byte) (APIToken, bool) {
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.SHA256[:]) == 1 {
			return t, true
		}
	}
	return APIToken{}, false
}

// bearerToken returns the token of an Authorization header of the form
// "Bearer TOKEN" (the scheme in any case), and whether it has that form: a
// token of 1 to MaxTokenBytes printable ASCII characters other than space.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	if !validToken(token) {
		return "", false
	}
	return token, true
}

// validToken reports whether token has the form of one: 1 to
// MaxTokenBytes printable ASCII characters other than space.
func validToken(token string) bool {
	if token == "" || len(token) > MaxTokenBytes {
		return false
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// requireRole serves h to callers whose role allows need, and answers 403
// to the others. A request without a caller is refused: every listener
// puts one in the context before the routes.
func requireRole(need Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerFrom(r.Context())
		switch {
		case !ok:
			writeError(w, http.StatusForbidden, CodePermissionDenied, "permission denied: the request has no caller")
		case !c.Role.Allows(need):
			writeError(w, http.StatusForbidden, CodePermissionDenied, fmt.Sprintf(
				"permission denied: %s %s needs a token with the role %s or above; the token %q has the role %s",
				r.Method, clip(r.URL.Path), need, c.Name, c.Role))
		default:
			h(w, r)
		}
	}
}

// ErrUnknownToken is the error of Authenticate for a token that is not
// one of the API's, or not a token at all.
var ErrUnknownToken = errors.New("the token is not one of the API's")

// TooManyFailuresError is the error of Authenticate for a token that is
// not one of the API's, from a client address that has failed past its
// budget (or while all addresses together have): the reply is 429 with
// a Retry-After. A token of the API is never refused for it.
type TooManyFailuresError struct {
	// Addr is the client address (ClientAddr) that failed.
	Addr string
	// RetryAfter is how long until a failure of Addr is within the
	// budget again.
	RetryAfter time.Duration
}

func (e *TooManyFailuresError) Error() string {
	return fmt.Sprintf("too many failed authentications from %s: ask again in %s", e.Addr, e.RetryAfter.Round(time.Second))
}

// Bounds of failed authentications, those of the API and of the
// dashboard's login together: each client address may fail failBurst
// times at once and then once every failEvery; all addresses together
// allFailBurst times and then allFailRate a second. failAddrs bounds the
// addresses remembered.
const (
	failBurst    = 10
	failEvery    = 6 * time.Second
	allFailBurst = 100
	allFailRate  = 10
	failAddrs    = 4096
)

// authLimiter counts failed authentications by client address. Only
// failures count, and only a failure is refused for them: a token of the
// API is let through from any address, whatever that address failed
// before, so that a guesser behind the same proxy as the operators costs
// them nothing.
type authLimiter struct {
	mu     sync.Mutex
	byAddr map[string]*rate.Limiter
	all    *rate.Limiter
}

func newAuthLimiter() *authLimiter {
	return &authLimiter{byAddr: map[string]*rate.Limiter{}, all: rate.NewLimiter(allFailRate, allFailBurst)}
}

// fail counts a failed authentication from addr at now. It returns 0
// while addr and all addresses are within their budgets; past either, how
// long until a failure of addr is within them again.
func (l *authLimiter) fail(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.byAddr[addr]
	if lim == nil {
		if len(l.byAddr) >= failAddrs {
			l.forgetIdle(now)
		}
		lim = rate.NewLimiter(rate.Every(failEvery), failBurst)
		l.byAddr[addr] = lim
	}
	a, b := lim.ReserveN(now, 1), l.all.ReserveN(now, 1)
	wait := max(a.DelayFrom(now), b.DelayFrom(now))
	if wait > 0 {
		a.CancelAt(now)
		b.CancelAt(now)
	}
	return wait
}

// forgetIdle drops the addresses whose budget is whole again, and all of
// them when none is: the map stays bounded, and the budget of all
// addresses together still holds.
func (l *authLimiter) forgetIdle(now time.Time) {
	for addr, lim := range l.byAddr {
		if lim.TokensAt(now) >= failBurst {
			delete(l.byAddr, addr)
		}
	}
	if len(l.byAddr) >= failAddrs {
		clear(l.byAddr)
	}
}

// ClientAddr is the address a request's failures are counted against:
// the host of its remote address (the client, or the reverse proxy in
// front of the daemon), and for IPv6 its /64, which one client holds
// whole.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
	return host
}

// LogRemote returns a handler that adds to each record whose context has
// a caller with a remote address (an API request's: Caller.Remote) that
// address as "remote", so that what is logged on behalf of a request
// over the network, such as a pause or a trigger with its actor, says
// where it came from.
func LogRemote(h slog.Handler) slog.Handler { return remoteHandler{h} }

type remoteHandler struct{ slog.Handler }

func (h remoteHandler) Handle(ctx context.Context, r slog.Record) error {
	if c, ok := CallerFrom(ctx); ok && c.Remote != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("remote", c.Remote))
	}
	return h.Handler.Handle(ctx, r)
}

func (h remoteHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return remoteHandler{h.Handler.WithAttrs(as)}
}

func (h remoteHandler) WithGroup(name string) slog.Handler {
	return remoteHandler{h.Handler.WithGroup(name)}
}
