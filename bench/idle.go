package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/notify"
	"github.com/schedulerd/schedulerd/scheduler"
)

const secIdle = "3 idle cost"

// idleQuiet is how long after the benchmark starts no idle schedule fires.
const idleQuiet = 20 * time.Minute

// idleSpecs returns n daily specs "S M H * * *" (UTC) at times of day
// spread at random, none of which fires within idleQuiet of now.
func idleSpecs(n int, now time.Time) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	now = now.UTC()
	midnight := now.Truncate(24 * time.Hour)
	specs := make([]string, 0, n)
	for len(specs) < n {
		sec := rng.IntN(86400)
		at := midnight.Add(time.Duration(sec) * time.Second)
		if !at.After(now) {
			at = at.Add(24 * time.Hour)
		}
		if at.Sub(now) < idleQuiet {
			continue
		}
		specs = append(specs, fmt.Sprintf("%d %d %d * * *", sec%60, sec/60%60, sec/3600))
	}
	return specs
}

// idleNotifier is the notifier of the idle jobs: a webhook that nothing
// calls (no job fails), so that the figure includes the cost of the
// notification path at rest: each node's delivery loop, and each job's
// dead man's switch (expect_success_within, longer than the window).
const idleNotifier = "[[notifier]]\nname = \"ops\"\nwebhook = \"http://127.0.0.1:9/hook\"\n\n"

// idleExpect is the idle jobs' expect_success_within: they fire daily and
// never within the window, so none becomes overdue during it.
const idleExpect = 48 * time.Hour

// idleJobsTOML renders the specs as command jobs of a daemon config.
func idleJobsTOML(specs []string) string {
	var b strings.Builder
	b.WriteString(idleNotifier)
	for i, s := range specs {
		fmt.Fprintf(&b, "[[job]]\nname = \"idle-%06d\"\nschedule = %q\ntimezone = \"UTC\"\ncommand = [\"/bin/true\"]\n"+
			"notify = [\"ops\"]\nexpect_success_within = %q\n\n", i, s, idleExpect.String())
	}
	return b.String()
}

// idleDefs returns the specs as job definitions for in-process nodes.
func idleDefs(specs []string) ([]*jobs.Definition, error) {
	defs := make([]*jobs.Definition, len(specs))
	for i, spec := range specs {
		s, err := schedule.Parse(spec, time.UTC)
		if err != nil {
			return nil, err
		}
		defs[i] = &jobs.Definition{Name: fmt.Sprintf("idle-%06d", i), Schedule: s, Command: []string{"/bin/true"},
			Notify:              []jobs.NotifyTarget{{Notifier: "ops", Events: jobs.DefaultNotifyEvents}},
			ExpectSuccessWithin: idleExpect}
		defs[i].WithDefaults()
	}
	return defs, nil
}

// runIdle is figure 3: the cost of a node with many schedules and nothing
// to do.
func runIdle(ctx context.Context, e *env) error {
	rep, o := e.rep, e.opts
	rep.Section(secIdle)
	rep.Note(secIdle, "Method: %s daily cron schedules (command jobs, UTC) at random times of day, none due within "+
		"%s of the start. CPU: real `schedulerd run` processes (the daemon's defaults: heartbeat_interval 30s, "+
		"inactive_threshold 2m, concurrency = CPUs), started and awaited as the cluster tests do (READY=1 on "+
		"NOTIFY_SOCKET); after READY and %s of settling, utime+stime from /proc/PID/stat over a %s window. "+
		"Statements: the same nodes run in this process (the engine's defaults) on another database of the same "+
		"server, at the same time, and the store counts its statements (`Statements()`, transaction control "+
		"included); the statements of the heartbeat round (NodeHeartbeat, RunsCancelRequested, NodesList) "+
		"are attributed by reading that counter around those calls. The 3-node phase adds two nodes to the "+
		"first. The daemon has no statement counter of its own, hence the in-process twins. Every job names a "+
		"webhook notifier and has expect_success_within = %s (none is due in the window), and every node runs its "+
		"notification delivery loop: the figure includes the notification path at rest.",
		thousands(int64(o.sizes.idleJobs)), idleQuiet, o.sizes.idleSettle, o.sizes.idleWindow, idleExpect)
	rep.Note(secIdle, "Check: no run is made in either database (nothing is due).")
	var errs []error
	for _, kind := range o.stores {
		counts := []int{1, 3}
		if kind == kindSQLite {
			counts = []int{1}
		}
		if err := idleRun(ctx, e, kind, counts); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", storeName(kind), err))
		}
	}
	return errors.Join(errs...)
}

// idleRun measures one store with growing node counts.
func idleRun(ctx context.Context, e *env, kind string, counts []int) error {
	rep, o := e.rep, e.opts
	bin, err := e.daemon()
	if err != nil {
		return err
	}
	procDB, err := e.newBackend(ctx, kind, "idle_proc")
	if err != nil {
		return err
	}
	defer procDB.close(context.WithoutCancel(ctx))
	inDB, err := e.newBackend(ctx, kind, "idle_inproc")
	if err != nil {
		return err
	}
	defer inDB.close(context.WithoutCancel(ctx))
	dir, err := e.subdir("idle")
	if err != nil {
		return err
	}
	specs := idleSpecs(o.sizes.idleJobs, time.Now())
	jobsTOML := idleJobsTOML(specs)
	defs, err := idleDefs(specs)
	if err != nil {
		return err
	}

	var procs []*daemonProc
	var nodes []*node
	var metered []*meteredStore
	var deliverers []*notify.Deliverer
	defer func() {
		for _, d := range deliverers {
			d.Stop()
		}
		for _, p := range procs {
			p.stop(10 * time.Second)
		}
		stopNodes(nodes)
		for _, m := range metered {
			_ = m.Close()
		}
	}()
	for _, want := range counts {
		for len(procs) < want {
			id := fmt.Sprintf("node-%d", len(procs)+1)
			// The process and its in-process twin start together.
			type started struct {
				p   *daemonProc
				err error
			}
			ch := make(chan started, 1)
			go func() {
				p, err := startDaemon(ctx, bin, dir, daemonConfig{NodeID: id, Store: procDB.storeDaemonConfig("@STATE@")},
					jobsTOML, 5*time.Minute)
				ch <- started{p, err}
			}()
			st, err := inDB.open(ctx)
			if err == nil {
				m, s, hidden := newMetered(st)
				if len(hidden) > 0 {
					rep.Rawf(secIdle, "the store has methods the meter would hide (%v): heartbeat statements not attributed", hidden)
					s = st
				}
				metered = append(metered, m)
				var sched *scheduler.Scheduler
				// The daemon's default concurrency: the number of CPUs.
				if sched, err = scheduler.New(s, nodeConfig(kind, id, runtime.NumCPU()), defs); err == nil {
					if err = sched.Start(ctx); err == nil {
						nodes = append(nodes, &node{id: id, st: s, sched: sched})
						// The daemon's delivery loop, as cmd/schedulerd runs it.
						d := notify.New(notify.Config{Store: s, Node: id, Incarnation: sched.Incarnation, StoreClock: kind != kindSQLite},
							map[string]*notify.Target{"ops": {Name: "ops", Webhook: "http://127.0.0.1:9/hook", Timeout: 10 * time.Second}})
						sched.OnNotify = d.Wake
						if err = d.Start(ctx); err == nil {
							deliverers = append(deliverers, d)
						}
					}
				}
			}
			r := <-ch
			if r.p != nil {
				procs = append(procs, r.p)
			}
			if err != nil {
				return fmt.Errorf("in-process %s: %w", id, err)
			}
			if r.err != nil {
				return r.err
			}
			rep.Rawf(secIdle, "%s: %s process ready %s after exec", storeName(kind), id, r.p.readyAt.Sub(r.p.started).Round(time.Millisecond))
		}
		if err := sleepCtx(ctx, o.sizes.idleSettle); err != nil {
			return err
		}
		ticks0 := make([]int64, len(procs))
		for i, p := range procs {
			ticks0[i], _ = cpuTicks(p.pid())
		}
		stm0, hb0 := make([]int64, len(metered)), make([]int64, len(metered))
		for i, m := range metered {
			stm0[i], hb0[i] = m.Statements(), m.Heartbeat()
		}
		t0 := time.Now()
		if err := sleepCtx(ctx, o.sizes.idleWindow); err != nil {
			return err
		}
		w := time.Since(t0)
		var worstCPU, worstBeyond float64
		for i, p := range procs {
			t, err := cpuTicks(p.pid())
			if err != nil {
				return fmt.Errorf("%s: %w (exited? %s)", p.id, err, p.logTail())
			}
			cpu := float64(t-ticks0[i]) / clockTicks
			rss, _, _ := memory(p.pid())
			m := metered[i]
			stm := float64(m.Statements()-stm0[i]) / w.Seconds()
			hb := float64(m.Heartbeat()-hb0[i]) / w.Seconds()
			rep.Rawf(secIdle, "%s, %d node(s), %s: process CPU %.2f s in %s = %.3f CPU s/min = %.3f%% of a core, RSS %s; "+
				"in-process twin: %.3f statements/s (%.3f in the heartbeat round, %.3f beyond)",
				storeName(kind), want, p.id, cpu, w.Round(time.Millisecond), cpu/w.Minutes(), 100*cpu/w.Seconds(), mib(rss),
				stm, hb, stm-hb)
			worstCPU = max(worstCPU, 100*cpu/w.Seconds())
			worstBeyond = max(worstBeyond, stm-hb)
		}
		label := fmt.Sprintf("%d node", want)
		if want > 1 {
			label += "s"
		}
		rep.Add(Figure{Section: secIdle, Name: "CPU per node (busiest), " + label, Store: storeName(kind),
			Value: worstCPU, Unit: "% of a core", Target: atMost(0.1),
			Text: fmt.Sprintf("%.3f%% (%.3f CPU s/min)", worstCPU, worstCPU*0.6)})
		rep.Add(Figure{Section: secIdle, Name: "statements/s per node beyond heartbeats, " + label, Store: storeName(kind),
			Value: worstBeyond, Unit: "stmt/s", Target: atMost(0.5), Text: fmt.Sprintf("%.3f stmt/s", worstBeyond)})
	}
	for _, b := range []*backend{procDB, inDB} {
		n, err := b.db.int(ctx, `SELECT COUNT(*) FROM runs`)
		if err != nil {
			return err
		}
		if n != 0 {
			rep.Failf(secIdle, "%s: %d runs made while nothing was due", storeName(kind), n)
		}
	}
	return nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
