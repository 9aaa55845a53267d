package dashboard

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestRunPageLiveOutput: the page of a run whose attempt runs has, in
// its live part, an element that the script fills with the attempt's
// output as it is written, and a link to it as text; that link streams
// the output as it is written, with the dashboard's headers, to a
// session alone. The page of a finished attempt has neither.
func TestRunPageLiveOutput(t *testing.T) {
	// Each page read anew: the test changes the run between two.
	td := startDash(t, func(c *Config) { c.SnapshotTTL = time.Nanosecond })
	run := td.insertRun(t, "backup", "")
	claimed, err := td.st.RunsClaim(t.Context(), store.ClaimParams{Node: "test-node", Incarnation: "inc",
		Jobs: store.NewJobLimits(map[string]int{"backup": 0}), Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	live := newFakeLive()
	td.eng.setLive(run.ID, live)
	cookie := td.login(t, readToken)
	follow := "/ui/runs/" + run.ID + "/output?attempt=1&follow=1"
	part := td.do(t, req{method: "GET", path: "/ui/runs/" + run.ID + "?part=live", cookie: cookie})
	for _, want := range []string{
		`<pre class="out output live-output" id="live-output-1" data-follow="` + strings.ReplaceAll(follow, "&", "&amp;") + `"></pre>`,
		`<a href="` + strings.ReplaceAll(follow, "&", "&amp;") + `" class="follow-output">as text</a>`,
	} {
		if part.status != http.StatusOK || !strings.Contains(part.body, want) {
			t.Fatalf("the live part of a running attempt lacks %s:\n%s", want, part.body)
		}
	}

	// The link streams the output as it is written.
	r, err := http.NewRequest("GET", td.url+follow, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
	resp, err := (&http.Client{Transport: td.tr, Timeout: 30 * time.Second}).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != http.StatusOK || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Schedulerd-Output") != "live" ||
		h.Get("Content-Security-Policy") != contentSecurityPolicy || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("the followed output: %d %v", resp.StatusCode, h)
	}
	br := bufio.NewReader(resp.Body)
	live.write("<b>first</b>\n", false)
	if l, err := br.ReadString('\n'); l != "<b>first</b>\n" || err != nil {
		t.Fatalf("the first line as it is written: %q %v", l, err)
	}
	live.write("second\n", true)
	if rest, err := io.ReadAll(br); string(rest) != "second\n" || err != nil {
		t.Fatalf("the rest, until the attempt ended: %q %v", rest, err)
	}

	if r := td.do(t, req{method: "GET", path: follow}); r.status != http.StatusSeeOther {
		t.Errorf("the followed output without a session: %d", r.status)
	}
	for path, want := range map[string]int{
		"/ui/runs/nope/output?follow=1":         http.StatusNotFound,
		"/ui/runs/" + run.ID + "/output?x=1":    http.StatusBadRequest,
		"/ui/runs/" + run.ID + "/output?from=z": http.StatusBadRequest,
	} {
		if r := td.do(t, req{method: "GET", path: path, cookie: cookie}); r.status != want || !strings.Contains(r.body, "The output could not be read") {
			t.Errorf("GET %s: %d, want %d\n%.500s", path, r.status, want, r.body)
		}
	}

	td.eng.setLive(run.ID, nil)
	td.failAttemptClaimed(t, claimed[0], "<b>first</b>\nsecond\n")
	part = td.do(t, req{method: "GET", path: "/ui/runs/" + run.ID + "?part=live", cookie: cookie})
	if strings.Contains(part.body, "data-follow") || !strings.Contains(part.body, "&lt;b&gt;first&lt;/b&gt;") {
		t.Errorf("the live part of a finished attempt:\n%s", part.body)
	}
}

// failAttemptClaimed fails the attempt of c, claimed before, with output.
func (td *testDash) failAttemptClaimed(t *testing.T, c *jobs.Run, output string) {
	t.Helper()
	code := 1
	if _, err := td.st.RunTransition(t.Context(), jobs.Finish(c, jobs.Fence{RunID: c.ID, Attempt: c.Attempt, Incarnation: c.Incarnation}, "test-node",
		jobs.Result{ExitCode: &code, Output: output, OutputBytes: int64(len(output))}, time.Now(), func() float64 { return 0 })); err != nil {
		t.Fatal(err)
	}
}
