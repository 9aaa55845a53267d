package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/internal/testtool"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// chromium returns the path of Debian's Chromium, which the dashboard's
// browser test drives. CI installs it (.ci/run); elsewhere the test is
// skipped without it (testtool).
func chromium(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "chromium", "chromium", "chromium-browser", "google-chrome")
}

// dashboardJobs: echo prints its payload and some HTML, slow reports
// progress and sleeps until cancelled, tick is a cron job to pause,
// chatty writes more than a page shows, often is a cron job in the
// daemon's local zone that fails with exit code 3, talk prints a line and
// waits on the fifo dir/go (mkfifo) before the next, nightly a cron job
// whose history the test writes (nightlyHistory).
func dashboardJobs(dir string) string {
	return fmt.Sprintf(`[[job]]
name = "echo"
shell = 'printf "%%s\n" "$SCHEDULERD_PAYLOAD"; echo "<i>done</i> & dusted"'

[[job]]
name = "slow"
shell = '"$SD_BIN" progress 30 "step 1 of 3" && echo $$ > "$PID_FILE" && exec sleep 600'
env = { SD_BIN = %q, PID_FILE = %q }
kill_grace = "2s"

[[job]]
name = "tick"
schedule = "0 3 * * *"
timezone = "Europe/Berlin"
jitter = "10m"
command = ["/bin/true"]

[[job]]
name = "chatty"
output_limit = 65536
shell = 'seq 1 40000 | sed "s/^/line /"'

[[job]]
name = "often"
schedule = "@every 3s"
shell = 'echo "tick $SCHEDULERD_ATTEMPT"; exit 3'
retry = { max_attempts = 1 }

[[job]]
name = "talk"
shell = 'echo "<b>first</b> line"; read x < "$GO"; echo "second line"'
env = { GO = %q }
retry = { max_attempts = 1 }

[[job]]
name = "nightly"
schedule = "0 2 1 1 *"
command = ["/bin/true"]
`, binary, filepath.Join(dir, "slow.pid"), filepath.Join(dir, "go"))
}

// nightlyHistory writes 130 runs of nightly to the store of e before its
// daemon starts, one an hour until an hour ago: most took 40s to 96s,
// one 4 minutes; most started within 2s of their time, every 23rd 45s
// late; every 19th from the 8th dead-lettered. It returns them, oldest
// first.
func nightlyHistory(t *testing.T, e *env) []*jobs.Run {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(e.dir, "state", "schedulerd.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	last := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	var history []pastRun
	for i := range 130 {
		p := pastRun{made: last.Add(time.Duration(i-129) * time.Hour), lag: time.Duration(i%5) * 400 * time.Millisecond,
			took: 40*time.Second + time.Duration(i%9)*7*time.Second, failed: i%19 == 7}
		if i%23 == 11 {
			p.lag = 45 * time.Second
		}
		if i == 100 {
			p.took = 4 * time.Minute
		}
		history = append(history, p)
	}
	return seedRuns(t, st, "nightly", history)
}

// browser drives one headless Chromium tab of a test.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	// shots is where screenshots go.
	shots string
}

// newBrowser starts Chromium (without its sandbox when the tests run as
// root, which it refuses otherwise) with a tab of 1280x900.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	shots := os.Getenv("SCHEDULERD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, base: base, shots: shots}
	// The first action starts the browser, which lives as long as the
	// context of that action: the bounds of time go on the actions after.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("browser: start %s: %v", chromium(t), err)
	}
	return b
}

// actionTimeout bounds one step of the browser.
const actionTimeout = 90 * time.Second

// do runs browser steps; what says what they do, for the failure.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// submit runs steps that send a form, waits until the page it leads to
// has loaded, and returns that page's HTTP status.
func (b *browser) submit(what string, steps ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, steps...)
	if err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
	return resp.Status
}

// open navigates to a path of the dashboard and waits for the element sel.
func (b *browser) open(path string, sel chromedp.CSS) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(sel))
}

// eval evaluates JavaScript, awaiting a promise, and returns its value.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: evaluate %.80s: %v", js, err)
	}
	return v
}

// waitFor waits until the JavaScript expression js is true in the page:
// the page's own script changes it, or a navigation the test started.
func (b *browser) waitFor(what, js string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+10*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		body := eval[string](b, `document.body ? document.body.innerText : ""`)
		b.t.Fatalf("browser: %s: %v\nthe page says:\n%s", what, err, body)
	}
}

// text returns the text of the first element that sel matches; "" when
// none does.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel))
}

// count returns how many elements sel matches.
func (b *browser) count(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// location is the URL of the page.
func (b *browser) location() string {
	b.t.Helper()
	return eval[string](b, `document.location.href`)
}

// cookies are the browser's cookies for the page.
func (b *browser) cookies() []*network.Cookie {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	res, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
	})
	if err != nil {
		b.t.Fatalf("browser: read the cookies: %v", err)
	}
	return res.Cookies
}

// Sizes of the screenshots: a phone's (390 px) and a laptop's (1280 px).
var screens = []struct {
	name          string
	width, height int64
	mobile        bool
}{
	{"phone", 390, 844, true},
	{"desktop", 1280, 900, false},
}

// afterPaint resolves once the page has been laid out and painted.
const afterPaint = `new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))`

// shoot saves a screenshot of the whole page as NAME-phone.png and
// NAME-desktop.png, then goes back to the desktop's size.
func (b *browser) shoot(name string) {
	b.t.Helper()
	for _, s := range screens {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if s.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		b.do("the size of a "+s.name, chromedp.EmulateViewport(s.width, s.height, opts...))
		eval[bool](b, afterPaint)
		ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			b.t.Fatalf("browser: screenshot %s %s: %v", name, s.name, err)
		}
		if err := os.WriteFile(filepath.Join(b.shots, name+"-"+s.name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.do("back to the desktop's size", chromedp.EmulateViewport(1280, 900))
}

// TestDashboardInBrowser drives the dashboard in headless Chromium
// against a real daemon: a visit without a session lands on the login
// form, which takes an operate token and sets an HttpOnly, SameSite=Strict
// cookie; a run triggered from a job's page with a payload appears and
// completes on its page without a reload, its output escaped; a run
// triggered elsewhere appears on the job's page without a reload; a long
// run shows its live progress and is cancelled from its page; a cron
// job's schedule is paused and resumed from its page. A read token then
// sees no button, and the POST it forges with its own page's CSRF token
// is refused by the API's role check, as is its direct API call. Each
// page is shot at a phone's and a desktop's width into
// $SCHEDULERD_SCREENSHOTS (else the test's temporary directory).
func TestDashboardInBrowser(t *testing.T) {
	proctest.Long(t, "a browser and a daemon")
	e := newEnv(t)
	mkfifo(t, e.dir)
	addr := freeAddr(t)
	operator := newCLIToken(t, e.dir, "ci", "operate")
	reader := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(4, fmt.Sprintf("api_listen = %q\n", addr), dashboardJobs(e.dir)+"\n"+operator.table+"\n"+reader.table)
	nightly := nightlyHistory(t, e)
	d := e.start(true)
	base := "http://" + addr
	b := newBrowser(t, base)

	// No session: the login form, which refuses a token that is not one.
	b.open("/ui/", "#token")
	if loc := b.location(); !strings.HasPrefix(loc, base+"/ui/login") {
		t.Fatalf("/ui/ without a session went to %s, want the login page", loc)
	}
	b.shoot("login")
	if st := b.submit("log in with a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "sd_not-a-token"),
		chromedp.Click(chromedp.CSS("#login"))); st != http.StatusUnauthorized || b.count("#login-error") != 1 {
		t.Fatalf("a wrong token: HTTP %d, %q", st, b.text("main"))
	}
	if st := b.submit("log in", chromedp.SendKeys(chromedp.CSS("#token"), operator.token), chromedp.Click(chromedp.CSS("#login"))); st != http.StatusOK || b.count("#counts-h") != 1 {
		t.Fatalf("log in: HTTP %d, %q", st, b.text("main"))
	}
	if cookies := b.cookies(); len(cookies) != 1 || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict || cookies[0].Path != "/ui/" {
		t.Fatalf("the session's cookies: %+v", cookies)
	}
	for _, want := range []string{"echo", "slow", "tick", "0 3 * * *", "Europe/Berlin", "test-node"} {
		if !strings.Contains(b.text("main"), want) {
			t.Errorf("the overview does not show %q:\n%s", want, b.text("main"))
		}
	}

	// Trigger with a payload: the run's page shows it complete, without a
	// reload, its output and payload escaped.
	b.open("/ui/jobs/echo", "#trigger")
	payload := `<b>bold</b> "quoted"`
	b.do("open the trigger's options", chromedp.Click(chromedp.CSS("#trigger-options summary")), chromedp.WaitVisible(chromedp.CSS("#payload")))
	if st := b.submit("trigger echo", chromedp.SendKeys(chromedp.CSS("#payload"), payload), chromedp.Click(chromedp.CSS("#trigger-with"))); st != http.StatusOK || b.count("#run-id") != 1 {
		t.Fatalf("trigger echo: HTTP %d, %q", st, b.text("main"))
	}
	eval[bool](b, `window.notReloaded = true`)
	b.waitFor("the run completes", `document.querySelector('#run-status').textContent.includes('completed')`, 60*time.Second)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Error("the run's page was reloaded to show the run complete")
	}
	if out := b.text(".output"); out != payload+"\n<i>done</i> & dusted\n" {
		t.Errorf("the output shown is %q", out)
	}
	if n := b.count(".output b, .output i, #payload-text b"); n != 0 {
		t.Errorf("the job's text made %d elements of the page", n)
	}
	echoRun := b.text("#run-id")
	if st := b.text("#live-state"); !regexp.MustCompile(`^Final: `).MatchString(st) {
		t.Errorf("the footer of a finished run says %q", st)
	}
	b.shoot("run-completed")

	// A run made elsewhere appears on the job's page without a reload.
	b.open("/ui/jobs/echo", "#trigger")
	eval[bool](b, `window.notReloaded = true`)
	other := jsonOne(t, e.ok("trigger", "echo", "--payload", "from the shell", "--wait", "--json"))["id"].(string)
	b.waitFor("the new run on the job's page", fmt.Sprintf(`document.querySelector('#live').innerHTML.includes(%q)`, other), 30*time.Second)
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Error("the job's page was reloaded to show a new run")
	}
	b.shoot("job")

	// A long run: its live progress, then cancel from its page.
	b.open("/ui/jobs/slow", "#trigger")
	b.submit("trigger slow", chromedp.Click(chromedp.CSS("#trigger")))
	b.waitFor("the progress of the slow run", `(document.querySelector('#progress-text') || {textContent: ''}).textContent.includes('step 1 of 3')`, 60*time.Second)
	if v := b.text("#run-status"); !strings.Contains(v, "running") {
		t.Errorf("the slow run is shown %q", v)
	}
	slowRun := b.text("#run-id")
	b.shoot("run-running")
	b.submit("cancel the slow run", chromedp.Click(chromedp.CSS("#cancel")))
	b.waitFor("the slow run cancelled", `document.querySelector('#run-status').textContent.includes('cancelled')`, 60*time.Second)
	b.waitFor("the cancel button gone", `document.querySelector('#cancel') === null`, 10*time.Second)
	if run := jsonOne(t, e.ok("runs", "show", slowRun, "--json")); run["status"] != "cancelled" || run["actor"] != "api:ci" || run["cancelled_by"] != "api:ci" {
		t.Errorf("the slow run after its cancel from the dashboard: %v", run)
	}
	if by := b.text("#cancelled-by"); by != "api:ci" {
		t.Errorf("the slow run's page says it was cancelled by %q", by)
	}

	// A run whose attempt runs: its output shows as the job writes it, as
	// text, in an element that the updates of the live part keep.
	talk := jsonOne(t, e.ok("trigger", "talk", "--json"))["id"].(string)
	b.open("/ui/runs/"+talk, "#live")
	b.waitFor("the first line of talk as it is written", `(document.querySelector('.live-output') || {textContent: ''}).textContent === '<b>first</b> line\n'`, 60*time.Second)
	if n := b.count(".live-output b"); n != 0 {
		t.Errorf("the job's output made %d elements of the page", n)
	}
	if v := b.text("#run-status"); !strings.Contains(v, "running") {
		t.Errorf("the talk run is shown %q while its output shows", v)
	}
	eval[bool](b, `(window.kept = document.querySelector('.live-output'), window.update = document.querySelector('#live-state').textContent, true)`)
	b.waitFor("an update of the live part", `document.querySelector('#live-state').textContent !== window.update`, 30*time.Second)
	if !eval[bool](b, `document.querySelector('.live-output') === window.kept && window.kept.textContent === '<b>first</b> line\n'`) {
		t.Errorf("the update of the live part lost the output followed: %q", b.text("#live"))
	}
	b.shoot("run-live-output")
	release(t, filepath.Join(e.dir, "go"))
	b.waitFor("the talk run completed, its output stored", `document.querySelector('#run-status').textContent.includes('completed') && document.querySelector('.live-output') === null`, 60*time.Second)
	if out := b.text(".output"); out != "<b>first</b> line\nsecond line\n" {
		t.Errorf("the stored output of talk on its page: %q", out)
	}

	// Pause and resume the cron job from its page.
	b.open("/ui/jobs/tick", "#pause")
	if n := b.count(".ticks li"); n != 5 {
		t.Errorf("the cron job's page shows %d next ticks, want 5:\n%s", n, b.text("main"))
	}
	b.shoot("job-cron")
	b.submit("pause tick", chromedp.Click(chromedp.CSS("#pause")))
	if b.count("#resume") != 1 || !strings.Contains(b.text("#job-state"), "paused") {
		t.Errorf("after the pause, the job's page says %q", b.text("main"))
	}
	if j := jobNamed(t, e, "tick"); j["paused"] != true {
		t.Errorf("after the pause, jobs says %v", j)
	}
	b.shoot("job-paused")
	b.submit("resume tick", chromedp.Click(chromedp.CSS("#resume")))
	if b.count("#pause") != 1 || b.text("#job-state") != "active" {
		t.Errorf("after the resume, the job's page says %q", b.text("main"))
	}
	if j := jobNamed(t, e, "tick"); j["paused"] != false {
		t.Errorf("after the resume, jobs says %v", j)
	}
	b.open("/ui/", "#counts-h")
	b.waitFor("a live update of the overview", `/^Live: updated \d\d:\d\d:\d\d UTC\.$/.test(document.querySelector('#live-state').textContent)`, 30*time.Second)
	if zones := eval[string](b, `[...document.querySelectorAll('td[data-label="Time zone"]')].map(td => td.textContent).join('|')`); strings.Contains(zones, "Local|") ||
		strings.HasSuffix(zones, "Local") || !strings.Contains(zones, "(local)") {
		t.Errorf("the time zones of the overview: %s", zones)
	}
	b.shoot("overview")

	// The history of nightly: its page charts its last 100 runs, the
	// oldest on the left, each bar a link to its run, within the page
	// at both sizes; the runs page lists its completed runs of the last 7
	// days, 100 a page, and pages to the older ones and back.
	b.open("/ui/jobs/nightly", "svg.history-chart")
	if n := b.count("svg.history-chart a"); n != 100 {
		t.Errorf("the chart of nightly has %d bars, want 100", n)
	}
	if first := eval[string](b, `document.querySelector('svg.history-chart a').getAttribute('href')`); first != "/ui/runs/"+nightly[30].ID {
		t.Errorf("the first bar of the chart links to %s, want the run %s", first, nightly[30].ID)
	}
	if title := b.text("svg.history-chart a:last-of-type title"); !strings.HasPrefix(title, "Run …"+nightly[129].ID[len(nightly[129].ID)-12:]) || !strings.Contains(title, "✓ completed; took ") {
		t.Errorf("the title of the last bar: %q", title)
	}
	b.within("/ui/jobs/nightly", "svg.history-chart", ".history-scale .top", ".history-scale .lag", ".history-dates", ".legend", "#history-summary")
	b.shoot("job-history")
	b.open("/ui/runs?job=nightly&status=completed&since=7d", "#live")
	if n, more := b.count(`td[data-label="Run"]`), b.count("#older"); n != 100 || more != 1 {
		t.Errorf("the completed runs of nightly: %d rows, %d links to older ones", n, more)
	}
	b.within("/ui/runs?job=nightly&status=completed&since=7d", ".filter", "#live")
	b.shoot("runs-filtered")
	b.submit("the older runs", chromedp.Click(chromedp.CSS("#older")))
	if n, newest := b.count(`td[data-label="Run"]`), b.count("#newest"); n != 23 || newest != 1 || b.count("#older") != 0 {
		t.Errorf("the older completed runs of nightly: %d rows (want 23), %d links to the newest", n, newest)
	}
	if loc := b.location(); !strings.Contains(loc, "since=7d") || !strings.Contains(loc, "status=completed") || !strings.Contains(loc, "before=") {
		t.Errorf("the page of older runs is %s", loc)
	}
	b.shoot("runs-paged")

	// A cron job that fails with exit code 3: its runs, made by the
	// schedule, in the runs table. No word, id or exit code breaks.
	waitFor(t, "two runs of often", time.Minute, func() bool {
		return len(jsonLines(t, e.ok("runs", "--job", "often", "--status", "dead_letter", "--json"))) >= 2
	})
	for _, page := range []string{"/ui/runs", "/ui/runs?job=often", "/ui/jobs/often"} {
		b.open(page, "#live")
		for _, sc := range screens {
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
			if sc.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			b.do("the size of a "+sc.name, chromedp.EmulateViewport(sc.width, sc.height, opts...))
			eval[bool](b, afterPaint)
			if broken := eval[string](b, brokenCells); broken != "" {
				t.Errorf("%s at %d px: these break over lines: %s", page, sc.width, broken)
			}
		}
		b.do("back to the desktop's size", chromedp.EmulateViewport(1280, 900))
	}
	if n := b.count(`td[data-label="Trigger"]`); n < 2 || !strings.Contains(b.text("#live"), "schedule") || !strings.Contains(b.text("#live"), "exit 3") {
		t.Errorf("the runs of often: %d rows, %q", n, b.text("#live"))
	}
	b.shoot("job-failing")
	b.open("/ui/runs", "#live")
	b.shoot("runs-all")
	b.open("/ui/runs/no-such-run", "#failure")
	b.shoot("error")

	// An output longer than a page shows: its head and tail, and a link to
	// the whole of it.
	chatty := jsonOne(t, e.ok("trigger", "chatty", "--wait", "--json"))["id"].(string)
	b.open("/ui/runs/"+chatty, ".output")
	if out := b.text(".output"); !strings.HasPrefix(out, "line 1\nline 2\n") || !strings.HasSuffix(out, "line 39999\nline 40000\n") ||
		!strings.Contains(out, "not shown here") || len(out) > 40<<10 {
		t.Errorf("the output of chatty on its page: %d bytes, %.200q ... %.200q", len(out), out, out[max(0, len(out)-200):])
	}
	b.shoot("run-long-output")
	b.do("open the whole output", chromedp.Click(chromedp.CSS("a.whole-output")), chromedp.WaitReady(chromedp.CSS("body")))
	b.waitFor("the whole output", `document.location.pathname.endsWith('/attempts/1/output') && document.body.innerText.includes('line 40000')`, 30*time.Second)
	if n := eval[int](b, `document.body.innerText.length`); n < 128<<10 {
		t.Errorf("the whole output has %d characters, want the 128 KiB stored", n)
	}
	b.open("/ui/", "#counts-h")

	// A read token: no button, and a forged POST is refused by the API.
	b.submit("log out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)))
	if b.count("#token") != 1 || len(b.cookies()) != 0 {
		t.Fatalf("after the log out: %q, cookies %v", b.text("main"), b.cookies())
	}
	if st := b.submit("log in with the read token", chromedp.SendKeys(chromedp.CSS("#token"), reader.token), chromedp.Click(chromedp.CSS("#login"))); st != http.StatusOK {
		t.Fatalf("log in with the read token: HTTP %d, %q", st, b.text("main"))
	}
	for _, page := range []string{"/ui/jobs/echo", "/ui/jobs/tick", "/ui/runs/" + echoRun, "/ui/runs/" + slowRun} {
		b.open(page, "#live")
		if n := b.count(`form[method="post"]:not([action="/ui/logout"]), #trigger, #trigger-with, #pause, #resume, #cancel, #rerun`); n != 0 {
			t.Errorf("%s shows a read token %d action forms or buttons", page, n)
		}
	}
	b.open("/ui/jobs/echo", "#live")
	b.shoot("job-read-only")
	b.open("/ui/runs", "#live")
	b.shoot("runs")
	forged := eval[string](b, `(async () => {
		const csrf = document.querySelector('input[name="csrf"]').value;
		const r = await fetch('/ui/jobs/echo/trigger', {method: 'POST', body: new URLSearchParams({csrf: csrf, payload: 'forged'})});
		return r.status + ' ' + (await r.text());
	})()`)
	if !strings.HasPrefix(forged, "403 ") || !strings.Contains(forged, "needs a token with the role operate") {
		t.Errorf("a read token's forged trigger: %.300s", forged)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	if status, _, body := rawAPI(t, hc, base+"/v1/jobs/echo/trigger", "POST", "Bearer "+reader.token, nil); status != http.StatusForbidden {
		t.Errorf("the API took a read token's trigger: %d %s", status, body)
	}
	if runs := jsonLines(t, e.ok("runs", "--job", "echo", "--json")); len(runs) != 2 {
		t.Errorf("echo has %d runs after the read token's attempts, want 2", len(runs))
	}
	logs := d.logText()
	if strings.Contains(logs, operator.token) || strings.Contains(logs, reader.token) {
		t.Error("a token is in the daemon's log")
	}
	// The browser's own requests (its icon) are no refusals; the wrong
	// token of the login is one, logged once.
	if n := strings.Count(logs, "refused a request without a token"); n != 0 {
		t.Errorf("the daemon logged %d requests without a token:\n%s", n, grepLines(logs, "refused"))
	}
	if n := strings.Count(logs, "refused a token that is not one"); n != 1 {
		t.Errorf("the daemon logged %d refused tokens, want 1:\n%s", n, grepLines(logs, "refused"))
	}
	t.Logf("screenshots in %s", b.shots)
}

// within checks, at a phone's and a desktop's width, that the page does
// not scroll sideways and that each element of sels is within the width
// of the window.
func (b *browser) within(page string, sels ...string) {
	b.t.Helper()
	for _, sc := range screens {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if sc.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		b.do("the size of a "+sc.name, chromedp.EmulateViewport(sc.width, sc.height, opts...))
		eval[bool](b, afterPaint)
		if wide := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); wide > 0 {
			b.t.Errorf("%s at %d px scrolls sideways by %d px", page, sc.width, wide)
		}
		for _, sel := range sels {
			js := fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth; })()`, sel)
			if !eval[bool](b, js) {
				b.t.Errorf("%s at %d px: %s is not within the window", page, sc.width, sel)
			}
		}
	}
	b.do("back to the desktop's size", chromedp.EmulateViewport(1280, 900))
}

// brokenCells lists the texts of the cells that must stay on one line and
// do not: the trigger ("schedule"), a run's id and an exit code.
const brokenCells = `(() => {
	const bad = [];
	for (const el of document.querySelectorAll('td[data-label="Trigger"], td[data-label="Run"] a, .exit')) {
		const r = document.createRange();
		r.selectNodeContents(el);
		const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
		if (lines.size > 1) bad.push(el.textContent);
	}
	return bad.join(' | ');
})()`

// jobNamed returns the line of `jobs --json` about job.
func jobNamed(t *testing.T, e *env, job string) map[string]any {
	t.Helper()
	for _, j := range jsonLines(t, e.ok("jobs", "--json")) {
		if j["name"] == job {
			return j
		}
	}
	t.Fatalf("jobs --json has no %s", job)
	return nil
}

// TestDashboardRunPageMemory: a run whose attempt stored 32 MiB of '<'
// (the largest output_limit), which HTML escapes four times over, asked
// for by 16 browsers at once with a read token: each page shows a
// bounded head and tail of the output with a link to the whole of it,
// and the daemon's peak memory stays under 300 MiB (the page built whole
// took gigabytes). The link streams the whole output, within the API's
// budget of output replies.
func TestDashboardRunPageMemory(t *testing.T) {
	proctest.Long(t, "32 MiB of output shown to 16 browsers")
	const written, limit, browsers = 64 << 20, 16 << 20, 16
	e := newEnv(t)
	addr := freeAddr(t)
	reader := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(2, fmt.Sprintf("api_listen = %q\n", addr), fmt.Sprintf(`[[job]]
name = "loud"
output_limit = %d
shell = 'head -c %d /dev/zero | tr "\000" "<"'
`, limit, written)+reader.table)
	d := e.start(true)
	id := jsonField(t, e.ok("trigger", "loud", "--json"), "id")
	st := e.openStore()
	waitFor(t, "the run to finish", 2*time.Minute, func() bool {
		run, err := st.RunGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return run.Status.Terminal()
	})
	base := "http://" + addr
	hc := &http.Client{Timeout: 2 * time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"token": {reader.token}}
	req, _ := http.NewRequest("POST", base+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "schedulerd_session" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("log in: %s", resp.Status)
	}
	get := func(path string) (int, int64, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.AddCookie(cookie)
		resp, err := hc.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return 0, 0, ""
		}
		defer resp.Body.Close()
		var head strings.Builder
		n, err := io.Copy(&head, io.LimitReader(resp.Body, 4<<20))
		m, err2 := io.Copy(io.Discard, resp.Body)
		if err == nil {
			err = err2
		}
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
		return resp.StatusCode, n + m, head.String()
	}

	pid := d.cmd.Process.Pid
	before := peakRSS(t, pid)
	var wg sync.WaitGroup
	for range browsers {
		wg.Go(func() {
			status, size, body := get("/ui/runs/" + id)
			if status != http.StatusOK || size > 2<<20 || !strings.Contains(body, "all 32.0 MiB as text") ||
				!strings.Contains(body, "not shown here") || !strings.Contains(body, "&lt;&lt;&lt;") {
				t.Errorf("the run's page: %d, %d bytes:\n%.1000s", status, size, body)
			}
		})
	}
	wg.Wait()
	peak := peakRSS(t, pid)
	t.Logf("the daemon's peak memory: %d MiB after the run, %d MiB after %d pages of it at once", before>>20, peak>>20, browsers)
	if peak > 300<<20 {
		t.Errorf("the daemon's peak memory is %d MiB after %d pages of a run with 32 MiB of output, want under 300 MiB", peak>>20, browsers)
	}

	// The whole output, through the API's budget: two at once are sent,
	// the others are told to wait.
	var sent, refused atomic.Int64
	for range 4 {
		wg.Go(func() {
			switch status, size, _ := get("/ui/runs/" + id + "/attempts/1/output"); status {
			case http.StatusOK:
				if size < 2*limit {
					t.Errorf("the whole output has %d bytes, want at least %d", size, 2*limit)
				}
				sent.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				t.Errorf("the whole output: %d", status)
			}
		})
	}
	wg.Wait()
	t.Logf("whole outputs: %d sent, %d told to wait; the daemon's peak memory %d MiB", sent.Load(), refused.Load(), peakRSS(t, pid)>>20)
	if sent.Load() == 0 {
		t.Error("no whole output was sent")
	}
	d.stop()
}
