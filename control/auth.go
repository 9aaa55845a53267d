package control

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
