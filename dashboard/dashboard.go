package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/store"
)

// API is what the dashboard needs of the listener it is served on
// (*control.APIServer, with MountUI): its tokens and their failures, its
// rate per token, and its routes, through which every action goes.
type API interface {
	// Authenticate returns the caller a token presented by a request
	// stands for, counting a failure against the request's address.
	Authenticate(r *http.Request, token string) (control.Caller, error)
	// Holder returns the caller of the token whose SHA-256 is sum, while
	// it is one of the API's.
	Holder(sum [sha256.Size]byte) (control.Caller, bool)
	// Allow takes a request from the caller's rate, or answers 429.
	Allow(w http.ResponseWriter, c control.Caller) bool
	// Act serves a request of the /v1 routes as the caller.
	Act(ctx context.Context, c control.Caller, method, path string, body []byte) (int, []byte)
	// Relay serves a GET of the /v1 routes as the caller, its reply
	// streamed to w.
	Relay(w http.ResponseWriter, r *http.Request, c control.Caller, path string)
}

// Clock tells the time; the dashboard's sessions end by it.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Tick is a coming tick of a cron job: when it fires, and when its run
// may start (later by the job's jitter).
type Tick struct {
	Fire, Start time.Time
}

// TickSource is an Engine that tells the coming ticks of a cron job, for
// the job's page. Without it the page shows the next fire time alone.
type TickSource interface {
	// NextTicks returns up to n ticks of the job from its next fire time
	// on; none for a job that is not a cron job or is paused.
	NextTicks(job string, n int) []Tick
}

// JobLister is an Engine that names its jobs and describes a few of them
// at a time: the overview pages through them, and a job's page describes
// its job alone, at the cost of those described. Without it, pages read
// the whole listing (Jobs).
type JobLister interface {
	// JobNames returns the names of the jobs Jobs describes, in its
	// order.
	JobNames() []string
	// JobsNamed describes the named jobs as Jobs does, in the order
	// given, leaving out a name that is no job.
	JobsNamed(ctx context.Context, names []string) ([]control.JobInfo, error)
}

// Config configures the dashboard.
type Config struct {
	// API is the listener the dashboard is mounted on.
	API API
	// Engine describes the jobs (the data of GET /v1/jobs; a page at a
	// time when it is a JobLister), and Store
	// serves the reads of runs, attempts, events, nodes and counts, as
	// they do for the /v1 routes.
	Engine control.Engine
	Store  store.Store
	// InactiveThreshold decides the state a node is shown in (default 2m).
	InactiveThreshold time.Duration
	Logger            *slog.Logger
	// SnapshotTTL is how long the data of a page is served to every
	// viewer before it is read again (default 1s).
	SnapshotTTL time.Duration
	// Clock is the time of the sessions (default the system's).
	Clock Clock
}

// Defaults and bounds.
const (
	// DefaultSnapshotTTL is how long a page's data is shared.
	DefaultSnapshotTTL = time.Second
	// maxBuilds bounds the snapshots being read from the store at once.
	maxBuilds = 4
	// maxSnapshots bounds the snapshots kept; past it, a new one is read
	// for its own requests and not kept.
	maxSnapshots = 1024
	// buildTimeout bounds the reads of one snapshot.
	buildTimeout = 10 * time.Second
	// pollInterval is how often a page asks for its live part, in ms (the
	// JavaScript reads it from the page).
	pollInterval = 2000
	// chartRuns is how many runs a job's page charts, jobRuns how many
	// of them it lists; listRuns is how many a page of the runs page
	// lists.
	chartRuns = 100
	jobRuns   = 30
	listRuns  = 100
	// overviewJobs is how many jobs a page of the overview lists; the
	// others are on the next pages, and a filter by name finds them.
	overviewJobs = 200
	// nextTicks is how many coming ticks a job's page shows.
	nextTicks = 5
	// runAttempts is how many attempts a run's page shows, the newest;
	// outputKeep how much of the head and of the tail of each one's
	// output (a link leads to the whole output). A page is thus bounded
	// whatever the outputs hold.
	runAttempts = 10
	outputKeep  = 16 << 10
	// maxRenders bounds the pages being made at once; a request past it
	// waits for a turn.
	maxRenders = 4
)

// Dashboard serves the web dashboard at control.UIPath. It is an
// http.Handler for APIServer.MountUI.
type Dashboard struct {
	cfg       Config
	log       *slog.Logger
	mux       *http.ServeMux
	pages     map[string]*template.Template
	snaps     *snapshots
	csrfKey   []byte
	crossSite *http.CrossOriginProtection
	sessions  *sessions
	// renders are the turns of making a page (maxRenders).
	renders chan struct{}
	// refusals logs the forms refused, a count a minute past the first.
	refusals *control.RefusalLog
}

// New builds the dashboard.
func New(cfg Config) (*Dashboard, error) {
	if cfg.API == nil || cfg.Engine == nil || cfg.Store == nil {
		return nil, errors.New("dashboard: the config needs an API, an engine and a store")
	}
	cfg.InactiveThreshold = cmp.Or(cfg.InactiveThreshold, 2*time.Minute)
	cfg.SnapshotTTL = cmp.Or(cfg.SnapshotTTL, DefaultSnapshotTTL)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("dashboard: CSRF key: %w", err)
	}
	d := &Dashboard{
		cfg: cfg, log: cfg.Logger.With("component", "dashboard"), pages: pages,
		snaps:     newSnapshots(cfg.SnapshotTTL),
		csrfKey:   key,
		crossSite: http.NewCrossOriginProtection(),
		sessions:  newSessions(),
		renders:   make(chan struct{}, maxRenders),
	}
	d.refusals = control.NewRefusalLog(d.log, "dashboard: ")
	d.routes()
	return d, nil
}

// routes: the login page and the assets are public; every other page
// needs a session, and every POST a session and its CSRF token.
func (d *Dashboard) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, control.UIPath, http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /ui/static/{name}", serveAsset)
	mux.HandleFunc("GET "+control.FaviconPath, serveFavicon)
	mux.HandleFunc("GET /ui/login", d.loginPage)
	mux.HandleFunc("POST /ui/login", d.login)
	mux.HandleFunc("POST /ui/logout", d.action(d.logout))
	mux.HandleFunc("GET /ui/{$}", d.page(d.overview))
	mux.HandleFunc("GET /ui/jobs/{job}", d.page(d.jobPage))
	mux.HandleFunc("GET /ui/runs", d.page(d.runsPage))
	mux.HandleFunc("GET /ui/runs/{id}", d.page(d.runPage))
	mux.HandleFunc("GET /ui/runs/{id}/attempts/{n}/output", d.page(d.attemptOutput))
	mux.HandleFunc("GET /ui/runs/{id}/output", d.page(d.runOutput))
	mux.HandleFunc("POST /ui/jobs/{job}/{action}", d.action(d.jobAction))
	mux.HandleFunc("POST /ui/runs/{id}/{action}", d.action(d.runAction))
	mux.HandleFunc("/ui/", d.page(func(w http.ResponseWriter, r *http.Request, s *session) {
		d.fail(w, r, s, http.StatusNotFound, "There is no such page.")
	}))
	d.mux = mux
}

// ServeHTTP serves a request under control.UIPath, with the headers every
// reply of the dashboard has.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	d.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy lets a page load its own script, style and images
// alone: no inline script or style, no other origin, no frame, and forms
// that post to the dashboard only.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// render writes a page, or with live the live part of it alone (the
// template "live"), with status. At most maxRenders pages are made at
// once: each is made whole before it is written (an error half-way
// would leave half a page), and its size is bounded by what the pages
// show, so the memory of the pages being made is bounded too.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	select {
	case d.renders <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	buf, err := d.execute(r, name, data)
	<-d.renders
	if err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: render a page", "page", name, "error", err)
		http.Error(w, "internal error: the page could not be made", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// execute makes a page, or its live part when r asks for it.
func (d *Dashboard) execute(r *http.Request, name string, data any) (*bytes.Buffer, error) {
	t := d.pages[name]
	part := "page"
	if isLive(r) && t.Lookup("live") != nil {
		part = "live"
	}
	var buf bytes.Buffer
	return &buf, t.ExecuteTemplate(&buf, part, data)
}

// isLive reports whether r asks for the live part of a page (part=live),
// which the page's script polls.
func isLive(r *http.Request) bool { return r.URL.Query().Get("part") == "live" }

// failPage is the data of the error page.
type failPage struct {
	base
	Status  int
	Message string
}

// fail answers with the error page: status and a message for a person.
// s is nil for a request without a session.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	p := failPage{base: d.base(r, s, http.StatusText(status)), Status: status, Message: msg}
	d.render(w, r, status, "error", p)
}
