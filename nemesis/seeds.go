package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/internal/pgtest"
)

// seedCase is a seed that once failed, to be replayed: a line of a seeds
// file (nemesis/testdata/seeds.txt).
type seedCase struct {
	seed  int64
	kinds string // the kinds of fault, separated by commas
	line  int
}

// minShare is the least time each run of -seeds may have: less is hardly
// a fault or two.
const minShare = 20 * time.Second

// parseSeeds reads a seeds file: one seed a line, "SEED [KINDS]", KINDS
// being -kinds's value (every kind without it); "#" starts a comment, and
// blank lines are skipped. name is the file's name, for errors.
func parseSeeds(name string, r io.Reader) ([]seedCase, error) {
	var out []seedCase
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		text, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(text)
		if len(fs) == 0 {
			continue
		}
		if len(fs) > 2 {
			return nil, fmt.Errorf("%s:%d: %q: want SEED [KINDS], KINDS separated by commas without spaces", name, n, strings.TrimSpace(text))
		}
		seed, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil || seed <= 0 {
			return nil, fmt.Errorf("%s:%d: seed %q: want a positive integer", name, n, fs[0])
		}
		c := seedCase{seed: seed, kinds: allKinds, line: n}
		if len(fs) == 2 {
			if err := checkKinds(fs[1]); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, n, err)
			}
			c.kinds = fs[1]
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no seed in it", name)
	}
	return out, nil
}

// replaySeeds runs each seed of the file o.seeds with its kinds, then a
// new seed (o.seed when set) with o.kinds, one after the other, each for
// an even share of o.duration, and checks each. The seed of each run is
// printed before it starts. It exits 2 when a run could not be made, else
// 1 when any run broke a promise, else 0. Without PostgreSQL it skips,
// and says so, unless $CI is set: CI installs it (.ci/run).
func replaySeeds(ctx context.Context, o options, stdout, stderr io.Writer) int {
	f, err := os.Open(o.seeds)
	if err != nil {
		fmt.Fprintf(stderr, "nemesis: -seeds: %v\n", err)
		return 2
	}
	cases, err := parseSeeds(o.seeds, f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "nemesis: -seeds: %v\n", err)
		return 2
	}
	share := (o.duration / time.Duration(len(cases)+1)).Truncate(time.Second)
	if share < minShare {
		fmt.Fprintf(stderr, "nemesis: -duration %s shared by %d runs (the %d seeds of %s and a new one) is %s each, less than %s\n",
			o.duration, len(cases)+1, len(cases), o.seeds, share, minShare)
		return 2
	}
	if err := pgtest.Installed(); err != nil {
		return withoutPostgres(err, stdout, stderr)
	}
	fresh := o
	if fresh.seed == 0 {
		fresh.seed = newSeed()
	}
	fresh.duration = share
	var runs []options
	for _, c := range cases {
		r := o
		r.seed, r.kinds, r.duration = c.seed, c.kinds, share
		runs = append(runs, r)
	}
	runs = append(runs, fresh)
	var seeds []string
	for _, r := range runs {
		seeds = append(seeds, strconv.FormatInt(r.seed, 10))
	}
	fmt.Fprintf(stdout, "nemesis: %d runs of %s each: the seeds of %s that once failed, then the new seed %d (seeds %s)\n",
		len(runs), share, o.seeds, fresh.seed, strings.Join(seeds, ", "))
	code := 0
	var total figures
	var failed []string
	for i, r := range runs {
		if o.dir != "" {
			r.dir = filepath.Join(o.dir, fmt.Sprintf("seed-%d", r.seed))
		}
		what := fmt.Sprintf("seed %d of %s:%d", r.seed, o.seeds, cases[min(i, len(cases)-1)].line)
		if i == len(cases) {
			what = fmt.Sprintf("new seed %d", r.seed)
		}
		fmt.Fprintf(stdout, "nemesis: run %d of %d: %s, -kinds %s, %s\n", i+1, len(runs), what, r.kinds, r.duration)
		c, fig := once(ctx, r, stdout, stderr)
		if fig != nil {
			total.add(fig)
		}
		if c != 0 {
			failed = append(failed, fmt.Sprintf("%s (replay: %s)", what, r.replay()))
			code = max(code, c)
		}
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "nemesis: stopped: %v\n", context.Cause(ctx))
			return 2
		}
	}
	for _, f := range failed {
		fmt.Fprintf(stdout, "nemesis: FAILED: %s\n", f)
	}
	fmt.Fprintf(stdout, "nemesis: %d runs (seeds %s): %s\n", len(runs), strings.Join(seeds, ", "), total.line())
	return code
}

// withoutPostgres is what -seeds does when PostgreSQL is not installed
// (err says what is missing): as a test without it, it skips and says so,
// and on CI ($CI set) it fails. It returns the exit code.
func withoutPostgres(err error, stdout, stderr io.Writer) int {
	if os.Getenv("CI") != "" {
		fmt.Fprintf(stderr, "nemesis: %v: it is required on CI\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "nemesis: skipped, %v (on CI this fails)\n", err)
	return 0
}
