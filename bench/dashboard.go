package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

const secDashboard = "7 dashboard"

// dashboardTries is how often each page is timed; the figure is the
// slowest.
const dashboardTries = 5

// runDashboard is figure 7: the dashboard's pages of a daemon with many
// jobs, on each store.
func runDashboard(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	n := slices.Max(o.sizes.memory)
	rep.Section(secDashboard)
	rep.Note(secDashboard, "Method: a `schedulerd run` process with %[1]s daily schedules (as in figure 3, none due) and "+
		"api_listen on 127.0.0.1; a read token logs in to the dashboard once. Each page is then asked for %[2]d times, each "+
		"over a new connection and after the dashboard's snapshots have expired (1.1 s apart, so every try reads its data "+
		"from the engine and the store), and timed until its body is read whole: the figure is the slowest. The overview "+
		"lists the first page of 200 jobs, with the nodes and the counts of runs by status; a filtered overview lists "+
		"the jobs whose name contains a string (100 of them match); a job's page shows one job with its next ticks "+
		"and runs.", thousands(int64(n)), dashboardTries)
	rep.Note(secDashboard, "Checks: each page answers 200; the overview says how many jobs there are and lists 200 of them.")
	var errs []error
	for _, kind := range o.stores {
		if err := dashboardPages(ctx, e, kind, n); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", storeName(kind), err))
		}
	}
	return errors.Join(errs...)
}

// dashboardPages is runDashboard on one store.
func dashboardPages(ctx context.Context, e *env, kind string, n int) error {
	rep := e.rep
	bin, err := e.daemon()
	if err != nil {
		return err
	}
	b, err := e.newBackend(ctx, kind, "dashboard")
	if err != nil {
		return err
	}
	defer b.close(context.WithoutCancel(ctx))
	addr, err := freePort()
	if err != nil {
		return err
	}
	dir, err := e.subdir("dashboard")
	if err != nil {
		return err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	token := "sd_" + base64.RawURLEncoding.EncodeToString(raw)
	table := fmt.Sprintf("[[token]]\nname = \"bench\"\nrole = \"read\"\nsha256 = \"%x\"\n\n", sha256.Sum256([]byte(token)))
	p, err := startDaemon(ctx, bin, dir, daemonConfig{NodeID: "node-1", Store: b.storeDaemonConfig("@STATE@"),
		Extra: fmt.Sprintf("api_listen = %q\n", addr)}, table+idleJobsTOML(idleSpecs(n, time.Now())), 10*time.Minute)
	if err != nil {
		return err
	}
	defer p.stop(30 * time.Second)
	base := "http://" + addr
	cookie, err := dashboardLogin(ctx, base, token)
	if err != nil {
		return err
	}
	// The jobs are idle-000000, idle-000001, ...: "idle-0001" names 100.
	pages := []struct{ name, path, want string }{
		{"overview", "/ui/", fmt.Sprintf("Jobs <small>%d</small>", n)},
		{"filtered overview", "/ui/?q=idle-0001", "Jobs <small>100 named like"},
		{"a job's page", fmt.Sprintf("/ui/jobs/idle-%06d", n/2), "Next ticks"},
	}
	for _, pg := range pages {
		var times []time.Duration
		var size int
		for range dashboardTries {
			if err := sleepCtx(ctx, 1100*time.Millisecond); err != nil {
				return err
			}
			took, body, err := dashboardGet(ctx, base+pg.path, cookie)
			if err != nil {
				return fmt.Errorf("GET %s: %w", pg.path, err)
			}
			if !strings.Contains(body, pg.want) {
				rep.Failf(secDashboard, "%s: GET %s of a daemon with %s jobs has no %q", storeName(kind), pg.path, thousands(int64(n)), pg.want)
			}
			if pg.name == "overview" {
				if got := strings.Count(body, `href="/ui/jobs/idle-`); got != 200 {
					rep.Failf(secDashboard, "%s: the overview lists %d jobs, want 200", storeName(kind), got)
				}
			}
			times, size = append(times, took), len(body)
		}
		slowest := slices.Max(times)
		rep.Rawf(secDashboard, "%s: daemon with %s jobs: %s %s in %v", storeName(kind), thousands(int64(n)), pg.name, kib(size), roundAll(times))
		rep.Add(Figure{Section: secDashboard, Name: fmt.Sprintf("dashboard %s, %s jobs", pg.name, thousands(int64(n))),
			Store: storeName(kind), Value: msf(slowest), Unit: "ms", Target: atMost(200),
			Text: fmt.Sprintf("%s (%s)", ms(slowest), kib(size))})
	}
	return nil
}

// dashboardLogin logs in with token and returns the session cookie.
func dashboardLogin(ctx context.Context, base, token string) (*http.Cookie, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "schedulerd_session" && resp.StatusCode == http.StatusSeeOther {
			return c, nil
		}
	}
	return nil, fmt.Errorf("log in: %s, no session", resp.Status)
}

// dashboardGet reads a page with the session's cookie on a new connection.
func dashboardGet(ctx context.Context, u string, cookie *http.Cookie) (time.Duration, string, error) {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	req.AddCookie(cookie)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	return took, string(body), err
}

// kib is a size in KiB, for raw lines and figures.
func kib(n int) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }
