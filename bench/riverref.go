package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// riverOverall is the last line of `river bench`.
var riverOverall = regexp.MustCompile(`total jobs worked \[\s*(\d+)\s*\], total jobs inserted \[\s*(\d+)\s*\], overall job/sec \[\s*([0-9.]+)\s*\], running (\S+)`)

// riverSummary is what the last line of `river bench` says.
type riverSummary struct {
	worked, inserted int
	rate             float64 // jobs worked per second
	took             time.Duration
}

// parseRiverSummary reads the last line of `river bench` out of its
// output.
func parseRiverSummary(out string) (riverSummary, error) {
	m := riverOverall.FindStringSubmatch(out)
	if m == nil {
		return riverSummary{}, fmt.Errorf("no summary line in its output: %s", tail([]byte(out)))
	}
	var s riverSummary
	var errs [4]error
	s.worked, errs[0] = strconv.Atoi(m[1])
	s.inserted, errs[1] = strconv.Atoi(m[2])
	s.rate, errs[2] = strconv.ParseFloat(m[3], 64)
	s.took, errs[3] = time.ParseDuration(m[4])
	for _, err := range errs {
		if err != nil {
			return riverSummary{}, fmt.Errorf("summary line %q: %w", m[0], err)
		}
	}
	return s, nil
}

// riverBuild is the River CLI that bench/river pins, built, and the
// versions it was built from.
type riverBuild struct {
	bin string
	// version is River's (the library: client, producer, completer,
	// drivers); cli is that of its CLI module, which holds `river bench`.
	version, cli string
}

// name names River in the report.
func (r riverBuild) name() string {
	if r.cli == r.version {
		return "River " + r.version
	}
	return fmt.Sprintf("River %s (`river bench` of its CLI %s)", r.version, r.cli)
}

// river builds the River CLI pinned by bench/river on first use.
func (e *env) river() (riverBuild, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.riverBin.bin == "" && e.riverErr == nil {
		e.riverBin, e.riverErr = buildRiver(e)
		if e.riverErr != nil {
			e.riverErr = fmt.Errorf("build the River CLI in bench/river: %w", e.riverErr)
		}
	}
	return e.riverBin, e.riverErr
}

func buildRiver(e *env) (riverBuild, error) {
	dir := filepath.Join(e.root, "bench", "river")
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}",
		"github.com/riverqueue/river", "github.com/riverqueue/river/cmd/river")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return riverBuild{}, fmt.Errorf("go list -m: %w", err)
	}
	var r riverBuild
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch path, v, _ := strings.Cut(l, " "); path {
		case "github.com/riverqueue/river":
			r.version = v
		case "github.com/riverqueue/river/cmd/river":
			r.cli = v
		}
	}
	if r.version == "" || r.cli == "" {
		return riverBuild{}, fmt.Errorf("go list -m: no versions of River in %q", out)
	}
	if r.bin, err = e.goBuild(dir, "river", "github.com/riverqueue/river/cmd/river"); err != nil {
		return riverBuild{}, err
	}
	return r, nil
}

// riverNote describes River's reference run in the report.
func riverNote(e *env, r riverBuild) {
	runs := e.opts.sizes.throughputRuns
	e.rep.Note(secThroughput, "Reference: %s, the Go PostgreSQL job queue, burns down the same %s runs with its own "+
		"benchmark on a fresh database of the same server: `river bench --num-total-jobs %d`, built from bench/river "+
		"(the newest CLI the Go module proxy serves, with River's newest release of the library, its drivers and shared "+
		"packages). With --num-total-jobs it inserts the jobs, then starts one client with the settings River's "+
		"benchmark sets for throughput: one queue of 2,000 workers (the concurrency of schedulerd's runs here), fetch "+
		"cooldown 2 ms, fetch poll interval 20 ms, LISTEN/NOTIFY on (not poll-only); its CLI has no other burn-down "+
		"setting. Its clock starts once the client has started (schedulerd's before its nodes start) and stops when "+
		"the last completion event arrives, which River's completer sends after the statement that completed the job "+
		"returned: at the commit, as schedulerd's. Check: River's table shows every job completed.",
		r.name(), thousands(int64(runs)), runs)
}

// riverPass runs River's own benchmark (r) on the burn-down's backlog and
// returns its rate; label names the pass in the raw lines. ok is false
// when its check failed.
func riverPass(ctx context.Context, e *env, r riverBuild, label string) (rate float64, ok bool, err error) {
	rep, o := e.rep, e.opts
	dsn, err := e.newDatabase(ctx, "river")
	if err != nil {
		return 0, false, err
	}
	defer e.dropDatabase(context.WithoutCancel(ctx), dsn)
	if out, err := exec.CommandContext(ctx, r.bin, "migrate-up", "--database-url", dsn).CombinedOutput(); err != nil {
		return 0, false, fmt.Errorf("river migrate-up: %w: %s", err, out)
	}
	runs := o.sizes.throughputRuns
	cctx, cancel := context.WithTimeout(ctx, 4*o.sizes.throughputCap)
	defer cancel()
	out, err := exec.CommandContext(cctx, r.bin, "bench", "--database-url", dsn, "--num-total-jobs", strconv.Itoa(runs)).CombinedOutput()
	if err != nil {
		return 0, false, fmt.Errorf("river bench: %w: %s", err, tail(out))
	}
	s, err := parseRiverSummary(string(out))
	if err != nil {
		return 0, false, fmt.Errorf("river bench: %w", err)
	}
	b := &backend{kind: kindPostgres, name: storeName(kindPostgres), dsn: dsn, e: e}
	if b.db, err = openInspector(ctx, b); err != nil {
		return 0, false, err
	}
	defer b.db.close()
	done, err := b.db.int(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`)
	if err != nil {
		return 0, false, err
	}
	rep.Rawf(secThroughput, "River %s, `river bench --num-total-jobs %d`%s: %d jobs worked in %s: %s runs/s; %d completed in its table",
		r.version, runs, label, s.worked, s.took.Round(time.Millisecond), num(s.rate), done)
	if s.worked != runs || done != int64(runs) {
		rep.Failf(secThroughput, "River reference%s: %d jobs worked and %d completed, want %d", label, s.worked, done, runs)
		return 0, false, nil
	}
	return s.rate, true, nil
}
