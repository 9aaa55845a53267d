package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/schedulerd/schedulerd/control"
)

// cookieName is the cookie that holds a session's token.
const cookieName = "schedulerd_session"

// sessionAge is how long a login lasts in the browser. The token is
// checked on every request besides: a token removed from the config ends
// its sessions at once.
const sessionAge = 12 * time.Hour

// session is the caller of a request that came with a valid cookie.
type session struct {
	caller control.Caller
	// csrf is the token that the session's forms carry (csrfToken).
	csrf string
}

// canOperate reports whether the session's token may trigger, pause,
// resume, cancel and rerun: the dashboard shows those buttons only then.
func (s *session) canOperate() bool { return s.caller.Role.Allows(control.RoleOperate) }

// csrfToken is the token the forms of a session carry: an HMAC of the
// session's token under a key of this process, so that a page of another
// site, which cannot read the dashboard's pages, cannot make it. A
// restart makes a new key: the forms of pages opened before it are
// refused, and a reload of the page mends them.
func (d *Dashboard) csrfToken(token string) string {
	m := hmac.New(sha256.New, d.csrfKey)
	m.Write([]byte("schedulerd dashboard csrf\x00"))
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionOf returns the session of r's cookie, or nil when there is none
// or its token is not one of the API's now.
func (d *Dashboard) sessionOf(r *http.Request) (*session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	token := string(raw)
	if err != nil || !wellFormed(token) {
		return nil, true
	}
	caller, ok := d.cfg.API.Authenticate(token)
	if !ok || !caller.Role.Allows(control.RoleRead) {
		return nil, true
	}
	return &session{caller: caller, csrf: d.csrfToken(token)}, true
}

// wellFormed reports whether token has the form of an API token: 1 to
// control.MaxTokenBytes printable ASCII characters other than space.
func wellFormed(token string) bool {
	if token == "" || len(token) > control.MaxTokenBytes {
		return false
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// setCookie gives the browser the session's cookie: HttpOnly (no script
// reads it), SameSite=Strict (no other site's request carries it), for
// the dashboard's paths alone, and Secure when the browser reached the
// dashboard over HTTPS (overHTTPS). The token is base64-encoded: any
// token the config may hold is a valid cookie value.
func setCookie(w http.ResponseWriter, r *http.Request, token string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(token)),
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
			d.fail(w, r, nil, http.StatusUnauthorized, "You are not logged in, or your token is no longer accepted: log in again.")
			return
		}
		if err := d.crossSite.Check(r); err != nil {
			d.warnRefusal(r, "a form of another site")
			d.fail(w, r, s, http.StatusForbidden, "Refused: the form was not sent by a page of this dashboard.")
			return
		}
		if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) {
			d.warnRefusal(r, "a form without the session's CSRF token")
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

// warnRefusal logs a refused login or form, at most about one a second.
func (d *Dashboard) warnRefusal(r *http.Request, what string) {
	if d.refusals.Allow() {
		d.log.Warn("dashboard: refused "+what, "remote", r.RemoteAddr, "path", clip(r.URL.Path))
	}
}

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
// (the cookie); anything else gets one answer, 401 and the form again.
// Failed logins are limited per client address and in all (loginLimiter):
// past the limit, no token is checked until the budget is back.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	next := r.PostFormValue("next")
	refuse := func(status int, msg string) {
		d.render(w, r, status, "login", loginData{base: d.base(r, nil, "Log in"), Next: next, Message: msg})
	}
	if err := d.crossSite.Check(r); err != nil {
		d.warnRefusal(r, "a login form of another site")
		refuse(http.StatusForbidden, "Refused: the form was not sent by a page of this dashboard.")
		return
	}
	addr := clientAddr(r)
	if retry := d.logins.blocked(addr); retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(retry.Seconds()+0.999)))
		refuse(http.StatusTooManyRequests, "Too many refused logins: try again in a little while.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	var caller control.Caller
	ok := wellFormed(token)
	if ok {
		caller, ok = d.cfg.API.Authenticate(token)
	}
	if !ok || !caller.Role.Allows(control.RoleRead) {
		d.logins.failed(addr)
		d.warnRefusal(r, "a login with a token that is not one of the config's")
		refuse(http.StatusUnauthorized, loginRefused)
		return
	}
	setCookie(w, r, token, int(sessionAge/time.Second))
	d.log.Info("dashboard: logged in", "token", caller.Name, "role", string(caller.Role), "remote", r.RemoteAddr)
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

// logout ends the session in this browser.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s *session) {
	clearCookie(w, r)
	d.log.Info("dashboard: logged out", "token", s.caller.Name, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext returns next when it is a page of the dashboard, else the
// overview: a login never sends the browser elsewhere.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, control.UIPath) || strings.ContainsAny(next, "\\\x00\r\n") ||
		strings.Contains(next, "//") || strings.HasPrefix(next, "/ui/login") {
		return control.UIPath
	}
	return next
}

// clientAddr is the host part of the request's remote address: the
// client, or the reverse proxy in front of the daemon.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Bounds of failed logins: each client address may fail loginBurst times
// at once and then once every loginEvery; all addresses together
// allLoginBurst times and then allLoginRate a second. loginAddrs bounds
// the addresses remembered.
const (
	loginBurst    = 10
	loginEvery    = 6 * time.Second
	allLoginBurst = 100
	allLoginRate  = 10
	loginAddrs    = 4096
)

// loginLimiter counts failed logins. A login is refused unchecked while
// its address, or all addresses together, have failed past their budget:
// guessing is bounded by the budget, whatever the guesses.
type loginLimiter struct {
	mu     sync.Mutex
	byAddr map[string]*rate.Limiter
	all    *rate.Limiter
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{byAddr: map[string]*rate.Limiter{}, all: rate.NewLimiter(allLoginRate, allLoginBurst)}
}

// blocked returns how long logins from addr wait before one is checked
// again; 0 when one may be checked now.
func (l *loginLimiter) blocked(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var wait time.Duration
	for _, lim := range []*rate.Limiter{l.byAddr[addr], l.all} {
		if lim == nil || lim.TokensAt(now) >= 1 {
			continue
		}
		r := lim.ReserveN(now, 1)
		wait = max(wait, r.DelayFrom(now))
		r.CancelAt(now)
	}
	return wait
}

// failed counts a failed login from addr.
func (l *loginLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.byAddr[addr]
	if lim == nil {
		if len(l.byAddr) >= loginAddrs {
			l.forgetIdle()
		}
		lim = rate.NewLimiter(rate.Every(loginEvery), loginBurst)
		l.byAddr[addr] = lim
	}
	lim.Allow()
	l.all.Allow()
}

// forgetIdle drops the addresses whose budget is whole again, and all of
// them when none is: the map stays bounded, and the budget of all
// addresses together still holds.
func (l *loginLimiter) forgetIdle() {
	now := time.Now()
	for addr, lim := range l.byAddr {
		if lim.TokensAt(now) >= loginBurst {
			delete(l.byAddr, addr)
		}
	}
	if len(l.byAddr) >= loginAddrs {
		clear(l.byAddr)
	}
}

// clip shortens text from a request before it is logged.
func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
