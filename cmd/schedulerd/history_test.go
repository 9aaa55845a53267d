package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// pastRun is a run of a history that a test writes to the store: made at
// made, started lag after it, ended took after its start, completed or
// (failed) dead-lettered.
type pastRun struct {
	made      time.Time
	lag, took time.Duration
	failed    bool
}

// seedRuns writes runs of job to st as the engine would have made, claimed
// and ended them, one after the other, as node "seed"; it returns them as
// they ended. No daemon may declare job while it writes: it would claim
// the runs.
func seedRuns(t *testing.T, st store.Store, job string, runs []pastRun) []*jobs.Run {
	t.Helper()
	ctx := context.Background()
	var out []*jobs.Run
	for _, p := range runs {
		r, err := st.RunInsert(ctx, store.RunInsertParams{Job: job, Trigger: jobs.TriggerSchedule, ScheduledAt: p.made, NotBefore: p.made,
			Retry: jobs.RetryPolicy{MaxAttempts: 1}, Node: "seed", Now: p.made})
		if err != nil {
			t.Fatal(err)
		}
		started := p.made.Add(p.lag)
		claimed, err := st.RunsClaim(ctx, store.ClaimParams{Node: "seed", Incarnation: "seed-incarnation",
			Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 1, Now: started})
		if err != nil || len(claimed) != 1 || claimed[0].ID != r.ID {
			t.Fatalf("claim of the run of %s made at %s: %v, %v", job, p.made, claimed, err)
		}
		f := jobs.Fence{RunID: r.ID, Attempt: 1, Incarnation: "seed-incarnation"}
		code := 0
		tr := jobs.Complete(f, "seed", jobs.Result{ExitCode: &code}, started.Add(p.took))
		if p.failed {
			code = 1
			tr = jobs.FailAttempt(claimed[0], f, "seed", jobs.Result{ExitCode: &code, Err: errors.New("exit status 1")},
				jobs.ReasonFailed, started.Add(p.took), nil)
		}
		ended, err := st.RunTransition(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ended)
	}
	return out
}

// TestCLIRunsHistory: `schedulerd runs` filters by when runs were made
// (--since, --until: a duration before now, a date or RFC 3339) and by
// status, and pages past its limit with --before, saying on stderr when
// more runs follow; `runs --stats` counts a job's runs by outcome and
// gives the success ratio and the p50, p95 and longest duration of the
// completed ones, as text and --json, equal to the figures of the history
// it was given. Bad bounds and flags that --stats does not take are usage
// errors.
func TestCLIRunsHistory(t *testing.T) {
	e := newEnv(t)
	e.writeCLIConfig()
	// 48 runs of nightly, an hour apart until an hour ago: every twelfth
	// dead-lettered, the others took 1s to 10s.
	base := time.Now().UTC().Truncate(time.Hour).Add(-49 * time.Hour)
	var history []pastRun
	for i := range 48 {
		history = append(history, pastRun{made: base.Add(time.Duration(i) * time.Hour), lag: 200 * time.Millisecond,
			took: time.Duration(i%10+1) * time.Second, failed: i%12 == 5})
	}
	seeded := seedRuns(t, e.openStore(), "nightly", history)
	d := e.start(true)
	defer d.stop()

	// The newest first, 20 a page; --before the last of a page shows the next.
	var listed []string
	before := ""
	for page := 0; ; page++ {
		args := []string{"runs", "--job", "nightly", "--since", "7d"}
		if before != "" {
			args = append(args, "--before", before)
		}
		r := e.cli(args...)
		if r.code != 0 {
			t.Fatalf("runs page %d: exit %d, %s", page, r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")[1:]
		for _, l := range lines {
			listed = append(listed, strings.Fields(l)[0])
		}
		more, hinted := strings.CutPrefix(strings.TrimSpace(r.stderr), "more runs follow: add --before ")
		if page < 2 && (len(lines) != 20 || !hinted || more != listed[len(listed)-1]) {
			t.Fatalf("runs page %d: %d runs, stderr %q", page, len(lines), r.stderr)
		}
		if page == 2 {
			if len(lines) != 8 || r.stderr != "" {
				t.Fatalf("the last page: %d runs, stderr %q", len(lines), r.stderr)
			}
			break
		}
		before = more
	}
	var want []string
	for i := len(seeded) - 1; i >= 0; i-- {
		want = append(want, seeded[i].ID)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("the pages listed\n%v\nwant the runs newest first\n%v", listed, want)
	}

	// A range and a status, as --json.
	from, to := base.Add(24*time.Hour), base.Add(36*time.Hour)
	dead := jsonLines(t, e.ok("runs", "--job", "nightly", "--status", "dead_letter", "--since", from.Format(time.RFC3339),
		"--until", to.Format(time.RFC3339), "--json"))
	if len(dead) != 1 || dead[0]["id"] != seeded[29].ID || dead[0]["status"] != "dead_letter" {
		t.Errorf("dead letters made in [%s, %s): %v", from, to, dead)
	}
	if got := jsonLines(t, e.ok("runs", "--until", base.Format(time.DateOnly), "--json")); len(got) != 0 {
		t.Errorf("runs made before %s: %v", base.Format(time.DateOnly), got)
	}

	// Stats: as the history says.
	var durations []time.Duration
	for _, p := range history {
		if !p.failed {
			durations = append(durations, p.took)
		}
	}
	slices.Sort(durations)
	rank := func(p int64) time.Duration { return durations[store.PercentileRank(int64(len(durations)), p)-1] }
	st := jsonOne(t, e.ok("runs", "--job", "nightly", "--since", "7d", "--stats", "--json"))
	for k, v := range map[string]any{"job": "nightly", "runs": 48.0, "completed": 44.0, "dead_letter": 4.0, "expired": 0.0,
		"cancelled": 0.0, "pending": 0.0, "running": 0.0, "retrying": 0.0, "success_ratio": 44.0 / 48,
		"duration_p50_seconds": rank(50).Seconds(), "duration_p95_seconds": rank(95).Seconds(), "duration_max_seconds": 10.0, "until": nil} {
		if st[k] != v {
			t.Errorf("runs --stats --json: %s = %v, want %v (all: %v)", k, st[k], v, st)
		}
	}
	text := e.ok("runs", "--job", "nightly", "--since", from.Format(time.RFC3339), "--stats")
	// From the 25th run on: 24 runs, two of them dead (29 and 41).
	for _, want := range []string{
		"runs of nightly made since " + from.Format(time.RFC3339) + ": 24\n",
		"  completed    22\n", "  dead_letter  2\n", "  pending      0\n",
		"success ratio: 91.7% (22 completed of 24 that completed, dead-lettered or expired)\n",
		"duration of the completed: p50 6s, p95 9s, max 10s\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("runs --stats does not say %q:\n%s", want, text)
		}
	}
	if text := e.ok("runs", "--job", "ok", "--stats"); !strings.Contains(text, "runs of ok: 0\n") ||
		!strings.Contains(text, "success ratio: - (no run completed, dead-lettered or expired)") || !strings.Contains(text, "duration: - (no run completed)") {
		t.Errorf("runs --stats of a job without runs:\n%s", text)
	}

	e.fails(exitUsage, "--since: want a time such as", "runs", "--since", "last week")
	e.fails(exitUsage, "--since (", "runs", "--since", "1d", "--until", "2d")
	for _, flag := range [][]string{{"--status", "completed"}, {"--limit", "5"}, {"--before", seeded[0].ID}} {
		e.fails(exitUsage, "drop "+flag[0], append([]string{"runs", "--stats"}, flag...)...)
	}
	e.fails(exitUsage, `before: there is no run "no-such-run"`, "runs", "--before", "no-such-run")
}
