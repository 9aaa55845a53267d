package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// scrapeTries is how often each scrape is taken; the figure is the
// slowest.
const scrapeTries = 3

// scrapeRuns measures what a scrape of /metrics costs with many jobs, on
// each store: a daemon whose jobs all have the cluster's last success and
// failure (every node serves those for every job it declares), and a node
// that ran one run of each of its jobs (every series of the node's own
// present).
func scrapeRuns(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	n := slices.Max(o.sizes.memory)
	rep.Note(secScale, "Scrape: a `schedulerd run` process with %[1]s daily schedules (as in figure 3, none due) on a "+
		"database whose job_results has a last success and a last failure for each of them, seeded with plain SQL (as "+
		"after a day of runs on other nodes); after READY=1, GET /metrics on health_listen %[2]d times over a new "+
		"connection, each timed until its body is read whole: the figure is the slowest. Then a node in this process "+
		"(concurrency %[3]d) with %[1]s jobs of no-op Go handlers, one run of each inserted with RunInsertMany and burned: "+
		"each job then has every per-job series of its own (runs by status, duration and start lag histograms) "+
		"as well as the cluster's; WriteJobMetrics (every per-job family) is timed %[2]d times into a counting writer "+
		"(the check below reads one more scrape, untimed).",
		thousands(int64(n)), scrapeTries, o.concurrency)
	rep.Note(secScale, "Checks: each scrape has a last success for every job; after the burn, each job's run completed "+
		"and each has one run counted.")
	var errs []error
	for _, kind := range o.stores {
		if err := scrapeDaemon(ctx, e, kind, n); err != nil {
			errs = append(errs, fmt.Errorf("%s: scrape of a daemon: %w", storeName(kind), err))
		}
		if err := scrapeRan(ctx, e, kind, n); err != nil {
			errs = append(errs, fmt.Errorf("%s: scrape of a node that ran every job: %w", storeName(kind), err))
		}
	}
	return errors.Join(errs...)
}

// scrapeDaemon is the daemon's part of scrapeRuns.
func scrapeDaemon(ctx context.Context, e *env, kind string, n int) error {
	rep := e.rep
	bin, err := e.daemon()
	if err != nil {
		return err
	}
	b, err := e.newBackend(ctx, kind, "scrape")
	if err != nil {
		return err
	}
	defer b.close(context.WithoutCancel(ctx))
	// The jobs of idleJobsTOML are idle-000000, idle-000001, ...
	success, failure := time.Now().Add(-time.Hour), time.Now().Add(-2*time.Hour)
	seedSQL := `WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g < ? - 1)
		INSERT INTO job_results (job, last_success_at, last_failure_at) SELECT printf('idle-%06d', g), ? + g, ? FROM s`
	args := []any{n, success.UnixMicro(), failure.UnixMicro()}
	if kind == kindPostgres {
		seedSQL = `INSERT INTO job_results (job, last_success_at, last_failure_at)
			SELECT 'idle-' || lpad(g::text, 6, '0'), ?::timestamptz + g * interval '1 microsecond', ?::timestamptz
			FROM generate_series(0, ?::int - 1) g`
		args = []any{success.UTC(), failure.UTC(), n}
	}
	if err := b.db.exec(ctx, seedSQL, args...); err != nil {
		return fmt.Errorf("seed job_results: %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return err
	}
	dir, err := e.subdir("scrape")
	if err != nil {
		return err
	}
	p, err := startDaemon(ctx, bin, dir, daemonConfig{NodeID: "node-1", Store: b.storeDaemonConfig("@STATE@"),
		Extra: fmt.Sprintf("health_listen = %q\n", addr)}, idleJobsTOML(idleSpecs(n, time.Now())), 10*time.Minute)
	if err != nil {
		return err
	}
	defer p.stop(30 * time.Second)
	var times []time.Duration
	var size int
	for range scrapeTries {
		took, body, err := scrapeOnce(ctx, addr)
		if err != nil {
			return err
		}
		if got := bytes.Count(body, []byte("\nschedulerd_job_last_success_timestamp_seconds{")); got != n {
			rep.Failf(secScale, "%s: a scrape of a daemon with %s jobs has %d last successes", storeName(kind),
				thousands(int64(n)), got)
		}
		times, size = append(times, took), len(body)
	}
	slowest := slices.Max(times)
	rep.Rawf(secScale, "%s: daemon with %s jobs, each with a last success and failure: /metrics %s in %v",
		storeName(kind), thousands(int64(n)), mib(int64(size)), roundAll(times))
	rep.Add(Figure{Section: secScale, Name: fmt.Sprintf("scrape of /metrics, %s jobs with the cluster's results", thousands(int64(n))),
		Store: storeName(kind), Value: msf(slowest), Unit: "ms", Target: atMost(1000),
		Text: fmt.Sprintf("%s (%s)", ms(slowest), mib(int64(size)))})
	return nil
}

// scrapeOnce reads /metrics at addr on a new connection.
func scrapeOnce(ctx context.Context, addr string) (time.Duration, []byte, error) {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return took, body, err
}

// scrapeRan is the in-process node's part of scrapeRuns.
func scrapeRan(ctx context.Context, e *env, kind string, n int) error {
	rep, o := e.rep, e.opts
	b, err := e.newBackend(ctx, kind, "scrape_ran")
	if err != nil {
		return err
	}
	defer b.close(context.WithoutCancel(ctx))
	st, err := b.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	defs := make([]*jobs.Definition, n)
	for i := range defs {
		defs[i] = &jobs.Definition{Name: fmt.Sprintf("ran-%06d", i), Handler: func(context.Context) error { return nil }}
		defs[i].WithDefaults()
	}
	now := time.Now()
	for start := 0; start < n; start += insertChunk {
		var ps []store.RunInsertParams
		for _, d := range defs[start:min(start+insertChunk, n)] {
			ps = append(ps, store.RunInsertParams{Job: d.Name, Trigger: jobs.TriggerManual, NotBefore: now, Retry: d.Retry, Node: "bench"})
		}
		if _, err := st.RunInsertMany(ctx, ps); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
	}
	nodes, err := startNodes(ctx, kind, []store.Store{st}, o.concurrency, defs)
	if err != nil {
		return err
	}
	defer stopNodes(nodes)
	began := time.Now()
	for completedBy(nodes) < int64(n) {
		if time.Since(began) > 5*time.Minute {
			return fmt.Errorf("%d of %d runs completed in 5 minutes", completedBy(nodes), n)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	burn := time.Since(began)
	var (
		times []time.Duration
		size  int64
	)
	for range scrapeTries {
		w := &countingWriter{}
		start := time.Now()
		nodes[0].sched.WriteJobMetrics(w)
		times, size = append(times, time.Since(start)), w.n
	}
	// The check reads one more scrape, untimed: keeping 120 MiB in memory
	// costs more than writing it, and /metrics streams it.
	var body strings.Builder
	nodes[0].sched.WriteJobMetrics(&body)
	if got := strings.Count(body.String(), "\nschedulerd_job_runs_total{"); got != n {
		rep.Failf(secScale, "%s: %d jobs counted a run, want %d", storeName(kind), got, n)
	}
	slowest := slices.Max(times)
	rep.Rawf(secScale, "%s: node with %s jobs that each ran once (burned in %s): WriteJobMetrics %s in %v",
		storeName(kind), thousands(int64(n)), burn.Round(time.Millisecond), mib(size), roundAll(times))
	rep.Add(Figure{Section: secScale, Name: fmt.Sprintf("per-job metrics, %s jobs each run once on the node", thousands(int64(n))),
		Store: storeName(kind), Value: msf(slowest), Unit: "ms", Target: atMost(1000),
		Text: fmt.Sprintf("%s (%s)", ms(slowest), mib(size))})
	return nil
}

// countingWriter counts the bytes written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// freePort returns a loopback address with a port that is free now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// roundAll rounds durations to the millisecond, for raw lines.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
