package schedule_test

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// dayKind is the kind of a local day, for counting fires per day.
type dayKind int

const (
	normalDay      dayKind = iota
	springDay              // one hour skipped
	fallDay                // one hour repeated
	springHalfHour         // 30 minutes skipped (Australia/Lord_Howe)
	fallHalfHour           // 30 minutes repeated (Australia/Lord_Howe)
)

// firesPerDay is the expected number of fires in a local day, per spec and
// kind of day. Fixed-time jobs fire once a day, transition days included;
// wildcard jobs follow real time. For the fixed-time "0 0-23 * * *", 02:00 in
// a 60-minute gap fires at the jump, 03:00, merging with 03:00's own fire; in
// a 30-minute gap it fires at 02:30, on its own.
var firesPerDay = map[string][5]int{
	//              normal spring fall springHalf fallHalf
	"30 2 * * *":   {1, 1, 1, 1, 1},
	"0 0 * * *":    {1, 1, 1, 1, 1},
	"@daily":       {1, 1, 1, 1, 1},
	"0 0-23 * * *": {24, 23, 24, 24, 24},
	"0 * * * *":    {24, 23, 25, 23, 24},
	"*/30 * * * *": {48, 46, 50, 47, 49},
	"15 * * * *":   {24, 23, 25, 23, 24},
	"45 * * * *":   {24, 23, 25, 24, 25},
}

func TestFireCountsPerLocalDay(t *testing.T) {
	type day struct {
		date string
		kind dayKind
	}
	zones := []struct {
		zone string
		days []day // the transition days; the days around are normal
	}{
		{"Europe/Berlin", []day{{"2026-03-29", springDay}, {"2026-10-25", fallDay}}},
		{"America/New_York", []day{{"2026-03-08", springDay}, {"2026-11-01", fallDay}}},
		// Midnight skipped on 2026-09-06; 23:00-24:00 repeated on 2026-04-04.
		{"America/Santiago", []day{{"2026-04-04", fallDay}, {"2026-09-06", springDay}}},
		// Midnight skipped on 2026-03-08; 00:00-01:00 repeated on 2026-11-01.
		{"America/Havana", []day{{"2026-03-08", springDay}, {"2026-11-01", fallDay}}},
		{"Australia/Lord_Howe", []day{{"2026-04-05", fallHalfHour}, {"2026-10-04", springHalfHour}}},
		{"Asia/Kolkata", []day{{"2026-03-29", normalDay}, {"2026-10-25", normalDay}}},
		{"Asia/Kathmandu", []day{{"2026-03-29", normalDay}}},
		{"UTC", []day{{"2026-03-29", normalDay}, {"2026-10-25", normalDay}}},
	}
	for _, z := range zones {
		loc := mustLoad(t, z.zone)
		for spec, counts := range firesPerDay {
			s, err := schedule.Parse(spec, loc)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range z.days {
				mid, err := time.ParseInLocation("2006-01-02 15:04", d.date+" 12:00", loc)
				if err != nil {
					t.Fatal(err)
				}
				perDay := map[string]int{}
				end := mid.AddDate(0, 0, 3)
				for next := s.Next(mid.AddDate(0, 0, -3)); next.Before(end); next = s.Next(next) {
					perDay[next.Format("2006-01-02")]++
				}
				for offset := -1; offset <= 1; offset++ {
					date := mid.AddDate(0, 0, offset).Format("2006-01-02")
					kind := normalDay
					if offset == 0 {
						kind = d.kind
					}
					if got, want := perDay[date], counts[kind]; got != want {
						t.Errorf("%s %q: %d fires on %s, want %d", z.zone, spec, got, date, want)
					}
				}
			}
		}
	}
}
