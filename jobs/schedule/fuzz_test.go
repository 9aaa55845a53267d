package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// FuzzSchedule parses arbitrary specs in several zones and, for those that
// parse, checks that chained Next calls never panic, strictly increase and
// are each the first fire time after the second before them.
func FuzzSchedule(f *testing.F) {
	for _, tc := range nextCases {
		f.Add(tc.spec, int64(0))
	}
	for _, spec := range []string{
		"", "0 0 30 2 *", "0 0 31 4 *", "@every 0s", "@every -1m", "@every 500ms",
		"@every 1500ms", "TZ=", "CRON_TZ=", "TZ=Europe/Berlin", "TZ=Nowhere/Zone 0 * * * *",
		"* * * *", "61 * * * *", "@bogus", "0 0 * * * * *", "0 0 29 2 *", "@every 1s",
		"TZ=Asia/Tokyo 0 9 * * *", "CRON_TZ=UTC */5 * * * * *", "TZ=UTC TZ= 0 * * * *",
		", * * * *", "0 0 30 2 mon", "*/7 1-3 * * *", "59 23 31 12 *",
		// crontab(5), Cronos and Quartz syntax, and typos.
		"0 9 * * 1,,5", "0 9 * * 1,5,", "+1 * * * *", "0 0 * * 7", "0 0 * * 5-7", "0 0 * * 7-2",
		"0 0 * * FRI-MON", "0 22-2 * * *", "45-15/2 * * * *", "0 0 28-3/2 * *", "0 0 1 NOV-FEB *",
		"0 0 L * *", "0 0 L-3 * *", "0 0 L-30 * *", "0 0 15W * *", "0 0 LW * *", "0 0 L-2W * *",
		"0 0 1W * *", "0 0 31W * *", "0 0 * * 5L", "0 0 * * fril", "0 0 * * 5#3", "0 0 * * 7#5",
		"0 0 27W * 1L", "0 0 L * sat#4", "*/20 2 L-4 3 *", "0 15 10 ? * 5#3", "0 0 L-30 2 *",
		"0 0 31W 4 *", "0 0 1,L * *", "0 0 * * L", "0 0 * * 5#6", "@reboot", "TZ=Asia/Jerusalem 30 2 27W 3 *",
	} {
		f.Add(spec, int64(1<<33))
	}
	zones := []*time.Location{time.UTC}
	for _, name := range []string{"Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia"} {
		zones = append(zones, mustLoad(f, name))
	}
	// Start instants span 1900 to 2200.
	lo := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	span := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - lo
	f.Fuzz(func(t *testing.T, spec string, start int64) {
		from := time.Unix(lo+(start%span+span)%span, 0)
		for _, loc := range zones {
			s, err := schedule.Parse(spec, loc)
			if err != nil {
				if s != nil {
					t.Fatalf("Parse(%q) returned both a schedule and %v", spec, err)
				}
				continue
			}
			if s.String() != spec {
				t.Fatalf("String() = %q, want %q", s.String(), spec)
			}
			checkChain(t, s, from, 5)
			checkFireTimesMatch(t, s, from, 5)
		}
	})
}

// checkFireTimesMatch checks that each fire time of a calendar schedule has a
// wall clock matching the spec, or is the instant of a zone transition (the
// jump over a skipped time of a fixed-time job).
func checkFireTimesMatch(t *testing.T, s *schedule.Schedule, from time.Time, n int) {
	t.Helper()
	if s.Every() != 0 {
		return
	}
	fields := strings.Fields(s.String())
	if strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ=") {
		fields = fields[1:]
	}
	// robfig is the reference for the syntax it reads; the rest (L, W, #,
	// wrap-around ranges, Sunday as 7) is checked against the package's own
	// day rules, which TestDayForms checks against the time package.
	ref, err := parseReference(strings.Join(fields, " "), s.Location())
	matches := func(next time.Time) bool { return ref.matches(ref.wall(next.Unix())) }
	if err != nil {
		matches = func(next time.Time) bool { return schedule.MatchesWall(s, next) }
	}
	for range n {
		next := s.Next(from)
		if next.IsZero() {
			return
		}
		if start, _ := next.ZoneBounds(); !matches(next) && !start.Equal(next) {
			t.Fatalf("%q in %s: Next(%s) = %s does not match", s, s.Location(), from.Format(time.RFC3339), next.Format(time.RFC3339))
		}
		from = next
	}
}
