package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// riverVersion is the River CLI that bench/river pins.
const riverVersion = "v0.34.0"

// riverOverall is the last line of `river bench`.
var riverOverall = regexp.MustCompile(`total jobs worked \[\s*(\d+)\s*\], total jobs inserted \[\s*(\d+)\s*\], overall job/sec \[\s*([0-9.]+)\s*\], running (\S+)`)

// riverPass runs River's own benchmark on the burn-down's backlog (pass
// of passes) and returns its rate; ok is false when River could not be
// built here, which the report notes, or when its check failed.
func riverPass(ctx context.Context, e *env, pass, passes int) (rate float64, ok bool, err error) {
	rep, o := e.rep, e.opts
	bin, err := e.river()
	if err != nil {
		rep.Note(secThroughput, "River reference not measured: %v", err)
		return 0, false, nil
	}
	dsn, err := e.newDatabase(ctx, "river")
	if err != nil {
		return 0, false, err
	}
	defer e.dropDatabase(context.WithoutCancel(ctx), dsn)
	if out, err := exec.CommandContext(ctx, bin, "migrate-up", "--database-url", dsn).CombinedOutput(); err != nil {
		return 0, false, fmt.Errorf("river migrate-up: %w: %s", err, out)
	}
	runs := o.sizes.throughputRuns
	if pass == 1 {
		rep.Note(secThroughput, "Reference: River %s, the Go PostgreSQL job queue whose published figure is the "+
			"45,000 runs/s target, burns down the same %s runs with its own benchmark (`river bench -n %d`, built "+
			"from bench/river: it inserts the jobs, then starts one client with 2,000 workers, the concurrency of "+
			"schedulerd's runs above) on a fresh database of the same server. Its clock stops when the last handler "+
			"returns, before that job's completion is committed; schedulerd's stops at the commit. Check: River's "+
			"table shows every job completed.", riverVersion, thousands(int64(runs)), runs)
	}
	cctx, cancel := context.WithTimeout(ctx, 4*o.sizes.throughputCap)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, "bench", "--database-url", dsn, "-n", strconv.Itoa(runs)).CombinedOutput()
	if err != nil {
		return 0, false, fmt.Errorf("river bench: %w: %s", err, tail(out))
	}
	m := riverOverall.FindStringSubmatch(string(out))
	if m == nil {
		return 0, false, fmt.Errorf("river bench: no summary line in its output: %s", tail(out))
	}
	worked, _ := strconv.Atoi(m[1])
	rate, _ = strconv.ParseFloat(m[3], 64)
	took, _ := time.ParseDuration(m[4])
	b := &backend{kind: kindPostgres, name: storeName(kindPostgres), dsn: dsn, e: e}
	if b.db, err = openInspector(ctx, b); err != nil {
		return 0, false, err
	}
	defer b.db.close()
	done, err := b.db.int(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`)
	if err != nil {
		return 0, false, err
	}
	rep.Rawf(secThroughput, "River %s, `river bench -n %d`%s: %d jobs worked in %s: %s runs/s; %d completed in its table",
		riverVersion, runs, passLabel(pass, passes), worked, took.Round(time.Millisecond), num(rate), done)
	if worked != runs || done != int64(runs) {
		rep.Failf(secThroughput, "River reference: %d jobs worked and %d completed, want %d", worked, done, runs)
		return 0, false, nil
	}
	return rate, true, nil
}

// addRiverFigures adds River's figure (the median of its passes) and
// schedulerd's 1-node figure against it.
func addRiverFigures(e *env, rates []float64) {
	rate := median(rates)
	f := Figure{Section: secThroughput, Name: "reference: River " + riverVersion + ", its own burn-down, 1 client",
		Store: "PostgreSQL", Value: rate, Unit: "runs/s"}
	if len(rates) > 1 {
		f.Note = "median of " + passList(rates)
	}
	e.rep.Add(f)
	if got, ok := e.result(fmt.Sprintf("throughput/%s/1", kindPostgres)); ok {
		e.rep.Add(Figure{Section: secThroughput, Name: "schedulerd 1-node throughput / River's", Store: "PostgreSQL",
			Value: 100 * got / rate, Unit: "%", Text: fmt.Sprintf("%.1f%% (%s of %s runs/s)", 100*got/rate, num(got), num(rate))})
	}
}

// river builds the River CLI pinned by bench/river on first use.
func (e *env) river() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.riverBin == "" && e.riverErr == nil {
		e.riverBin, e.riverErr = e.goBuild(filepath.Join(e.root, "bench", "river"), "river", "github.com/riverqueue/river/cmd/river")
		if e.riverErr != nil {
			e.riverErr = fmt.Errorf("build the River CLI in bench/river: %w", e.riverErr)
		}
	}
	return e.riverBin, e.riverErr
}
