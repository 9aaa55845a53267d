package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/store"
)

func TestParseBackfillTime(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		in   string
		end  bool
		want time.Time
	}{
		{"2026-11-01", false, time.Date(2026, 11, 1, 0, 0, 0, 0, berlin)},
		{"2026-11-01", true, time.Date(2026, 11, 2, 0, 0, 0, 0, berlin).Add(-time.Microsecond)},
		// The day of the change to winter time has 25 hours.
		{"2026-10-25", true, time.Date(2026, 10, 25, 23, 59, 59, 999999000, berlin)},
		{"2026-11-01T02:00:00Z", false, time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)},
		{"2026-11-01T02:00:00+05:00", true, time.Date(2026, 10, 31, 21, 0, 0, 0, time.UTC)},
	} {
		got, err := ParseBackfillTime(tt.in, berlin, tt.end)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseBackfillTime(%q, end %v) = %s, %v; want %s", tt.in, tt.end, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-13-01", "2026-11-01 02:00", strings.Repeat("9", 100)} {
		if _, err := ParseBackfillTime(bad, berlin, false); err == nil || !strings.Contains(err.Error(), "want an RFC 3339 time") {
			t.Errorf("ParseBackfillTime(%q): %v", bad, err)
		}
	}
}

// TestBackfillTicks: the ticks of a backfill are the schedule's own, in
// its zone, across a change of summer time, within the job's life, and
// bounded.
func TestBackfillTicks(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	s, err := schedule.Parse("30 2 * * *", berlin)
	if err != nil {
		t.Fatal(err)
	}
	d := &jobs.Definition{Name: "nightly", Schedule: s}
	from := time.Date(2026, 3, 28, 0, 0, 0, 0, berlin)
	to := time.Date(2026, 3, 31, 0, 0, 0, 0, berlin).Add(-time.Microsecond)
	ticks, more := backfillTicks(d, from, to, 100)
	var want []time.Time
	for at := s.Next(from.Add(-time.Nanosecond)); !at.After(to); at = s.Next(at) {
		want = append(want, at)
	}
	if more || len(ticks) != 3 || len(want) != 3 {
		t.Fatalf("ticks of 3 days around the change to summer time: %v (more %v), the schedule's %v", ticks, more, want)
	}
	for i := range ticks {
		if !ticks[i].Equal(want[i]) {
			t.Errorf("tick %d = %s, want %s", i, ticks[i], want[i])
		}
	}
	// From and To are included.
	if ticks, _ := backfillTicks(d, want[0], want[2], 100); len(ticks) != 3 {
		t.Errorf("from the first tick to the last: %v", ticks)
	}
	if ticks, _ := backfillTicks(d, want[0].Add(time.Microsecond), want[2].Add(-time.Microsecond), 100); len(ticks) != 1 {
		t.Errorf("strictly between the first tick and the last: %v", ticks)
	}
	if ticks, more := backfillTicks(d, from, to, 2); !more || len(ticks) != 2 {
		t.Errorf("3 ticks with a limit of 2: %v, more %v", ticks, more)
	}
	// A tick before the job's not_before is not its own.
	d.NotBefore = want[1]
	if ticks, _ := backfillTicks(d, from, to, 100); len(ticks) != 2 || !ticks[0].Equal(want[1]) {
		t.Errorf("ticks from not_before: %v", ticks)
	}
}

// TestBackfill: a backfill refuses what it cannot do, with the error
// callers branch on; a dry run lists the ticks and makes nothing; a
// backfill makes the runs of the ticks without one, max parallel at a
// time, and the loop makes the rest as they end: each handler call is a
// backfill run of its tick, once.
func TestBackfill(t *testing.T) {
	var release chan struct{}
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		release = make(chan struct{})
		block := h.blockUntil(release)
		return []*jobs.Definition{
			job("hourly", block, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "0 * * * *"); d.Overlap = jobs.OverlapAllow }),
			job("minutely", h.succeed, func(d *jobs.Definition) { d.Schedule = mustSchedule(t, "* * * * *") }),
			job("adhoc", h.succeed),
		}
	})
	ctx := t.Context()
	day := t0.Add(-24 * time.Hour).Format(time.RFC3339)
	now := t0.Format(time.RFC3339)
	for _, tt := range []struct {
		job  string
		p    BackfillParams
		want error
		msg  string
	}{
		{"nope", BackfillParams{From: day, To: now}, ErrUnknownJob, "unknown job"},
		{"adhoc", BackfillParams{From: day, To: now}, ErrNoSchedule, "only a job with a schedule"},
		{"hourly", BackfillParams{From: day, To: t0.Add(time.Minute).Format(time.RFC3339)}, ErrBadBackfill, "is in the future"},
		{"hourly", BackfillParams{From: now, To: day}, ErrBadBackfill, "is after to"},
		{"hourly", BackfillParams{From: "soon", To: now}, ErrBadBackfill, "from: want an RFC 3339 time"},
		{"hourly", BackfillParams{From: day, To: now, MaxParallel: -1}, ErrBadBackfill, "max parallel must be from 1"},
		{"minutely", BackfillParams{From: t0.Add(-7 * 24 * time.Hour).Format(time.RFC3339), To: now}, ErrBadBackfill, "more than 10000 ticks"},
	} {
		res, err := h.s.Backfill(ctx, tt.job, tt.p)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Backfill(%s, %+v) = %v, %v; want %v saying %q", tt.job, tt.p, res, err, tt.want, tt.msg)
		}
	}
	// With --yes, a dry run of a week of minutes: 10,081 ticks, the first
	// 10,000 listed.
	res, err := h.s.Backfill(ctx, "minutely", BackfillParams{From: t0.Add(-7 * 24 * time.Hour).Format(time.RFC3339), To: now, DryRun: true, Yes: true})
	if err != nil || res.Ticks != 7*24*60+1 || len(res.List) != MaxBackfillTicks || res.Backfill != nil {
		t.Fatalf("a dry run of a week of minutes: %v", err)
	}

	from := t0.Add(-5 * time.Hour).Format(time.RFC3339)
	res, err = h.s.Backfill(ctx, "hourly", BackfillParams{From: from, To: now, DryRun: true})
	if err != nil || res.Ticks != 6 || res.Taken != 0 || len(res.List) != 6 || res.Backfill != nil || !res.List[5].At.Equal(t0) {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if n := len(h.runs("hourly")); n != 0 {
		t.Fatalf("a dry run made %d runs", n)
	}
	res, err = h.s.Backfill(ctx, "hourly", BackfillParams{From: from, To: now, MaxParallel: 2, Actor: "socket:ops"})
	if err != nil || res.Backfill == nil || res.Backfill.Created != 2 || res.Backfill.Done() {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	h.handled(2)
	h.loop()
	if n := len(h.runs("hourly")); n != 2 {
		t.Fatalf("%d runs while the first two run, want 2", n)
	}
	close(release)
	infos := h.handled(4)
	h.attemptsDone(6)
	seen := map[time.Time]bool{}
	for _, r := range h.runs("hourly") {
		if r.Trigger != jobs.TriggerBackfill || r.Status != jobs.StatusCompleted || r.Actor != "socket:ops" || seen[r.ScheduledAt] {
			t.Errorf("run %s: trigger %s, status %s, actor %q, tick %s", r.ID, r.Trigger, r.Status, r.Actor, r.ScheduledAt)
		}
		seen[r.ScheduledAt] = true
	}
	for _, info := range infos {
		if info.Trigger != jobs.TriggerBackfill {
			t.Errorf("handler called for trigger %s", info.Trigger)
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d ticks backfilled, want 6", len(seen))
	}
	// Again: nothing to make.
	res, err = h.s.Backfill(ctx, "hourly", BackfillParams{From: from, To: now})
	if err != nil || res.Taken != 6 || res.Backfill != nil {
		t.Errorf("the backfill again: %+v, %v", res, err)
	}
}

// TestBackfillWalksTakenTicksInTurns: a backfill over thousands of ticks
// that have runs already walks them a few transactions per call, the
// request's and each loop iteration's, and ends with the runs of the
// ticks that had none.
func TestBackfillWalksTakenTicksInTurns(t *testing.T) {
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("minutely", h.succeed, func(d *jobs.Definition) {
			d.Schedule = mustSchedule(t, "* * * * *")
			d.Overlap = jobs.OverlapAllow
		})}
	})
	const n, free = 6000, 10
	from := t0.Add(-(n - 1) * time.Minute)
	// The ticks but the first and the last free-1 are taken by runs that
	// are not due for decades, so they never run here.
	var taken []store.RunInsertParams
	for i := 1; i <= n-free; i++ {
		at := from.Add(time.Duration(i) * time.Minute)
		taken = append(taken, store.RunInsertParams{Job: "minutely", Trigger: jobs.TriggerOnce, ScheduledAt: at,
			NotBefore: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), Retry: jobs.RetryPolicy{MaxAttempts: 1}, Now: t0})
	}
	if _, err := h.st.RunInsertMany(t.Context(), taken); err != nil {
		t.Fatal(err)
	}
	res, err := h.s.Backfill(t.Context(), "minutely", BackfillParams{From: from.Format(time.RFC3339), To: t0.Format(time.RFC3339), MaxParallel: free})
	if err != nil || res.Ticks != n || res.Taken != n-free || res.Backfill == nil {
		t.Fatalf("backfill: %+v, %v", res, err)
	}
	// The request walked some of the taken ticks; the loop walks the rest.
	if res.Backfill.Done() || res.Backfill.Created != 1 || res.Backfill.Skipped >= n-free {
		t.Fatalf("the request's walk: %+v", res.Backfill)
	}
	for i := 0; ; i++ {
		active, err := h.st.BackfillsActive(t.Context(), []string{"minutely"})
		if err != nil {
			t.Fatal(err)
		}
		if len(active) == 0 {
			break
		}
		if i == 10 {
			t.Fatalf("the backfill is not done after 10 iterations: %+v", active[0])
		}
		h.loop()
	}
	h.handled(free)
	made := 0
	for _, r := range h.runs("minutely") {
		if r.Trigger == jobs.TriggerBackfill {
			made++
			if at := r.ScheduledAt; at.After(from) && !at.After(from.Add((n-free)*time.Minute)) {
				t.Errorf("a backfill run of the taken tick %s", r.ScheduledAt)
			}
		}
	}
	if made != free {
		t.Errorf("%d backfill runs, want %d", made, free)
	}
}
