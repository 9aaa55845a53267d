package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
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
