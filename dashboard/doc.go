// Package dashboard owns the web dashboard of schedulerd: the pages that
// the HTTP API serves at /ui/ (APIServer.MountUI), behind its tokens.
//
// Pages, rendered on the server with html/template (every value, job
// output above all, is escaped):
//
//	GET  /ui/login                 the login form (public)
//	POST /ui/login                 a token of the API starts a session (its id in a cookie)
//	POST /ui/logout                ends it
//	GET  /ui/?q=&page=             overview: jobs (200 a page, of those whose name
//	                               contains q), nodes, counts of runs by status
//	GET  /ui/jobs/{job}            a job: its state, next ticks, its last 100 runs
//	                               as a chart (an SVG of the page: duration and
//	                               start lag of each, by outcome), the last 30
//	                               as a timeline; trigger, pause and resume
//	GET  /ui/runs?job=&status=&since=&until=&before=
//	                               runs, newest first, 100 a page: of a job, a
//	                               status, made in a time range; before is the
//	                               last run of the page before (a keyset cursor)
//	GET  /ui/runs/{id}             a run: its attempts with output, events and
//	                               progress; cancel and rerun
//	POST /ui/jobs/{job}/{trigger|pause|resume}, /ui/runs/{id}/{cancel|rerun}
//	GET  /ui/static/{app.css,app.js,favicon.ico}   the style sheet, the script
//	                               and the icon (public; the icon at /favicon.ico too)
//
// Sessions: the login form takes a token of the API, checked with the
// API's Authenticate, where a refused one counts against the client
// address's failures as a bearer token's does (past them, 429; a right
// token always logs in). A login starts a session on the daemon: the
// cookie holds a random id of 256 bits (HttpOnly, SameSite=Strict, for
// /ui/ alone, Secure when the browser came over HTTPS), and the daemon
// keeps in memory the id's SHA-256 with the name, role and SHA-256 of
// the token. A session ends at log out, after an hour without a
// request, 12 hours after the login, or when a reload removes or changes
// its token (Holder, at each request); a token holds 64 at most. A
// restart ends them all, and each node has its own. Every request takes
// from the token's rate, as an API request does.
//
// Actions are forms, posted with a CSRF token (an HMAC of the session's
// id under a key of the process) and accepted only from a page of the
// dashboard (http.CrossOriginProtection: Sec-Fetch-Site, else Origin).
// Each goes through the API's own route (APIServer.Act) as the session's
// caller, so the API's role check decides: a read token sees no buttons,
// and its forged form gets the API's 403.
//
// Every reply forbids framing and sniffing, sends no referrer and is not
// stored; its Content-Security-Policy lets a page load its own script and
// style sheet alone, which are embedded in the binary.
//
// Live updates: a page's script asks for its live part (?part=live) every
// 2 s while the page is visible. The data of each page (the overview, a
// listing of runs, a run) is read once and shared by every request of the
// next second (snapshots), so that the store's work is at most one read
// of each page's data a second, however many browsers show it, and at
// most four such reads run at once.
package dashboard
