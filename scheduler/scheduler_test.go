package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

func TestCronFiresEachTickOnce(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("every10s", h.succeed, func(d *jobs.Definition) {
			d.Schedule = mustSchedule(t, "*/10 * * * * *")
		})}
	})
	for i := 1; i <= 6; i++ {
		h.advanceTo(t0.Add(time.Duration(i) * 10 * time.Second))
		h.attemptsDone(1)
	}
	infos, at := h.calls.snapshot()
	if len(infos) != 6 {
		t.Fatalf("got %d calls, want 6", len(infos))
	}
	for i, info := range infos {
		want := t0.Add(time.Duration(i+1) * 10 * time.Second)
		if !info.ScheduledAt.Equal(want) || !at[i].Equal(want) {
			t.Errorf("call %d: scheduled %s at %s, want %s", i, info.ScheduledAt, at[i], want)
		}
	}
	// A restart at the same instant fires nothing again.
	h.stop()
	h.start([]*jobs.Definition{job("every10s", h.succeed, func(d *jobs.Definition) {
		d.Schedule = mustSchedule(t, "*/10 * * * * *")
	})})
	if n := len(h.runs("every10s")); n != 6 {
		t.Fatalf("after restart: %d runs, want 6", n)
	}
	for _, r := range h.runs("every10s") {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 || r.Trigger != jobs.TriggerSchedule {
			t.Errorf("run %s: status %s attempt %d trigger %s", r.ID, r.Status, r.Attempt, r.Trigger)
		}
	}
}

// TestCatchupAfterDowntime stops the daemon for ten minutes and restarts it:
// the catchup policy decides what happens to the ticks missed meanwhile.
func TestCatchupAfterDowntime(t *testing.T) {
	for _, tc := range []struct {
		catchup jobs.Catchup
		want    []time.Duration // ticks (after t0) that get a run after the restart
		skipped int64
	}{
		{jobs.CatchupNone, []time.Duration{10 * time.Minute}, 9},
		{jobs.CatchupLatest, []time.Duration{10 * time.Minute}, 9},
		{jobs.CatchupAll, []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
			6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute}, 0},
	} {
		t.Run(string(tc.catchup), func(t *testing.T) {
			mk := func(h *harness) []*jobs.Definition {
				return []*jobs.Definition{job("minutely", h.succeed, func(d *jobs.Definition) {
					d.Schedule = mustSchedule(t, "* * * * *")
					d.Catchup = tc.catchup
					d.MisfireGrace = 30 * time.Second
				})}
			}
			h := newHarness(t, mk)
			h.stop()
			// Down from t0 to t0+10m10s: the tick at 10m is 10s late, within the grace.
			h.clock.Set(t0.Add(10*time.Minute + 10*time.Second))
			h.start(mk(h))
			h.attemptsDone(len(tc.want))
			var want []time.Time
			for _, d := range tc.want {
				want = append(want, t0.Add(d))
			}
			if got := ticksOf(h.runs("minutely")); !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("runs for ticks %v, want %v", got, want)
			}
			if c := h.cursor("minutely"); c.Skipped != tc.skipped {
				t.Errorf("skipped %d ticks, want %d", c.Skipped, tc.skipped)
			}
		})
	}
}

// TestOverlapAfterDowntime: the late ticks of a job every 10 s, found
// within misfire_grace after 35 s down, are judged one after another as
// if fired at their time: skip runs the oldest and skips the others (its
// run is pending when they come), replace runs the newest, allow and
// queue run each. Before the fix, skip and replace made a run of each
// late tick, which then ran back to back as queue would.
func TestOverlapAfterDowntime(t *testing.T) {
	late := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}
	for _, tc := range []struct {
		overlap jobs.Overlap
		want    []time.Duration
	}{
		{jobs.OverlapSkip, late[:1]},
		{jobs.OverlapReplace, late[2:]},
		{jobs.OverlapAllow, late},
		{jobs.OverlapQueue, late},
	} {
		t.Run(string(tc.overlap), func(t *testing.T) {
			mk := func(h *harness) []*jobs.Definition {
				return []*jobs.Definition{job("often", h.succeed, func(d *jobs.Definition) {
					d.Schedule = mustSchedule(t, "*/10 * * * * *")
					d.Overlap = tc.overlap
					d.MisfireGrace = time.Minute
				})}
			}
			h := newHarness(t, mk)
			h.stop()
			h.clock.Set(t0.Add(35 * time.Second))
			h.start(mk(h))
			h.attemptsDone(len(tc.want))
			var want []time.Time
			for _, d := range tc.want {
				want = append(want, t0.Add(d))
			}
			if got := ticksOf(h.runs("often")); !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("runs for ticks %v, want %v", got, want)
			}
			if c, skipped := h.cursor("often"), int64(len(late)-len(tc.want)); c.Skipped != skipped {
				t.Errorf("skipped %d ticks, want %d", c.Skipped, skipped)
			}
		})
	}
}

func TestCatchupLatestFiresNewestMissedTick(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("hourly", h.succeed, func(d *jobs.Definition) {
			d.Schedule = mustSchedule(t, "0 * * * *")
			d.Catchup = jobs.CatchupLatest
		})}
	}
	h := newHarness(t, mk)
	h.stop()
	// Down for 3h30m: ticks at 13:00, 14:00, 15:00 are missed, none within the grace.
	h.clock.Set(t0.Add(3*time.Hour + 30*time.Minute))
	h.start(mk(h))
	h.attemptsDone(1)
	got := ticksOf(h.runs("hourly"))
	if want := []time.Time{t0.Add(3 * time.Hour)}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("runs for ticks %v, want %v", got, want)
	}
	if c := h.cursor("hourly"); c.Skipped != 2 || !c.LastSkippedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("cursor skipped %d last %s, want 2 and %s", c.Skipped, c.LastSkippedAt, t0.Add(2*time.Hour))
	}
}

func TestCatchupAllBoundedByWindowAndMax(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("minutely", h.succeed, func(d *jobs.Definition) {
			d.Schedule = mustSchedule(t, "* * * * *")
			d.Catchup = jobs.CatchupAll
			d.CatchupWindow = 30 * time.Minute
			d.CatchupMax = 5
		})}
	}
	h := newHarness(t, mk)
	h.cfg.Concurrency = 10
	h.stop()
	h.clock.Set(t0.Add(2*time.Hour + 30*time.Second))
	h.start(mk(h))
	h.attemptsDone(6)
	got := ticksOf(h.runs("minutely"))
	// Ticks 12:01..14:00 are due at 14:00:30. 14:00 is within the grace: it
	// fires anyway. Of the missed ones, those older than the 30m window
	// (12:01..13:30) are skipped, and catchup_max keeps the newest 5 of the
	// rest (13:55..13:59).
	var want []time.Time
	for m := 115; m <= 120; m++ {
		want = append(want, t0.Add(time.Duration(m)*time.Minute))
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("runs for ticks %v, want %v", got, want)
	}
	if c := h.cursor("minutely"); c.Skipped != 114 {
		t.Errorf("skipped %d, want 114", c.Skipped)
	}
	// One line says all 114, and why.
	lines := h.logged.with("skipped", "job=minutely")
	if len(lines) != 1 || !strings.Contains(lines[0], `"ticks skipped" component=scheduler node=node-a job=minutely count=114 first=2026-03-02T12:01:00Z last=2026-03-02T13:54:00Z catchup=all `+
		`why="90 older than catchup_window, 24 missed by more than misfire_grace"`) {
		t.Errorf("skipped ticks logged as:\n%s", strings.Join(lines, "\n"))
	}
}

// TestSkippedTicksLoggedOnceAJob: the ticks a job skipped while the
// daemon was down are logged as one line for the job, with their count and
// the first and last of them, however many they are; the cursor counts
// them all, as before.
func TestSkippedTicksLoggedOnceAJob(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{
			job("minutely", h.succeed, func(d *jobs.Definition) {
				d.Schedule = mustSchedule(t, "* * * * *")
				d.Catchup = jobs.CatchupNone
			}),
			job("often", h.succeed, func(d *jobs.Definition) {
				d.Schedule = mustSchedule(t, "*/10 * * * * *")
				d.Catchup = jobs.CatchupNone
			}),
		}
	}
	h := newHarness(t, mk)
	h.cfg.Concurrency = 10
	h.stop()
	// Down for 7m30s. Ticks missed by more than the minute of
	// misfire_grace are skipped: 12:01..12:06 and 12:00:10..12:06:20;
	// 12:07 and 12:06:30..12:07:30 fire.
	h.clock.Set(t0.Add(7*time.Minute + 30*time.Second))
	h.start(mk(h))
	h.attemptsDone(8)
	for _, tt := range []struct {
		job         string
		count       int64
		first, last string
	}{
		{"minutely", 6, "12:01:00", "12:06:00"},
		{"often", 38, "12:00:10", "12:06:20"},
	} {
		if c := h.cursor(tt.job); c.Skipped != tt.count {
			t.Errorf("%s: the cursor counts %d skipped ticks, want %d", tt.job, c.Skipped, tt.count)
		}
		want := fmt.Sprintf(`"ticks skipped" component=scheduler node=node-a job=%s count=%d first=2026-03-02T%sZ last=2026-03-02T%sZ catchup=none why="missed by more than misfire_grace"`,
			tt.job, tt.count, tt.first, tt.last)
		if lines := h.logged.with("skipped", "job="+tt.job+" "); len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("%s: skipped ticks logged as:\n%s\nwant one line with %s", tt.job, strings.Join(lines, "\n"), want)
		}
	}
}

func TestRetryBackoffThenDeadLetter(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("flaky", h.fail, func(d *jobs.Definition) {
			d.Retry = jobs.RetryPolicy{MaxAttempts: 4, Backoff: jobs.BackoffExponential,
				InitialDelay: 10 * time.Second, MaxDelay: 30 * time.Second, Jitter: true}
		})}
	})
	// Rand returns 1: jitter takes the top of [d/2, d], so times are exact.
	r, err := h.s.Trigger(context.Background(), "flaky", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	for _, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second} {
		cur := h.run(r.ID)
		if cur.Status != jobs.StatusRetrying {
			t.Fatalf("status %s, want retrying", cur.Status)
		}
		if want := h.clock.Now().Add(delay); !cur.NotBefore.Equal(want) {
			t.Fatalf("next attempt at %s, want %s", cur.NotBefore, want)
		}
		// Not a moment before the backoff.
		h.advanceTo(cur.NotBefore.Add(-time.Second))
		if got := h.run(r.ID).Status; got != jobs.StatusRetrying {
			t.Fatalf("started before its backoff: %s", got)
		}
		h.advanceTo(cur.NotBefore)
		h.attemptsDone(1)
	}
	final := h.run(r.ID)
	if final.Status != jobs.StatusDeadLetter || final.Attempt != 4 || final.Reason != jobs.ReasonFailed {
		t.Fatalf("final: status %s attempt %d reason %s", final.Status, final.Attempt, final.Reason)
	}
	_, at := h.calls.snapshot()
	want := []time.Time{t0, t0.Add(10 * time.Second), t0.Add(30 * time.Second), t0.Add(60 * time.Second)}
	if !slices.EqualFunc(at, want, time.Time.Equal) {
		t.Errorf("attempts at %v, want %v", at, want)
	}
	var trans []string
	for _, e := range h.events(r.ID) {
		trans = append(trans, string(e.From)+">"+string(e.To))
	}
	wantTrans := []string{">pending", "pending>running", "running>retrying", "retrying>running", "running>retrying",
		"retrying>running", "running>retrying", "retrying>running", "running>dead_letter"}
	if !slices.Equal(trans, wantTrans) {
		t.Errorf("events %v, want %v", trans, wantTrans)
	}
}

func TestNoRetryExitCodeGoesToDeadLetter(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("strict", nil, func(d *jobs.Definition) {
			d.Handler = nil
			d.Shell = "echo bad input >&2; exit 2"
			d.NoRetryExitCodes = []int{2}
		})}
	})
	r, err := h.s.Trigger(context.Background(), "strict", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	got := h.run(r.ID)
	if got.Status != jobs.StatusDeadLetter || got.Reason != jobs.ReasonNoRetryCode || got.ExitCode == nil || *got.ExitCode != 2 {
		t.Fatalf("status %s reason %s exit %v", got.Status, got.Reason, got.ExitCode)
	}
	atts, err := h.st.RunAttempts(context.Background(), r.ID)
	if err != nil || len(atts) != 1 || atts[0].Output != "bad input\n" {
		t.Fatalf("attempts %+v, %v", atts, err)
	}
}

func TestExpiryWhenNotStartedByNotAfter(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("slow", h.blockUntil(release), func(d *jobs.Definition) { d.MaxConcurrency = 1 })}
	})
	ctx := context.Background()
	if _, err := h.s.Trigger(ctx, "slow", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	// The second run cannot start while the first holds the only slot.
	r2, err := h.s.Trigger(ctx, "slow", TriggerParams{NotAfter: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	if got := h.run(r2.ID).Status; got != jobs.StatusPending {
		t.Fatalf("status %s, want pending", got)
	}
	h.advanceTo(t0.Add(time.Minute))
	got := h.run(r2.ID)
	if got.Status != jobs.StatusCancelled || got.Reason != jobs.ReasonExpired {
		t.Fatalf("status %s reason %s, want cancelled expired", got.Status, got.Reason)
	}
	// A window that cannot open is refused.
	if _, err := h.s.Trigger(ctx, "slow", TriggerParams{NotBefore: t0.Add(2 * time.Hour), NotAfter: t0.Add(time.Hour)}); !errors.Is(err, ErrInvalidWindow) {
		t.Fatalf("inverted window: %v", err)
	}
}

func TestNotBeforeHolds(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("later", h.succeed)}
	})
	r, err := h.s.Trigger(context.Background(), "later", TriggerParams{NotBefore: t0.Add(90 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.advanceTo(t0.Add(89 * time.Second))
	if got := h.run(r.ID).Status; got != jobs.StatusPending {
		t.Fatalf("started early: %s", got)
	}
	h.advanceTo(t0.Add(90 * time.Second))
	h.attemptsDone(1)
	if _, at := h.calls.snapshot(); !at[0].Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("started at %s", at[0])
	}
}

func TestOverlapPolicies(t *testing.T) {
	for _, tc := range []struct {
		overlap jobs.Overlap
		runs    int         // runs made by two ticks while the first is running
		first   jobs.Status // status of the first run after the second tick
		second  jobs.Status // status of the second run right after the second tick
	}{
		{jobs.OverlapAllow, 2, jobs.StatusRunning, jobs.StatusRunning},
		{jobs.OverlapSkip, 1, jobs.StatusRunning, ""},
		{jobs.OverlapQueue, 2, jobs.StatusRunning, jobs.StatusPending},
		{jobs.OverlapReplace, 2, jobs.StatusCancelled, jobs.StatusRunning},
	} {
		t.Run(string(tc.overlap), func(t *testing.T) {
			release := make(chan struct{})
			h := newHarness(t, func(h *harness) []*jobs.Definition {
				return []*jobs.Definition{job("long", h.blockUntil(release), func(d *jobs.Definition) {
					d.Schedule = mustSchedule(t, "* * * * *")
					d.Overlap = tc.overlap
				})}
			})
			defer close(release)
			h.advanceTo(t0.Add(time.Minute))
			h.handled(1)
			h.advanceTo(t0.Add(2 * time.Minute))
			if tc.overlap == jobs.OverlapReplace {
				h.attemptsDone(1) // the replaced attempt stops
				h.handled(1)
			}
			if tc.overlap == jobs.OverlapAllow {
				h.handled(1)
			}
			runs := h.runs("long")
			if len(runs) != tc.runs {
				t.Fatalf("%d runs, want %d", len(runs), tc.runs)
			}
			if runs[0].Status != tc.first {
				t.Errorf("first run %s, want %s", runs[0].Status, tc.first)
			}
			if tc.runs == 2 && runs[1].Status != tc.second {
				t.Errorf("second run %s, want %s", runs[1].Status, tc.second)
			}
			if tc.overlap == jobs.OverlapReplace && runs[0].Reason != jobs.ReasonReplaced {
				t.Errorf("first run reason %s, want replaced", runs[0].Reason)
			}
			if tc.overlap == jobs.OverlapSkip {
				if c := h.cursor("long"); c.Skipped != 1 {
					t.Errorf("skipped %d, want 1", c.Skipped)
				}
			}
		})
	}
}

func TestTimeoutFailsAttemptThroughRetry(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("hang", h.blockUntil(nil), func(d *jobs.Definition) { d.Timeout = 5 * time.Minute })}
	})
	r, err := h.s.Trigger(context.Background(), "hang", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	h.clock.Advance(5 * time.Minute)
	h.attemptsDone(1)
	got := h.run(r.ID)
	if got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonTimeout {
		t.Fatalf("status %s reason %s error %q", got.Status, got.Reason, got.Error)
	}
}

func TestCancelRunningAttempt(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("hang", h.blockUntil(nil))}
	})
	ctx := context.Background()
	r, err := h.s.Trigger(ctx, "hang", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	if _, err := h.s.Cancel(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	got := h.run(r.ID)
	if got.Status != jobs.StatusCancelled || got.Reason != jobs.ReasonCancelled {
		t.Fatalf("status %s reason %s", got.Status, got.Reason)
	}
	if _, err := h.s.Cancel(ctx, r.ID, ""); !errors.Is(err, jobs.ErrInvalidTransition) {
		t.Fatalf("cancel of a finished run: %v", err)
	}
}

func TestShutdownStopsAttemptsThroughRetry(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("hang", h.blockUntil(nil))}
	}
	h := newHarness(t, mk)
	r, err := h.s.Trigger(context.Background(), "hang", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	h.stop() // advances the fake clock past shutdown_grace
	got := h.run(r.ID)
	if got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonShutdown {
		t.Fatalf("status %s reason %s", got.Status, got.Reason)
	}
}

func TestRestartResolvesInterruptedAttempts(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} }
	h := newHarness(t, mk)
	h.stop()
	// A previous process of this node claimed a run and died (no result written).
	st, err := sqliteOpen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.RunInsert(context.Background(), store.RunInsertParams{Job: "work", Trigger: jobs.TriggerManual,
		ScheduledAt: t0, NotBefore: t0, Retry: jobs.RetryPolicy{MaxAttempts: 3, Backoff: jobs.BackoffFixed, InitialDelay: time.Second}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.RunsClaim(context.Background(), store.ClaimParams{Node: "node-a", Incarnation: "dead-process",
		Jobs: store.NewJobLimits(map[string]int{"work": 0}), Limit: 1, Now: t0})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	st.Close()

	h.start(mk(h))
	got := h.run(r.ID)
	if got.Status != jobs.StatusRetrying || got.Reason != jobs.ReasonInterrupted {
		t.Fatalf("status %s reason %s", got.Status, got.Reason)
	}
	h.advanceTo(got.NotBefore)
	h.attemptsDone(1)
	if got := h.run(r.ID); got.Status != jobs.StatusCompleted || got.Attempt != 2 {
		t.Fatalf("status %s attempt %d", got.Status, got.Attempt)
	}
	// The stale incarnation can no longer write.
	_, err = h.st.RunTransition(context.Background(), jobs.Complete(jobs.Fence{RunID: r.ID, Attempt: 1, Incarnation: "dead-process"}, "node-a", jobs.Result{}, t0))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale write: %v", err)
	}
}

func TestOneOffJobFiresOnceEver(t *testing.T) {
	at := t0.Add(5 * time.Minute)
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("report", h.succeed, func(d *jobs.Definition) { d.At = at })}
	}
	h := newHarness(t, mk)
	h.advanceTo(at.Add(-time.Second))
	if len(h.calls.ch) != 0 {
		t.Fatal("fired early")
	}
	h.advanceTo(at)
	h.attemptsDone(1)
	// Restarts and reloads do not fire it again.
	h.stop()
	h.start(mk(h))
	if err := h.s.Reload(context.Background(), mk(h)); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.advanceTo(at.Add(time.Hour))
	runs := h.runs("report")
	if len(runs) != 1 || runs[0].Trigger != jobs.TriggerOnce || runs[0].Status != jobs.StatusCompleted {
		t.Fatalf("runs %v", statusOf(runs))
	}
}

func TestPauseAndResume(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("minutely", h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "* * * * *") })}
	}
	h := newHarness(t, mk)
	ctx := context.Background()
	if _, err := h.s.Pause(ctx, "minutely", ""); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.advanceTo(t0.Add(3 * time.Minute))
	if n := len(h.runs("minutely")); n != 0 {
		t.Fatalf("paused job fired %d runs", n)
	}
	// Triggers still work while paused.
	if _, err := h.s.Trigger(ctx, "minutely", TriggerParams{}); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	// The pause survives a restart.
	h.stop()
	h.start(mk(h))
	h.advanceTo(t0.Add(5 * time.Minute))
	if n := len(h.runs("minutely")); n != 1 {
		t.Fatalf("%d runs after restart, want the 1 manual run", n)
	}
	if _, err := h.s.Resume(ctx, "minutely", ""); err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.advanceTo(t0.Add(6 * time.Minute))
	h.attemptsDone(1)
	runs := h.runs("minutely")
	if len(runs) != 2 || !runs[1].ScheduledAt.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("after resume: %v", ticksOf(runs))
	}
}

func TestReloadSwapsJobs(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("old", h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "* * * * *") })}
	})
	ctx := context.Background()
	err := h.s.Reload(ctx, []*jobs.Definition{job("new", h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "*/2 * * * *") })})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.advanceTo(t0.Add(2 * time.Minute))
	h.attemptsDone(1)
	if n := len(h.runs("old")); n != 0 {
		t.Errorf("removed job fired %d runs", n)
	}
	if got := ticksOf(h.runs("new")); len(got) != 1 || !got[0].Equal(t0.Add(2*time.Minute)) {
		t.Errorf("new job runs %v", got)
	}
	if _, err := h.s.Trigger(ctx, "old", TriggerParams{}); !errors.Is(err, ErrUnknownJob) {
		t.Errorf("trigger of a removed job: %v", err)
	}
	// An invalid set is refused whole and the running one stays.
	bad := []*jobs.Definition{job("new", h.succeed), job("new", h.succeed)}
	if err := h.s.Reload(ctx, bad); err == nil {
		t.Fatal("duplicate job names accepted")
	}
	if _, ok := h.s.Job("new"); !ok || len(h.s.Jobs()) != 1 {
		t.Fatal("running jobs changed by a refused reload")
	}
}

func TestDedupIDRefusedWhileActive(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("once-at-a-time", h.blockUntil(release))}
	})
	ctx := context.Background()
	r, err := h.s.Trigger(ctx, "once-at-a-time", TriggerParams{DedupID: "deploy-42"})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.handled(1)
	if _, err := h.s.Trigger(ctx, "once-at-a-time", TriggerParams{DedupID: "deploy-42"}); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("second trigger: %v", err)
	}
	close(release)
	h.attemptsDone(1)
	if got := h.run(r.ID).Status; got != jobs.StatusCompleted {
		t.Fatalf("status %s", got)
	}
	if _, err := h.s.Trigger(ctx, "once-at-a-time", TriggerParams{DedupID: "deploy-42"}); err != nil {
		t.Fatalf("trigger after the first finished: %v", err)
	}
}

func TestPruneFinishedRuns(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition { return []*jobs.Definition{job("work", h.succeed)} })
	h.stop()
	h.cfg.History = time.Hour
	h.cfg.PruneInterval = 10 * time.Minute
	h.start([]*jobs.Definition{job("work", h.succeed)})
	r, err := h.s.Trigger(context.Background(), "work", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	h.attemptsDone(1)
	h.advanceTo(t0.Add(50 * time.Minute))
	if _, err := h.st.RunGet(context.Background(), r.ID); err != nil {
		t.Fatalf("pruned too early: %v", err)
	}
	h.clock.Advance(20 * time.Minute) // prune loop runs at 70m: the run finished 70m ago
	deadline := time.Now().Add(signalWait)
	for {
		_, err := h.st.RunGet(context.Background(), r.ID)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not pruned: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // waits for the prune goroutine, not for fake time
	}
}

// TestResumeByAnotherNodeIsSeen: a job paused here and resumed through
// another node (here: the store directly) fires again here within a poll
// interval.
func TestResumeByAnotherNodeIsSeen(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("minutely", h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "* * * * *") })}
	})
	ctx := context.Background()
	if _, err := h.s.Pause(ctx, "minutely", ""); err != nil {
		t.Fatal(err)
	}
	h.loop()
	// Another node resumes it: only the store knows.
	if _, err := h.st.SchedulePause(ctx, "minutely", false, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.advanceTo(t0.Add(time.Minute)) // one poll interval later: the cursor is re-read
	h.advanceTo(t0.Add(2 * time.Minute))
	h.attemptsDone(1)
	if got := ticksOf(h.runs("minutely")); len(got) == 0 {
		t.Fatal("the job resumed elsewhere never fired here")
	}
}

// TestLongAttemptsDoNotHoldBackClaims: claims are batched while attempts
// finish, but a free slot next to long-running attempts is used at once.
func TestLongAttemptsDoNotHoldBackClaims(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := newHarnessWith(t, func(h *harness) { h.cfg.Concurrency = 8 }, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("long", h.blockUntil(release)), job("short", h.blockUntil(release))}
	})
	ctx := context.Background()
	for range 7 {
		if _, err := h.s.Trigger(ctx, "long", TriggerParams{}); err != nil {
			t.Fatal(err)
		}
	}
	h.loop()
	h.handled(7)
	r, err := h.s.Trigger(ctx, "short", TriggerParams{})
	if err != nil {
		t.Fatal(err)
	}
	h.loop()
	if info := h.handled(1)[0]; info.RunID != r.ID {
		t.Fatalf("started run %s, want %s", info.RunID, r.ID)
	}
	if got := h.s.Running(); got != 8 {
		t.Fatalf("%d attempts running, want 8", got)
	}
}

// TestManySchedulesFireAtTheirTicks drives jobs of different schedules
// through the timer heap: every job fires at each of its ticks and at no
// other time, across a pause and resume and a reload that changes some
// schedules.
func TestManySchedulesFireAtTheirTicks(t *testing.T) {
	specs := []string{"* * * * *", "*/2 * * * *", "*/3 * * * *", "*/5 * * * *", "7 * * * *"}
	defsOf := func(h *harness, shift bool) []*jobs.Definition {
		var defs []*jobs.Definition
		for i := range 20 {
			spec := specs[i%len(specs)]
			if k := i % len(specs); shift && i%2 == 0 && (k == 0 || k == 1 || k == 3) {
				spec = map[bool]string{true: "*/4 * * * *", false: "*/10 * * * *"}[i%4 == 0]
			}
			defs = append(defs, job(fmt.Sprintf("job-%02d", i), h.succeed, func(d *jobs.Definition) {
				d.Schedule = mustSchedule(t, spec)
			}))
		}
		return defs
	}
	h := newHarnessWith(t, func(h *harness) { h.cfg.Concurrency = 32 }, func(h *harness) []*jobs.Definition { return defsOf(h, false) })
	ctx := context.Background()
	want := map[string][]time.Time{}
	step := func(min int, defs []*jobs.Definition, paused string) {
		at := t0.Add(time.Duration(min) * time.Minute)
		n := 0
		for _, d := range defs {
			if d.Schedule.Next(at.Add(-time.Second)).Equal(at) && d.Name != paused {
				want[d.Name] = append(want[d.Name], at)
				n++
			}
		}
		h.advanceTo(at)
		h.attemptsDone(n)
	}
	defs := defsOf(h, false)
	for m := 1; m <= 10; m++ {
		step(m, defs, "")
	}
	if _, err := h.s.Pause(ctx, "job-03", ""); err != nil {
		t.Fatal(err)
	}
	for m := 11; m <= 15; m++ {
		step(m, defs, "job-03")
	}
	if _, err := h.s.Resume(ctx, "job-03", ""); err != nil {
		t.Fatal(err)
	}
	for m := 16; m <= 20; m++ {
		step(m, defs, "")
	}
	// The reload changes schedules of jobs that fired at 12:20 to ones
	// with no tick between then and now: each goes on from its cursor.
	defs = defsOf(h, true)
	if err := h.s.Reload(ctx, defs); err != nil {
		t.Fatal(err)
	}
	h.loop()
	for m := 21; m <= 40; m++ {
		step(m, defs, "")
	}
	for _, d := range defs {
		got := ticksOf(h.runs(d.Name))
		if fmt.Sprint(got) != fmt.Sprint(want[d.Name]) {
			t.Errorf("%s: ticks %v, want %v", d.Name, got, want[d.Name])
		}
	}
}
