package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/schedulerd/schedulerd/internal/proctest"
)

// TestDashboardBackfillInBrowser drives the backfill form of a cron job's
// page in headless Chromium against a real daemon: a dry run of
// yesterday (a date, in the job's time zone) lists its hourly ticks and
// makes nothing; its button backfills them, one at a time, and every tick
// ends with one completed run of trigger backfill. A read token sees no
// form, and the form it forges with its own page's CSRF token is refused
// by the API's role check. The form and both replies are shot at a
// phone's and a desktop's width.
func TestDashboardBackfillInBrowser(t *testing.T) {
	proctest.Long(t, "a browser and a daemon")
	e := newEnv(t)
	addr := freeAddr(t)
	operator := newCLIToken(t, e.dir, "ci", "operate")
	reader := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(4, fmt.Sprintf("api_listen = %q\n", addr), `[[job]]
name = "hourly"
schedule = "0 * * * *"
timezone = "Europe/Berlin"
command = ["/bin/true"]
`+"\n"+operator.table+"\n"+reader.table)
	d := e.start(true)
	base := "http://" + addr
	b := newBrowser(t, base)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	y, m, dd := time.Now().In(berlin).AddDate(0, 0, -1).Date()
	dayStart, dayEnd := time.Date(y, m, dd, 0, 0, 0, 0, berlin), time.Date(y, m, dd+1, 0, 0, 0, 0, berlin)
	day := dayStart.Format(time.DateOnly)
	ticks := int(dayEnd.Sub(dayStart) / time.Hour) // 23 or 25 on a day of a DST change

	b.open("/ui/login", "#token")
	if st := b.submit("log in", chromedp.SendKeys(chromedp.CSS("#token"), operator.token), chromedp.Click(chromedp.CSS("#login"))); st != http.StatusOK {
		t.Fatalf("log in: HTTP %d, %q", st, b.text("main"))
	}
	b.open("/ui/jobs/hourly", "#pause")
	b.do("open the backfill's form", chromedp.Click(chromedp.CSS("#backfill-options summary")), chromedp.WaitVisible(chromedp.CSS("#backfill_from")))
	b.do("fill the backfill's form", chromedp.SendKeys(chromedp.CSS("#backfill_from"), day), chromedp.SendKeys(chromedp.CSS("#backfill_to"), day))
	b.shoot("job-backfill-form")
	if st := b.submit("a dry run", chromedp.Click(chromedp.CSS("#backfill"))); st != http.StatusOK || b.count("#backfill-ticks") != 1 {
		t.Fatalf("dry run: HTTP %d, %q", st, b.text("main"))
	}
	if n := b.count("#backfill-ticks tbody tr"); n != ticks {
		t.Errorf("the dry run lists %d ticks, want %d", n, ticks)
	}
	summary := b.text("#backfill-summary")
	if !strings.Contains(summary, strconv.Itoa(ticks)+" ticks, 0 with a run already") || !strings.Contains(summary, day+" 00:00:00") ||
		!strings.Contains(summary, "Europe/Berlin") {
		t.Errorf("the dry run says %q", summary)
	}
	for _, r := range jsonLines(t, e.ok("runs", "--job", "hourly", "--limit", "100", "--json")) {
		if r["trigger"] == "backfill" {
			t.Fatalf("a dry run made run %v", r)
		}
	}
	b.within("the dry run", "#backfill-summary", "#backfill-ticks", "#backfill-confirm")
	b.shoot("backfill-dry-run")

	if st := b.submit("backfill", chromedp.Click(chromedp.CSS("#backfill-confirm"))); st != http.StatusOK || b.count("#backfill-result") != 1 {
		t.Fatalf("backfill: HTTP %d, %q", st, b.text("main"))
	}
	if res := b.text("#backfill-result"); !strings.Contains(res, "runs made") {
		t.Errorf("the backfill says %q", res)
	}
	b.shoot("backfill-started")
	n := 0
	deadline := time.Now().Add(60 * time.Second)
	for n != ticks {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d ticks of yesterday run\n%s\n%s", n, ticks, e.ok("runs", "--job", "hourly"), d.logText())
		}
		time.Sleep(100 * time.Millisecond)
		n = 0
		for _, r := range jsonLines(t, e.ok("runs", "--job", "hourly", "--status", "completed", "--limit", "100", "--json")) {
			if r["trigger"] == "backfill" {
				n++
			}
		}
	}

	// A read token: no form, and its forged one is refused.
	b.submit("log out", chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)))
	if st := b.submit("log in with the read token", chromedp.SendKeys(chromedp.CSS("#token"), reader.token), chromedp.Click(chromedp.CSS("#login"))); st != http.StatusOK {
		t.Fatalf("log in with the read token: HTTP %d, %q", st, b.text("main"))
	}
	b.open("/ui/jobs/hourly", "#live")
	if n := b.count(`#backfill-options, form[action$="/backfill"]`); n != 0 {
		t.Errorf("a read token's page shows %d backfill forms", n)
	}
	forged := eval[string](b, `(async () => {
		const csrf = document.querySelector('input[name="csrf"]').value;
		const r = await fetch('/ui/jobs/hourly/backfill', {method: 'POST', body: new URLSearchParams({csrf: csrf, from: '`+day+`', to: '`+day+`'})});
		return r.status + ' ' + (await r.text());
	})()`)
	if !strings.HasPrefix(forged, "403 ") || !strings.Contains(forged, "needs a token with the role operate") {
		t.Errorf("a read token's forged backfill: %.300s", forged)
	}
	t.Logf("screenshots in %s", b.shots)
}
