package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

// cookieName is the cookie that holds a session's id.
const cookieName = "schedulerd_session"

// Bounds of a session: it ends sessionAge after the login, or sessionIdle
// after its last request (a page that polls its live part is in use),
// whichever comes first; a token has at most sessionsPerToken sessions at
// once.
const (
	sessionAge       = 12 * time.Hour
	sessionIdle      = time.Hour
	sessionsPerToken = 64
)

// sessions are the dashboard's logins, kept in the daemon's memory: a
// restart ends them, and each node of a cluster has its own. The cookie
// holds a session's id, 256 random bits; the map holds its SHA-256
// alone, with what the session stands for: the name and role of the
// token it was opened with, and that token's SHA-256, so that a token
// removed or changed by a reload ends its sessions (sessionOf).
type sessions struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]*sessionEntry
}

// sessionEntry is one login.
type sessionEntry struct {
	// token is the SHA-256 of the token the login took, and caller who
	// it was then (name and role).
	token  [sha256.Size]byte
	caller control.Caller
	// made is when the login was, seen when the last request came.
	made, seen time.Time
}

func newSessions() *sessions {
	return &sessions{byID: map[[sha256.Size]byte]*sessionEntry{}}
}

// open starts a session for caller, who logged in with the token whose
// SHA-256 is token, and returns its id. Sessions past their time are
// dropped, and the least recently used of the token's when it has
// sessionsPerToken.
func (ss *sessions) open(caller control.Caller, token [sha256.Size]byte, now time.Time) ([]byte, error) {
	id := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	caller.Remote = ""
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var oldest [sha256.Size]byte
	var oldestSeen time.Time
	n := 0
	for k, e := range ss.byID {
		switch {
		case !e.live(now):
			delete(ss.byID, k)
		case e.token == token:
			n++
			if oldestSeen.IsZero() || e.seen.Before(oldestSeen) {
				oldest, oldestSeen = k, e.seen
			}
		}
	}
	if n >= sessionsPerToken {
		delete(ss.byID, oldest)
	}
	ss.byID[sha256.Sum256(id)] = &sessionEntry{token: token, caller: caller, made: now, seen: now}
	return id, nil
}

// live reports whether the session is within its age and idle time.
func (e *sessionEntry) live(now time.Time) bool {
	return now.Sub(e.made) < sessionAge && now.Sub(e.seen) < sessionIdle
}

// use returns the session of the id whose SHA-256 is key, as a request
// at now uses it; nil (and the session dropped) when it has ended.
func (ss *sessions) use(key [sha256.Size]byte, now time.Time) *sessionEntry {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e := ss.byID[key]
	if e == nil {
		return nil
	}
	if !e.live(now) {
		delete(ss.byID, key)
		return nil
	}
	e.seen = now
	c := *e
	return &c
}

// end ends a session.
func (ss *sessions) end(key [sha256.Size]byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, key)
}

// len is the number of sessions kept, ended ones not yet dropped
// included.
func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

// session is the session of a request that came with the cookie of one.
type session struct {
	// key is the SHA-256 of the session's id.
	key [sha256.Size]byte
	// caller is the token's holder, with the request's remote address.
	caller control.Caller
	// csrf is the token that the session's forms carry (csrfToken).
	csrf string
}

// canOperate reports whether the session's token may trigger, pause,
// resume, cancel and rerun: the dashboard shows those buttons only then.
func (s *session) canOperate() bool { return s.caller.Role.Allows(control.RoleOperate) }

// csrfToken is the token the forms of a session carry: an HMAC of the
// session's id under a key of this process, so that a page of another
// site, which cannot read the dashboard's pages, cannot make it.
func (d *Dashboard) csrfToken(id []byte) string {
	m := hmac.New(sha256.New, d.csrfKey)
	m.Write([]byte("schedulerd dashboard csrf\x00"))
	m.Write(id)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionOf returns the session of r's cookie, or nil when there is none:
// no cookie (hadCookie false), or one whose session has ended, was never
// made, or whose token was removed or changed (its name, role or value)
// since the login, which ends it.
func (d *Dashboard) sessionOf(r *http.Request) (s *session, hadCookie bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	id, err := base64.RawURLEncoding.Strict().DecodeString(c.Value)
	if err != nil || len(id) != 32 {
		return nil, true
	}
	key := sha256.Sum256(id)
	e := d.sessions.use(key, d.now())
	if e == nil {
		return nil, true
	}
	caller, ok := d.cfg.API.Holder(e.token)
	if !ok || caller.Name != e.caller.Name || caller.Role != e.caller.Role || !caller.Role.Allows(control.RoleRead) {
		d.sessions.end(key)
		d.log.Info("dashboard: a session ended: its token was removed or changed", "token", e.caller.Name)
		return nil, true
	}
	caller.Remote = r.RemoteAddr
	return &session{key: key, caller: caller, csrf: d.csrfToken(id)}, true
}

// now is the dashboard's clock.
func (d *Dashboard) now() time.Time { return d.cfg.Clock.Now() }

// setCookie gives the browser the session's cookie: HttpOnly (no script
// reads it), SameSite=Strict (no other site's request carries it), for
// the dashboard's paths alone, and Secure when the browser reached the
// dashboard over HTTPS (overHTTPS).
func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: value,
		Path: control.UIPath, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overHTTPS(r),
	})
}

// overHTTPS reports whether the browser sent r over HTTPS: to this
// listener's TLS, or to a reverse proxy's that says so (X-Forwarded-Proto
// or Forwarded). A browser's Origin says nothing here: with the pages'
// Referrer-Policy of no-referrer, a form sends "null". A client that
// claims HTTPS falsely gets a cookie its browser then keeps off plain
// HTTP: it can make the cookie safer, never weaker.
func overHTTPS(r *http.Request) bool {
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return true
	}
	for _, f := range strings.FieldsFunc(strings.ToLower(r.Header.Get("Forwarded")), func(c rune) bool { return c == ';' || c == ',' }) {
		if strings.TrimSpace(f) == "proto=https" {
			return true
		}
	}
	return false
}

// clearCookie tells the browser to forget the session.
func clearCookie(w http.ResponseWriter, r *http.Request) { setCookie(w, r, "", -1) }

// page serves GET h to a session: a request without one is sent to the
// login page (its live part gets 401, and the script reloads the page).
// The request is taken from the rate of the session's token.
func (d *Dashboard) page(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, hadCookie := d.sessionOf(r)
		if s == nil {
			if hadCookie {
				clearCookie(w, r)
			}
			if isLive(r) {
				d.fail(w, r, nil, http.StatusUnauthorized, "Log in again.")
				return
			}
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if !d.allow(w, r, s) {
			return
		}
		h(w, r, s)
	}
}

// action serves POST h to a session whose form carries its CSRF token
// and that a page of the dashboard sent (http.CrossOriginProtection: the
// browser's Sec-Fetch-Site, else its Origin, must be this site). Anything
// else is refused with 403 and reaches nothing.
func (d *Dashboard) action(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, hadCookie := d.sessionOf(r)
		if s == nil {
			if hadCookie {
				clearCookie(w, r)
			}
			d.fail(w, r, nil, http.StatusUnauthorized, "You are not logged in, or your session has ended: log in again.")
			return
		}
		if err := d.crossSite.Check(r); err != nil {
			d.refusals.Refused(r, "a form of another site")
			d.fail(w, r, s, http.StatusForbidden, "Refused: the form was not sent by a page of this dashboard.")
			return
		}
		if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) {
			d.refusals.Refused(r, "a form without the session's CSRF token")
			d.fail(w, r, s, http.StatusForbidden, "Refused: the form has expired (the daemon may have restarted). Reload the page and try again.")
			return
		}
		if !d.allow(w, r, s) {
			return
		}
		h(w, r, s)
	}
}

// allow takes the request from the rate of the session's token; past it,
// the error page with the API's Retry-After and message.
func (d *Dashboard) allow(w http.ResponseWriter, r *http.Request, s *session) bool {
	rec := &headerRecorder{header: http.Header{}}
	if d.cfg.API.Allow(rec, s.caller) {
		return true
	}
	if ra := rec.header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	d.fail(w, r, s, http.StatusTooManyRequests, "Too many requests with the token "+strconv.Quote(s.caller.Name)+
		" at once: wait a moment and reload the page.")
	return false
}

// headerRecorder keeps the headers of a refusal of Allow, whose JSON body
// the dashboard replaces with a page.
type headerRecorder struct{ header http.Header }

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(int)             {}

// loginData is the data of the login page.
type loginData struct {
	base
	Next    string
	Message string
}

// loginPage serves the login form; a browser with a session goes on to
// the overview.
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if s, _ := d.sessionOf(r); s != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	d.render(w, r, http.StatusOK, "login", loginData{base: d.base(r, nil, "Log in"), Next: r.URL.Query().Get("next")})
}

// loginRefused is what every refused login says: a missing, malformed and
// unknown token are one answer.
const loginRefused = "The token was not accepted."

// login takes a token from the form. A token of the API starts a session
// (the cookie holds its id); anything else gets one answer, 401 and the
// form again. A refused login is a failed authentication of the API
// (APIServer.Authenticate): past the failures its address may make, it
// gets 429 instead, while a token of the API still logs in.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	next := r.PostFormValue("next")
	refuse := func(status int, msg string) {
		d.render(w, r, status, "login", loginData{base: d.base(r, nil, "Log in"), Next: next, Message: msg})
	}
	if err := d.crossSite.Check(r); err != nil {
		d.refusals.Refused(r, "a login form of another site")
		refuse(http.StatusForbidden, "Refused: the form was not sent by a page of this dashboard.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	caller, err := d.cfg.API.Authenticate(r, token)
	var tooMany *control.TooManyFailuresError
	switch {
	case errors.As(err, &tooMany):
		control.WriteRetryAfter(w.Header(), tooMany.RetryAfter)
		refuse(http.StatusTooManyRequests, loginRefused+" Too many tokens were refused from your address: wait a little before the next.")
		return
	case err != nil || !caller.Role.Allows(control.RoleRead):
		refuse(http.StatusUnauthorized, loginRefused)
		return
	}
	id, err := d.sessions.open(caller, sha256.Sum256([]byte(token)), d.now())
	if err != nil {
		d.log.Error("dashboard: start a session", "error", err)
		refuse(http.StatusInternalServerError, "The session could not be started.")
		return
	}
	setCookie(w, r, base64.RawURLEncoding.EncodeToString(id), int(sessionAge/time.Second))
	d.log.Info("dashboard: logged in", "token", caller.Name, "role", string(caller.Role), "remote", r.RemoteAddr)
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

// logout ends the session.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s *session) {
	d.sessions.end(s.key)
	clearCookie(w, r)
	d.log.Info("dashboard: logged out", "token", s.caller.Name, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext returns next when it is a page of the dashboard, else the
// overview: a login never sends the browser elsewhere. The path is
// cleaned of dot segments before it is checked, and returned cleaned.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.ContainsAny(next, "\\\x00\r\n") || strings.Contains(next, "//") {
		return control.UIPath
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, control.UIPath) || strings.HasPrefix(clean, "/ui/login") {
		return control.UIPath
	}
	u.Path, u.RawPath = clean, ""
	return u.String()
}

// clip shortens text from a request before it is logged.
func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
