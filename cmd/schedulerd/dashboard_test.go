package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/internal/testtool"
)

// chromium returns the path of Debian's Chromium, which the dashboard's
// browser test drives. CI installs it (.ci/run); elsewhere the test is
// skipped without it (testtool).
func chromium(t *testing.T) string {
	t.Helper()
	return testtool.Path(t, "chromium", "chromium", "chromium-browser", "google-chrome")
}

// dashboardJobs: echo prints its payload and some HTML, slow reports
// progress and sleeps until cancelled, tick is a cron job to pause.
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
`, binary, filepath.Join(dir, "slow.pid"))
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
// root, which it refuses otherwise) with a tab of 1366x900.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1366, 900),
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

// Sizes of the screenshots: a phone's and a laptop's.
var screens = []struct {
	name          string
	width, height int64
	mobile        bool
}{
	{"phone", 390, 844, true},
	{"desktop", 1366, 900, false},
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
	b.do("back to the desktop's size", chromedp.EmulateViewport(1366, 900))
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
	addr := freeAddr(t)
	operator := newCLIToken(t, e.dir, "ci", "operate")
	reader := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(4, fmt.Sprintf("api_listen = %q\n", addr), dashboardJobs(e.dir)+"\n"+operator.table+"\n"+reader.table)
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
	b.shoot("overview")

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
	if logs := d.logText(); strings.Contains(logs, operator.token) || strings.Contains(logs, reader.token) {
		t.Error("a token is in the daemon's log")
	}
	t.Logf("screenshots in %s", b.shots)
}

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
