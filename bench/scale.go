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
		"the store writes: the attempt row stands for the claimed and completed events). "+
		"The seeding uses plain SQL (INSERT ... SELECT over generate_series or a recursive CTE) copying a template "+
		"run made by the store, and is checked by reading seeded runs back through the store (RunGet, "+
		"RunAttempts, RunEvents). PostgreSQL: ANALYZE after seeding (autovacuum would, later). "+
		"The two databases (N = %[5]s and N = %[6]s) exist side by side and are measured in turns, so that a drift of the "+
		"machine's speed during the section falls on both alike. Half of %[1]s due runs are inserted with RunInsertMany "+
		"into each. Claim latency: %[2]s calls of RunsClaim with Limit 1 on each database from one goroutine, one "+
		"database then the other (or as many as fit in twice the cap below), each claimed run completed with "+
		"RunTransition before the next claim (only RunsClaim is timed). Throughput: a node in this process (concurrency %[3]d) "+
		"burns the due runs, as in figure 1, on the small database, then the large one; then the second half of the due "+
		"runs is inserted into each and burned, large first; the rate is each size's runs over its two burn-downs' time. "+
		"Each burn-down is capped at %[4]s. The target compares the N = %[5]s case with the N = %[6]s case: p50 claim latency and "+
		"throughput within 1.5x.", thousands(int64(o.sizes.scaleDue)), thousands(int64(o.sizes.scaleClaims)),
		o.concurrency, o.sizes.scaleCap, thousands(int64(o.sizes.scaleLarge)), thousands(int64(o.sizes.scaleSmall)))
	rep.Note(secScale, "Checks: the seeded pending runs are untouched; every due run completed exactly once at attempt 1.")
	rep.Note(secScale, "Memory: a `schedulerd run` process on each store with N daily schedules (as in figure 3, none due), "+
		"VmRSS from /proc/PID/status %s after READY=1, then every second for %s: the figure is the largest; "+
		"VmHWM is the peak since exec, config parsing included.", o.sizes.memorySettle, o.sizes.memoryWindow)
	var errs []error
	for _, kind := range o.stores {
		small, large, err := scalePair(ctx, e, kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", storeName(kind), err))
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
	if err := scrapeRuns(ctx, e); err != nil {
		errs = append(errs, fmt.Errorf("scrape: %w", err))
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
	// The history in the form the store writes it: the attempt row stands
	// for the claim's and the end's events.
	stmts = append(stmts,
		`INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason,
			claimed_from, end_node)
		SELECT id, 1, node, incarnation, started_at, finished_at, 'completed', NULL, '', 'succeeded', 'pending', node
		FROM runs WHERE incarnation = 'seed-incarnation'`)
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

// scaleDB is one backlog size on one store, seeded and ready to measure.
type scaleDB struct {
	n                  int
	b                  *backend
	st                 store.Store
	log                *execLog
	d                  *jobs.Definition
	label              string
	now                time.Time
	pending, completed int
	inserted           int // due runs inserted so far
	claimed            int // due runs claimed and completed by the latency loop
	lat                durations
	burned             int64 // due runs the burn-downs completed
	burnTime           time.Duration
	capped             bool
	rounds             int // burn-downs so far
}

func (s *scaleDB) close(ctx context.Context) {
	_ = s.st.Close()
	s.b.close(ctx)
}

// scaleSetup makes and seeds the database of one backlog size, with the
// first half of the due runs.
func scaleSetup(ctx context.Context, e *env, kind string, n int) (_ *scaleDB, err error) {
	rep, o := e.rep, e.opts
	b, err := e.newBackend(ctx, kind, "scale")
	if err != nil {
		return nil, err
	}
	st, err := b.open(ctx)
	if err != nil {
		b.close(context.WithoutCancel(ctx))
		return nil, err
	}
	s := &scaleDB{n: n, b: b, st: st, log: newExecLog(o.sizes.scaleDue)}
	defer func() {
		if err != nil {
			s.close(context.WithoutCancel(ctx))
		}
	}()
	s.d = &jobs.Definition{Name: "noop", Handler: s.log.handler}
	s.d.WithDefaults()
	s.label = fmt.Sprintf("%s, %s waiting", b.name, thousands(int64(n)))

	s.now = time.Now()
	tmpl, err := st.RunInsert(ctx, store.RunInsertParams{Job: s.d.Name, Trigger: jobs.TriggerManual,
		NotBefore: s.now.Add(24 * time.Hour), Retry: s.d.Retry, Node: "bench"})
	if err != nil {
		return nil, err
	}
	s.pending, s.completed = n/2-1, n-n/2
	t0 := time.Now()
	if err := seed(ctx, b, tmpl.ID, s.pending, s.completed, s.now); err != nil {
		return nil, err
	}
	seedTook := time.Since(t0)
	if err := checkSeed(ctx, st); err != nil {
		return nil, err
	}
	first := o.sizes.scaleDue / 2
	t0 = time.Now()
	if err := s.insertDue(ctx, first); err != nil {
		return nil, err
	}
	rep.Rawf(secScale, "%s: seeded in %s; %s due runs inserted in %s", s.label, seedTook.Round(time.Millisecond),
		thousands(int64(first)), time.Since(t0).Round(time.Millisecond))
	return s, nil
}

// insertDue inserts k due runs, then (PostgreSQL) refreshes the planner's
// statistics.
func (s *scaleDB) insertDue(ctx context.Context, k int) error {
	if err := insertRuns(ctx, s.st, s.d, k, time.Now()); err != nil {
		return err
	}
	s.inserted += k
	if s.b.kind == kindPostgres {
		return s.b.db.exec(ctx, `ANALYZE`)
	}
	return nil
}

// claimOne times one RunsClaim with Limit 1, then completes the run it
// returns (not timed).
func (s *scaleDB) claimOne(ctx context.Context, rep *Report, claim store.ClaimParams) error {
	t := time.Now()
	runs, err := s.st.RunsClaim(ctx, claim)
	s.lat = append(s.lat, time.Since(t))
	if err != nil {
		return err
	}
	if len(runs) != 1 {
		return fmt.Errorf("%s: RunsClaim returned %d runs, want 1", s.label, len(runs))
	}
	r := runs[0]
	if r.NotBefore.After(s.now.Add(time.Hour)) {
		rep.Failf(secScale, "%s: RunsClaim returned run %s, which is not due until %s", s.label, r.ID, r.NotBefore)
	}
	f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
	if _, err := s.st.RunTransition(ctx, jobs.Complete(f, claim.Node, jobs.Result{}, time.Time{})); err != nil {
		return err
	}
	s.claimed++
	return nil
}

// burn starts a node on the database and times it until every due run
// inserted so far has completed (or the cap).
func (s *scaleDB) burn(ctx context.Context, e *env) error {
	o := e.opts
	want := int64(s.inserted - s.claimed)
	from := s.log.n.Load()
	start := time.Now()
	nodes, err := startNodes(ctx, s.b.kind, []store.Store{s.st}, o.concurrency, []*jobs.Definition{s.d})
	if err != nil {
		return err
	}
	// Done when the node has committed the completion of every due run
	// (its count of written results, as in figure 1): a query for the due
	// runs left would read the backlog, and on PostgreSQL took 200 ms of
	// the clock at 1,000,000 waiting, 25 ms at 10,000.
	capped := false
	for completedBy(nodes) < want-from {
		if time.Since(start) >= o.sizes.scaleCap {
			capped = true
			break
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			stopNodes(nodes)
			return err
		}
	}
	end := time.Now()
	stopNodes(nodes)
	if capped {
		end = time.Now()
	}
	done := s.log.n.Load() - from
	capNote := ""
	if capped {
		s.capped = true
		capNote = fmt.Sprintf(" (capped at %s)", o.sizes.scaleCap)
	}
	s.burned += done
	s.rounds++
	s.burnTime += end.Sub(start)
	e.rep.Rawf(secScale, "%s: node burned %s of %s due runs in %s = %s runs/s%s", s.label, thousands(done),
		thousands(want-from), end.Sub(start).Round(time.Millisecond), num(rate(done, end.Sub(start))), capNote)
	return nil
}

// check verifies the database after the measurements: the seeded pending
// runs untouched, every due run completed exactly once at attempt 1.
func (s *scaleDB) check(ctx context.Context, rep *Report) error {
	fail := func(format string, args ...any) {
		rep.Failf(secScale, "%s: "+format, append([]any{s.label}, args...)...)
	}
	horizon := s.b.db.t(s.now.Add(time.Hour))
	future, err := s.b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status = 'pending' AND attempt = 0 AND not_before >= ?`, horizon)
	if err != nil {
		return err
	}
	if future != int64(s.pending+1) {
		fail("%d seeded pending runs left untouched, want %d", future, s.pending+1)
	}
	counts, err := s.b.db.statusCounts(ctx, "")
	if err != nil {
		return err
	}
	done := s.log.n.Load()
	if got := counts[string(jobs.StatusCompleted)]; got != int64(s.completed+s.claimed)+done {
		fail("%d runs completed, want %d (history) + %d (claimed) + %d (handler)", got, s.completed, s.claimed, done)
	}
	if !s.capped && done != int64(s.inserted-s.claimed) {
		fail("the handler ran %d times, want %d", done, s.inserted-s.claimed)
	}
	if bad, err := s.b.db.int(ctx, `SELECT COUNT(*) FROM runs WHERE status NOT IN ('pending', 'completed') OR (status = 'completed' AND attempt <> 1)`); err != nil || bad != 0 {
		fail("%d runs neither pending nor completed at attempt 1 %v", bad, err)
	}
	if dup := s.log.duplicates(); dup > 0 || s.log.notFirst.Load() > 0 {
		fail("%d runs executed more than once, %d executions at attempt > 1", dup, s.log.notFirst.Load())
	}
	return nil
}

// scalePair measures the small and the large backlog on one store. The two
// databases exist side by side, and each measurement alternates between
// them, so that a drift of the machine's speed while it runs (10-20% within
// minutes on some hosts) falls on both sizes alike: the claims take turns
// one by one, and the burn-downs run small, large, large, small, the due
// runs' second half inserted before the second of each.
func scalePair(ctx context.Context, e *env, kind string) (small, large *scaleResult, err error) {
	rep, o := e.rep, e.opts
	var dbs []*scaleDB
	defer func() {
		for _, s := range dbs {
			s.close(context.WithoutCancel(ctx))
		}
	}()
	for _, n := range []int{o.sizes.scaleSmall, o.sizes.scaleLarge} {
		s, err := scaleSetup(ctx, e, kind, n)
		if err != nil {
			return nil, nil, fmt.Errorf("%s waiting: %w", thousands(int64(n)), err)
		}
		dbs = append(dbs, s)
	}

	// Claim latency, one claim at a time, the two sizes in turns.
	claim := store.ClaimParams{Node: "bench-claimer", Incarnation: uuid.NewString(),
		Jobs: store.NewJobLimits(map[string]int{"noop": 0}), Limit: 1}
	claimsStart := time.Now()
	for i := range o.sizes.scaleClaims {
		if time.Since(claimsStart) >= 2*o.sizes.scaleCap {
			break
		}
		for k := range dbs {
			if err := dbs[(i+k)%2].claimOne(ctx, rep, claim); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, s := range dbs {
		claimCap := ""
		if len(s.lat) < o.sizes.scaleClaims {
			claimCap = fmt.Sprintf(" (capped at %s for both sizes)", 2*o.sizes.scaleCap)
		}
		rep.Rawf(secScale, "%s: RunsClaim(Limit 1) latency %s%s", s.label, s.lat.summary(), claimCap)
	}

	// Throughput of a node, small, large, then the second half of the due
	// runs, large, small.
	second := o.sizes.scaleDue - o.sizes.scaleDue/2
	for _, i := range []int{0, 1, 1, 0} {
		s := dbs[i]
		if s.rounds > 0 {
			if err := s.insertDue(ctx, second); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.label, err)
			}
		}
		if err := s.burn(ctx, e); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.label, err)
		}
	}
	var res []*scaleResult
	for _, s := range dbs {
		if err := s.check(ctx, rep); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.label, err)
		}
		r := rate(s.burned, s.burnTime)
		rep.Rawf(secScale, "%s: the two burn-downs, %s runs in %s = %s runs/s", s.label, thousands(s.burned),
			s.burnTime.Round(time.Millisecond), num(r))
		res = append(res, &scaleResult{n: s.n, claimP50: s.lat.quantile(0.5), rate: r})
	}
	return res[0], res[1], nil
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
