package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

const secScale = "5 scale"

// runScale is figure 5: claim latency and throughput with a small and a
// large number of runs waiting, and the memory of a daemon with many
// schedules.
func runScale(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	rep.Section(secScale)
	rep.Note(secScale, "Method: a database is seeded with N runs of the measured job: half pending with not_before a "+
		"day ahead, half completed history (each with its attempt and its created/claimed/completed events, in the rows "+
		"the store writes: on PostgreSQL the attempt row stands for the claimed and completed events). "+
		"The seeding uses plain SQL (INSERT ... SELECT over generate_series or a recursive CTE) copying a template "+
		"run made by the store, and is checked by reading seeded runs back through the store (RunGet, "+
		"RunAttempts, RunEvents). PostgreSQL: ANALYZE after seeding (autovacuum would, later). "+
		"Then %s due runs are inserted with RunsInsert. Claim latency: %s calls of RunsClaim with Limit 1 from one "+
		"goroutine (or as many as fit in the cap below), each claimed run completed with RunTransition before "+
		"the next claim (only RunsClaim is timed). Throughput: a node in this process (concurrency %d) burns "+
		"the remaining due runs, as in figure 1. Each of the two is capped at %s. The target compares the N = %s case with the N = %s case: p50 claim latency and "+
		"throughput within 1.5x.", thousands(int64(o.sizes.scaleDue)), thousands(int64(o.sizes.scaleClaims)),
		o.concurrency, o.sizes.scaleCap, thousands(int64(o.sizes.scaleLarge)), thousands(int64(o.sizes.scaleSmall)))
	rep.Note(secScale, "Checks: the seeded pending runs are untouched; every due run completed exactly once at attempt 1.")
	rep.Note(secScale, "Memory: a `schedulerd run` process on each store with N daily schedules (as in figure 3, none due), "+
		"VmRSS from /proc/PID/status %s after READY=1, then every second for %s: the figure is the largest; "+
		"VmHWM is the peak since exec, config parsing included.", o.sizes.memorySettle, o.sizes.memoryWindow)
	var errs []error
	for _, kind := range o.stores {
		var small, large *scaleResult
		for _, n := range []int{o.sizes.scaleSmall, o.sizes.scaleLarge} {
			r, err := scaleRun(ctx, e, kind, n)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s, %s waiting: %w", storeName(kind), thousands(int64(n)), err))
				break
			}
			if small == nil {
				small = r
			} else {
				large = r
			}
		}
		if small == nil || large == nil {
			continue
		}
		name := storeName(kind)
		ratio := msf(large.claimP50) / msf(small.claimP50)
		rep.Add(Figure{Section: secScale, Name: fmt.Sprintf("claim latency p50, %s vs %s waiting", thousands(int64(large.n)), thousands(int64(small.n))),
			Store: name, Value: ratio, Unit: "x", Target: atMost(1.5),
			Text: fmt.Sprintf("%s vs %s = %.2fx", ms(large.claimP50), ms(small.claimP50), ratio)})
		tr := small.rate / large.rate
		if large.rate == 0 {
			tr = float64(o.sizes.scaleDue)
		}
		rep.Add(Figure{Section: secScale, Name: fmt.Sprintf("throughput, %s vs %s waiting", thousands(int64(large.n)), thousands(int64(small.n))),
			Store: name, Value: tr, Unit: "x", Target: atMost(1.5),
			Text: fmt.Sprintf("%s vs %s runs/s = %.2fx slower", num(large.rate), num(small.rate), tr)})
	}
	if err := memoryRuns(ctx, e); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	return errors.Join(errs...)
}

// scaleResult is one backlog size on one store.
type scaleResult struct {
	n        int
	claimP50 time.Duration
	rate     float64
}

// seedPrefix starts the ids of seeded runs (pending: ...-8..., completed:
// ...-9...): shaped as UUIDs, and never equal to a store-made UUIDv7.
const seedPrefix = "00000000-0000-7000-"

// seed fills b with pending runs due in a day and completed history, copied
// from the template run tmpl.
func seed(ctx context.Context, b *backend, tmpl string, pending, completed int, now time.Time) error {
	var stmts []string
	var args [][]any
	if b.kind == kindPostgres {
		const cols = `id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before, not_after,
			created_at, started_at, finished_at, updated_at, node, incarnation, exit_code, error, reason, payload, retry`
		stmts = []string{
			`INSERT INTO runs (` + cols + `)
			SELECT '` + seedPrefix + `8000-' || lpad(g::text, 12, '0'), t.job, 'pending', 0, t.max_attempts, t.trigger_kind,
				x.c, $2::timestamptz + interval '1 day' + g * interval '1 millisecond', NULL,
				x.c, NULL, NULL, x.c, '', '', NULL, '', '', t.payload, t.retry
			FROM runs t CROSS JOIN generate_series(1, $3::int) g
				CROSS JOIN LATERAL (SELECT $2::timestamptz - interval '1 hour' + g * interval '1 microsecond' AS c) x
			WHERE t.id = $1`,
			`INSERT INTO runs (` + cols + `)
			SELECT '` + seedPrefix + `9000-' || lpad(g::text, 12, '0'), t.job, 'completed', 1, t.max_attempts, t.trigger_kind,
				x.c, x.c, NULL, x.c, x.c + interval '1 millisecond', x.c + interval '2 milliseconds', x.c + interval '2 milliseconds',
				'seed-node', 'seed-incarnation', NULL, '', 'succeeded', t.payload, t.retry
			FROM runs t CROSS JOIN generate_series(1, $3::int) g
				CROSS JOIN LATERAL (SELECT $2::timestamptz - interval '2 hours' + g * interval '1 microsecond' AS c) x
			WHERE t.id = $1`,
		}
		args = [][]any{{tmpl, now, pending}, {tmpl, now, completed}}
	} else {
		const cols = `id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before, not_after,
			created_at, started_at, finished_at, updated_at, node, incarnation, exit_code, error, reason, payload, retry_json`
		const hour, day = int64(time.Hour / time.Microsecond), int64(24 * time.Hour / time.Microsecond)
		us := now.UnixMicro()
		stmts = []string{
			`WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?)
			INSERT INTO runs (` + cols + `)
			SELECT printf('` + seedPrefix + `8000-%012d', g), t.job, 'pending', 0, t.max_attempts, t.trigger_kind,
				? + g, ? + g * 1000, NULL, ? + g, NULL, NULL, ? + g, '', '', NULL, '', '', t.payload, t.retry_json
			FROM s CROSS JOIN runs t WHERE t.id = ?`,
			`WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?)
			INSERT INTO runs (` + cols + `)
			SELECT printf('` + seedPrefix + `9000-%012d', g), t.job, 'completed', 1, t.max_attempts, t.trigger_kind,
				? + g, ? + g, NULL, ? + g, ? + g + 1000, ? + g + 2000, ? + g + 2000,
				'seed-node', 'seed-incarnation', NULL, '', 'succeeded', t.payload, t.retry_json
			FROM s CROSS JOIN runs t WHERE t.id = ?`,
		}
		args = [][]any{
			{pending, us - hour, us + day, us - hour, us - hour, tmpl},
			{completed, us - 2*hour, us - 2*hour, us - 2*hour, us - 2*hour, us - 2*hour, us - 2*hour, tmpl},
		}
	}
	stmts = append(stmts,
		`INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message)
		SELECT id, created_at, 'bench', 0, NULL, 'pending', 'created', '' FROM runs WHERE id LIKE '`+seedPrefix+`%'`)
	// The history in the form the store writes it: on SQLite an attempt
	// row and the claim's and the end's events as rows; on PostgreSQL
	// (migration 007) the attempt row stands for both events.
	if b.kind == kindPostgres {
		stmts = append(stmts,
			`INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason,
				claimed_from, end_node)
			SELECT id, 1, node, incarnation, started_at, finished_at, 'completed', NULL, '', 'succeeded', 'pending', node
			FROM runs WHERE incarnation = 'seed-incarnation'`)
	} else {
		stmts = append(stmts,
			`INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason)
			SELECT id, 1, node, incarnation, started_at, finished_at, 'completed', NULL, '', 'succeeded'
			FROM runs WHERE incarnation = 'seed-incarnation'`,
			`INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message)
			SELECT id, started_at, node, 1, 'pending', 'running', 'claimed', '' FROM runs WHERE incarnation = 'seed-incarnation'`,
			`INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message)
			SELECT id, finished_at, node, 1, 'running', 'completed', 'succeeded', '' FROM runs WHERE incarnation = 'seed-incarnation'`)
	}
	for i, q := range stmts {
		var a []any
		if i < len(args) {
			a = args[i]
		}
		if err := b.db.exec(ctx, q, a...); err != nil {
			return fmt.Errorf("seed (statement %d): %w", i+1, err)
		}
	}
	if b.kind == kindPostgres {
		return b.db.exec(ctx, `ANALYZE`)
	}
	return nil
}

// checkSeed reads seeded runs back through the store.
func checkSeed(ctx context.Context, st store.Store) error {
	p, err := st.RunGet(ctx, seedPrefix+"8000-000000000001")
	if err != nil {
		return fmt.Errorf("seeded pending run: %w", err)
	}
	if p.Status != jobs.StatusPending || p.Attempt != 0 || p.Retry.MaxAttempts < 1 {
		return fmt.Errorf("seeded pending run reads back as %s at attempt %d", p.Status, p.Attempt)
	}
	c, err := st.RunGet(ctx, seedPrefix+"9000-000000000001")
	if err != nil {
		return fmt.Errorf("seeded completed run: %w", err)
	}
	if c.Status != jobs.StatusCompleted || c.Attempt != 1 || c.FinishedAt.IsZero() {
		return fmt.Errorf("seeded completed run reads back as %s at attempt %d", c.Status, c.Attempt)
	}
	atts, err := st.RunAttempts(ctx, c.ID)
	if err != nil || len(atts) != 1 {
		return fmt.Errorf("seeded completed run: %d attempts: %v", len(atts), err)
	}
	evs, err := st.RunEvents(ctx, c.ID)
	if err != nil || len(evs) != 3 {
		return fmt.Errorf("seeded completed run: %d events: %v", len(evs), err)
	}
	for i, want := range []jobs.Status{jobs.StatusPending, jobs.StatusRunning, jobs.StatusCompleted} {
		if evs[i].To != want {
			return fmt.Errorf("seeded completed run: event %d to %s, want %s", i+1, evs[i].To, want)
		}
	}
	return nil
}

// scaleRun measures one backlog size on one store.
func scaleRun(ctx context.Context, e *env, kind string, n int) (*scaleResult, error) {
	rep, o := e.rep, e.opts
	b, err := e.newBackend(ctx, kind, "scale")
	if err != nil {
		return nil, err
	}
	defer b.close(context.WithoutCancel(ctx))
	st, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	log := newExecLog(o.sizes.scaleDue)
	d := &jobs.Definition{Name: "noop", Handler: log.handler}
	d.WithDefaults()
	label := fmt.Sprintf("%s, %s waiting", b.name, thousands(int64(n)))

	now := time.Now()
	tmpl, err := st.RunInsert(ctx, store.RunInsertParams{Job: d.Name, Trigger: jobs.TriggerManual,
		NotBefore: now.Add(24 * time.Hour), Retry: d.Retry, Node: "bench"})
	if err != nil {
		return nil, err
	}
	pending, completed := n/2-1, n-n/2
	t0 := time.Now()
	if err := seed(ctx, b, tmpl.ID, pending, completed, now); err != nil {
		return nil, err
	}
	seedTook := time.Since(t0)
	if err := checkSeed(ctx, st); err != nil {
		return nil, err
	}
	t0 = time.Now()
	if err := insertRuns(ctx, st, d, o.sizes.scaleDue, time.Now()); err != nil {
		return nil, err
	}
	insertTook := time.Since(t0)
	if b.kind == kindPostgres {
		if err := b.db.exec(ctx, `ANALYZE`); err != nil {
			return nil, err
		}
	}
	rep.Rawf(secScale, "%s: seeded in %s; %s due runs inserted in %s", label, seedTook.Round(time.Millisecond),
		thousands(int64(o.sizes.scaleDue)), insertTook.Round(time.Millisecond))

	// Claim latency, one claim at a time.
	inc := uuid.NewString()
	claim := store.ClaimParams{Node: "bench-claimer", Incarnation: inc, Jobs: map[string]int{d.Name: 0}, Limit: 1}
	var lat durations
	claimsStart := time.Now()
	for range o.sizes.scaleClaims {
		if time.Since(claimsStart) >= o.sizes.scaleCap {
			break
		}
		t := time.Now()
		runs, err := st.RunsClaim(ctx, claim)
		lat = append(lat, time.Since(t))
		if err != nil {
			return nil, err
		}
		if len(runs) != 1 {
			return nil, fmt.Errorf("RunsClaim returned %d runs, want 1", len(runs))
		}
		r := runs[0]
		if r.NotBefore.After(now.Add(time.Hour)) {
			rep.Failf(secScale, "%s: RunsClaim returned run %s, which is not due until %s", label, r.ID, r.NotBefore)
		}
		f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
		if _, err := st.RunTransition(ctx, jobs.Complete(f, claim.Node, jobs.Result{}, time.Time{})); err != nil {
			return nil, err
		}
	}
	claimCap := ""
	if len(lat) < o.sizes.scaleClaims {
		claimCap = fmt.Sprintf(" (capped at %s)", o.sizes.scaleCap)
	}
	rep.Rawf(secScale, "%s: RunsClaim(Limit 1) latency %s%s", label, lat.summary(), claimCap)

	// Throughput of a node on the rest.
	claimed := len(lat)
	rest := o.sizes.scaleDue - claimed
	dueActive := `SELECT COUNT(*) FROM runs WHERE status IN ('pending', 'running', 'retrying') AND not_before < ?`
	horizon := b.db.t(now.Add(time.Hour))
	start := time.Now()
	nodes, err := startNodes(ctx, kind, []store.Store{st}, o.concurrency, []*jobs.Definition{d})
	if err != nil {
		return nil, err
	}
	capped := false
	for {
		if time.Since(start) >= o.sizes.scaleCap {
			capped = true
			break
		}
		if log.n.Load() >= int64(rest) {
			active, err := b.db.int(ctx, dueActive, horizon)
			if err != nil {
				stopNodes(nodes)
				return nil, err
			}
			if active == 0 {
				break
			}
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			stopNodes(nodes)
			return nil, err
		}
	}
	end := time.Now()
	stopNodes(nodes)
	if capped {
		end = time.Now()
	}
	elapsed := end.Sub(start)
	done := log.n.Load()
	r := rate(done, elapsed)
	capNote := ""
	if capped {
		capNote = fmt.Sprintf(" (capped at %s)", o.sizes.scaleCap)
	}
	rep.Rawf(secScale, "%s: node burned %s of %s due runs in %s = %s runs/s%s", label, thousands(done), thousands(int64(rest)),
		elapsed.Round(time.Millisecond), num(r), capNote)

	// Checks.
	fail := func(format string, args ...any) { rep.Failf(secScale, "%s: "+format, append([]any{label}, args...)...) }
	future, err := b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status = 'pending' AND attempt = 0 AND not_before >= ?`, horizon)
	if err != nil {
		return nil, err
	}
	if future != int64(pending+1) {
		fail("%d seeded pending runs left untouched, want %d", future, pending+1)
	}
	counts, err := b.db.statusCounts(ctx, "")
	if err != nil {
		return nil, err
	}
	wantDone := int64(completed + claimed)
	if got := counts[string(jobs.StatusCompleted)]; got != wantDone+done {
		fail("%d runs completed, want %d (history) + %d (claimed) + %d (handler)", got, completed, claimed, done)
	}
	if !capped && done != int64(rest) {
		fail("the handler ran %d times, want %d", done, rest)
	}
	if bad, err := b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status NOT IN ('pending', 'completed') OR (status = 'completed' AND attempt <> 1)`); err != nil || bad != 0 {
		fail("%d runs neither pending nor completed at attempt 1 %v", bad, err)
	}
	if dup := log.duplicates(); dup > 0 || log.notFirst.Load() > 0 {
		fail("%d runs executed more than once, %d executions at attempt > 1", dup, log.notFirst.Load())
	}
	return &scaleResult{n: n, claimP50: lat.quantile(0.5), rate: r}, nil
}

// memoryRuns measures the RSS of a daemon with many schedules, on each
// store.
func memoryRuns(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	bin, err := e.daemon()
	if err != nil {
		return err
	}
	for _, kind := range o.stores {
		for _, n := range o.sizes.memory {
			var target *Target
			if n == 100_000 { // the target is for 100,000 schedules
				target = atMost(100)
			}
			fig := Figure{Section: secScale, Name: fmt.Sprintf("daemon RSS, %s schedules", thousands(int64(n))),
				Store: storeName(kind), Unit: "MiB", Target: target}
			first, rss, hwm, ready, err := memoryRun(ctx, e, bin, kind, n)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				fig.Value, fig.Text = math.NaN(), "daemon did not start"
				rep.Add(fig)
				rep.Failf(secScale, "%s: a daemon with %s schedules did not start: %v", storeName(kind), thousands(int64(n)), err)
				continue
			}
			fig.Value = float64(rss) / (1 << 20)
			rep.Add(fig)
			rep.Rawf(secScale, "%s: daemon with %s schedules: ready %s after exec; VmRSS %s after %s, at most %s in the next %s; VmHWM %s",
				storeName(kind), thousands(int64(n)), ready.Round(time.Millisecond), mib(first), o.sizes.memorySettle,
				mib(rss), o.sizes.memoryWindow, mib(hwm))
		}
	}
	return nil
}

// memoryRun starts a daemon with n schedules on a fresh database and reads
// its memory after memorySettle (first), and the largest VmRSS sampled
// every second in the memoryWindow after that (rss).
func memoryRun(ctx context.Context, e *env, bin, kind string, n int) (first, rss, hwm int64, ready time.Duration, err error) {
	b, err := e.newBackend(ctx, kind, "memory")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer b.close(context.WithoutCancel(ctx))
	dir, err := e.subdir("memory")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	specs := idleSpecs(n, time.Now())
	p, err := startDaemon(ctx, bin, dir, daemonConfig{NodeID: "node-1", Store: b.storeDaemonConfig("@STATE@")},
		idleJobsTOML(specs), 10*time.Minute)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer p.stop(30 * time.Second)
	if err := sleepCtx(ctx, e.opts.sizes.memorySettle); err != nil {
		return 0, 0, 0, 0, err
	}
	if first, hwm, err = memory(p.pid()); err != nil {
		return 0, 0, 0, 0, err
	}
	rss = first
	for end := time.Now().Add(e.opts.sizes.memoryWindow); time.Now().Before(end); {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return 0, 0, 0, 0, err
		}
		r, h, err := memory(p.pid())
		if err != nil {
			return 0, 0, 0, 0, err
		}
		rss, hwm = max(rss, r), h
	}
	return first, rss, hwm, p.readyAt.Sub(p.started), nil
}
