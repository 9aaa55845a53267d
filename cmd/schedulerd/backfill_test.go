package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// TestBackfillKilledEveryTickOnce is the promise of schedulerd backfill
// (docs/backfill.md) against real daemons, on SQLite and PostgreSQL: a
// job fires every 2 seconds, and a backfill covers 40 ticks from before
// the daemon started up to ticks the scheduler already ran. A dry run
// lists the ticks and changes nothing; more than 10,000 ticks are refused
// without --yes; the backfill makes runs for the ticks without one only,
// is cut by a SIGKILL of the daemon part way, and is repeated after the
// restart; in the end every tick of the range has exactly one run, which
// completed, and every attempt a tick saw was of that run.
func TestBackfillKilledEveryTickOnce(t *testing.T) {
	proctest.Long(t, "SIGKILLs a daemon during a backfill")
	t.Run("sqlite", func(t *testing.T) {
		e := newEnv(t)
		testBackfillKilled(t, e, "", e.openStore)
	})
	t.Run("postgres", func(t *testing.T) {
		pg.Require(t)
		dsn := pg.NewDatabase(t)
		testBackfillKilled(t, newEnv(t), fmt.Sprintf("store = %q", dsn), func() store.Store { return openPostgres(t, dsn) })
	})
}

func testBackfillKilled(t *testing.T, e *env, daemon string, openStore func() store.Store) {
	const period = 2 * time.Second
	witness := filepath.Join(e.dir, "witness")
	e.writeConfigWith(8, daemon, fmt.Sprintf(`[[job]]
name = "bf"
schedule = "*/2 * * * * *"
timezone = "UTC"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $SCHEDULERD_ATTEMPT" >> %s; sleep 0.2'
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "1s" }
`, witness))
	d := e.start(true)
	st := openStore()
	ctx := context.Background()
	list := func() []*jobs.Run {
		runs, err := st.RunsList(ctx, store.RunFilter{Job: "bf", Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	var fired []*jobs.Run // the scheduler's runs of past ticks, newest first
	waitFor(t, "two runs of the scheduler", 30*time.Second, func() bool {
		fired = fired[:0]
		now := time.Now()
		for _, r := range list() {
			if r.ScheduledAt.Before(now) { // not one fired ahead
				fired = append(fired, r)
			}
		}
		return len(fired) >= 2
	})
	to := fired[0].ScheduledAt // the newest: every tick up to it has fired
	from := to.Add(-39 * period)
	taken := 0
	for _, r := range fired {
		if !r.ScheduledAt.Before(from) && !r.ScheduledAt.After(to) {
			taken++
		}
	}
	rangeArgs := []string{"backfill", "bf", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)}

	// A dry run lists the 40 ticks and makes nothing.
	before := len(list())
	var dry control.BackfillReply
	if err := json.Unmarshal([]byte(e.ok(append(rangeArgs, "--dry-run", "--json")...)), &dry); err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.Ticks != 40 || dry.Taken != taken || len(dry.List) != 40 || dry.Backfill != nil ||
		!dry.List[0].At.Equal(from) || !dry.List[39].At.Equal(to) || dry.List[39].RunID != fired[0].ID {
		t.Fatalf("dry run: %d ticks, %d taken (want 40, %d), %d listed, from %s to %s", dry.Ticks, dry.Taken, taken,
			len(dry.List), dry.From, dry.To)
	}
	text := e.ok(append(rangeArgs, "--dry-run")...)
	if !strings.Contains(text, "40 ticks, "+strconv.Itoa(taken)+" with a run already") || !strings.Contains(text, "has run "+fired[0].ID) ||
		!strings.Contains(text, "dry run: nothing made") || !strings.Contains(text, "both included") {
		t.Fatalf("dry run text:\n%s", text)
	}
	if active, err := st.BackfillsActive(ctx, []string{"bf"}); err != nil || len(active) != 0 {
		t.Fatalf("after a dry run: %d backfills, %v", len(active), err)
	}
	for _, r := range list()[:len(list())-before] {
		if r.Trigger != jobs.TriggerSchedule {
			t.Fatalf("a dry run made run %s (%s)", r.ID, r.Trigger)
		}
	}

	// More than 10,000 ticks (a day of them) are refused without --yes;
	// the client flags may come first.
	day := to.Add(-24 * time.Hour).Format(time.RFC3339)
	r := runBinary(t, "", "", "--config", e.config, "backfill", "bf", "--from", day, "--to", to.Format(time.RFC3339))
	if r.code != exitUsage || !strings.Contains(r.stderr, "more than 10000 ticks") || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("a backfill of a day: exit %d, %s", r.code, r.stderr)
	}
	e.fails(exitUsage, "is in the future", "backfill", "bf", "--from", day, "--to", time.Now().Add(time.Hour).Format(time.RFC3339))
	e.fails(exitUsage, "is after to", "backfill", "bf", "--from", to.Format(time.RFC3339), "--to", from.Format(time.RFC3339))
	e.fails(exitUnknownJob, "unknown job", "backfill", "nope", "--from", day, "--to", to.Format(time.RFC3339))

	// The backfill, cut by a SIGKILL once a few of its runs have written.
	out := e.ok(append(rangeArgs, "--max-parallel", "3")...)
	if !strings.Contains(out, "backfill ") || !strings.Contains(out, "at most 3 active at once") {
		t.Fatalf("backfill: %s", out)
	}
	waitFor(t, "5 lines of backfilled ticks", 30*time.Second, func() bool {
		n := 0
		for _, l := range readWitness(t, witness) {
			if l.tick.Before(fired[len(fired)-1].ScheduledAt) {
				n++
			}
		}
		return n >= 5
	})
	d.kill()
	countBackfilled := func() int {
		n := 0
		for _, r := range list() {
			if r.Trigger == jobs.TriggerBackfill {
				n++
			}
		}
		return n
	}
	atKill := countBackfilled()
	d = e.start(true)
	// The backfill goes on after the restart, from the store alone.
	waitFor(t, "the backfill to go on after the restart", 30*time.Second, func() bool { return countBackfilled() >= atKill+3 })
	var again control.BackfillReply
	if err := json.Unmarshal([]byte(e.ok(append(rangeArgs, "--max-parallel", "3", "--json")...)), &again); err != nil {
		t.Fatal(err)
	}
	if again.Taken < taken+5 {
		t.Errorf("the repeated backfill found %d ticks with a run, want at least %d", again.Taken, taken+5)
	}

	// Every tick of the range gets exactly one run, completed.
	inRange := func(rs []*jobs.Run) map[int64][]*jobs.Run {
		by := map[int64][]*jobs.Run{}
		for _, r := range rs {
			if !r.ScheduledAt.Before(from) && !r.ScheduledAt.After(to) {
				by[r.ScheduledAt.UnixMicro()] = append(by[r.ScheduledAt.UnixMicro()], r)
			}
		}
		return by
	}
	mostActive := 0
	waitFor(t, "every tick of the range run to its end", 60*time.Second, func() bool {
		rs := list()
		active := 0
		for _, r := range rs {
			if r.Trigger == jobs.TriggerBackfill && !r.Status.Terminal() {
				active++
			}
		}
		mostActive = max(mostActive, active)
		by := inRange(rs)
		if len(by) < 40 {
			return false
		}
		for _, rs := range by {
			for _, r := range rs {
				if !r.Status.Terminal() {
					return false
				}
			}
		}
		return true
	})
	d.stop()
	if mostActive > 3 {
		t.Errorf("%d backfill runs were active at once, over --max-parallel 3", mostActive)
	}
	if active, err := st.BackfillsActive(ctx, []string{"bf"}); err != nil || len(active) != 0 {
		t.Errorf("after the backfills ended: %d unfinished, %v", len(active), err)
	}
	by := inRange(list())
	scheduled := map[string]bool{}
	for _, r := range fired {
		scheduled[r.ID] = true
	}
	backfilled := 0
	for at, rs := range by {
		tick := time.UnixMicro(at).UTC()
		switch {
		case len(rs) != 1:
			t.Errorf("tick %s has %d runs", tick.Format(time.RFC3339), len(rs))
		case rs[0].Status != jobs.StatusCompleted:
			t.Errorf("tick %s: run %s ended %s", tick.Format(time.RFC3339), rs[0].ID, rs[0].Status)
		case rs[0].Trigger == jobs.TriggerBackfill:
			backfilled++
		case !scheduled[rs[0].ID] && rs[0].Trigger != jobs.TriggerSchedule:
			t.Errorf("tick %s: run %s of trigger %s", tick.Format(time.RFC3339), rs[0].ID, rs[0].Trigger)
		}
	}
	if backfilled != 40-taken {
		t.Errorf("%d runs backfilled, want %d (40 ticks, %d run by the scheduler)", backfilled, 40-taken, taken)
	}
	for _, l := range readWitness(t, witness) {
		if rs := by[l.tick.UnixMicro()]; len(rs) == 1 && rs[0].ID != l.run {
			t.Errorf("tick %s ran as run %s and as %s", l.tick.Format(time.RFC3339), rs[0].ID, l.run)
		}
	}
	t.Logf("40 ticks: %d run by the scheduler, %d backfilled, at most %d active at once seen; the repeat found %d with a run",
		taken, backfilled, mostActive, again.Taken)
}

// TestClusterBackfillGoesOnElsewhere: on two nodes of one PostgreSQL
// database, a backfill started through node-1 goes on on node-2 after
// node-1 is SIGKILLed for good: its attempts cut by the kill are
// recovered and retried, every tick of the range ends with exactly one
// completed run, and never more than --max-parallel of them were active.
func TestClusterBackfillGoesOnElsewhere(t *testing.T) {
	proctest.Long(t, "a cluster node SIGKILLed during a backfill")
	witness := filepath.Join(t.TempDir(), "witness")
	c := newCluster(t, 2, fmt.Sprintf(`[[job]]
name = "bf"
schedule = "0 * * * *"
timezone = "UTC"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $SCHEDULERD_ATTEMPT" >> %s; sleep 0.3'
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "1s" }
`, witness))
	ctx := context.Background()
	y, m, d := time.Now().UTC().AddDate(0, 0, -1).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
	r := c.cli("node-1", "backfill", "bf", "--from", day, "--to", day, "--max-parallel", "2", "--json")
	var reply control.BackfillReply
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &reply) != nil || reply.Ticks != 24 || reply.Backfill == nil {
		t.Fatalf("backfill through node-1: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "4 backfilled ticks written", 30*time.Second, func() bool { return len(readWitness(t, witness)) >= 4 })
	c.node("node-1").d.kill()
	killed := time.Now()

	mostActive := 0
	var runs []*jobs.Run
	waitFor(t, "every tick of the day run to its end on node-2", 90*time.Second, func() bool {
		var err error
		runs, err = c.st.RunsList(ctx, store.RunFilter{Job: "bf", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		active, done := 0, 0
		for _, r := range runs {
			switch {
			case r.Trigger != jobs.TriggerBackfill:
			case r.Status.Terminal():
				done++
			default:
				active++
			}
		}
		mostActive = max(mostActive, active)
		return done == 24
	})
	byTick := map[int64]int{}
	onNode2, madeAfter := 0, 0
	for _, r := range runs {
		if r.Trigger != jobs.TriggerBackfill {
			continue
		}
		byTick[r.ScheduledAt.UnixMicro()]++
		if r.Status != jobs.StatusCompleted {
			t.Errorf("run %s of %s ended %s", r.ID, r.ScheduledAt.Format(time.RFC3339), r.Status)
		}
		if r.Node == "node-2" {
			onNode2++
		}
		if r.CreatedAt.After(killed) {
			madeAfter++
		}
	}
	for at, n := range byTick {
		if n != 1 {
			t.Errorf("tick %s has %d runs", time.UnixMicro(at).UTC().Format(time.RFC3339), n)
		}
	}
	if len(byTick) != 24 || madeAfter == 0 || onNode2 == 0 || mostActive > 2 {
		t.Errorf("%d ticks backfilled (want 24), %d runs made after the kill, %d last run on node-2, at most %d active at once seen (want at most 2)",
			len(byTick), madeAfter, onNode2, mostActive)
	}
	for _, l := range readWitness(t, witness) {
		if byTick[l.tick.UnixMicro()] != 1 {
			t.Errorf("the witness has tick %s, which has %d runs", l.tick.Format(time.RFC3339), byTick[l.tick.UnixMicro()])
		}
	}
	t.Logf("24 ticks: %d runs made after node-1 was killed, %d last run on node-2, at most %d active at once seen",
		madeAfter, onNode2, mostActive)
}
