package schedule_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want string // part of the error message
	}{
		{"", "empty spec"},
		{"   ", "empty spec"},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4 *", "never fires"},
		{"0 0 31 2,4,6,9,11 *", "never fires"},
		{"@every 0s", "less than 1s"},
		{"@every -1m", "less than 1s"},
		{"@every 500ms", "less than 1s"},
		{"@every 1500ms", "not a whole number of seconds"},
		{"@every 1m0.5s", "not a whole number of seconds"},
		{"@every", "exactly one duration"},
		{"@every 1h 2h", "exactly one duration"},
		{"@every soon", "invalid duration"},
		{"TZ=", "empty time zone name"},
		{"CRON_TZ=", "empty time zone name"},
		{"TZ= 0 * * * *", "empty time zone name"},
		{"TZ=Europe/Berlin", "no schedule fields"},
		{"CRON_TZ=Europe/Berlin", "no schedule fields"},
		{"TZ=Europe/Berlin   ", "no schedule fields"},
		{"TZ=Nowhere/Zone 0 * * * *", "unknown time zone"},
		{"TZ=../../etc/passwd 0 * * * *", "unknown time zone"},
		{"TZ=UTC TZ=UTC 0 * * * *", "more than one time zone prefix"},
		{"TZ=UTC CRON_TZ=Europe/Berlin", "more than one time zone prefix"},
		{"* * * *", "expected 5 to 6 fields"},
		{"0 0 * * * * *", "expected 5 to 6 fields"},
		{"61 * * * *", "above maximum"},
		{"0 24 * * *", "above maximum"},
		{"0 0 0 * *", "below minimum"},
		{"0 0 * 13 *", "above maximum"},
		{"0 0 * * 8", "day of week field \"8\": 8 is above maximum 7"},
		{"*/0 * * * *", "step 0 must be at least 1"},
		{"70-5 * * * *", "70 is above maximum 59"},
		{"a * * * *", `minute field "a": value "a" is not a number`},
		{", * * * *", "a comma starts the list"},
		{"*-5 * * * *", "may only be followed by a step"},
		{"0 ?1 * * *", "may only be followed by a step"},
		{"0 0 1,*x * *", "may only be followed by a step"},
		{"@bogus", "unrecognized descriptor"},
		{"@daily 0", "unrecognized descriptor"},
		{"@DAILY", "unrecognized descriptor"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := schedule.Parse(tc.spec, time.UTC)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tc.spec, s)
			}
			if s != nil {
				t.Errorf("Parse(%q) returned a schedule with its error", tc.spec)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("Parse(%q) error = %q, want it to mention %q", tc.spec, msg, tc.want)
			}
			if prefix := "schedule " + strconv.Quote(tc.spec) + ": "; !strings.HasPrefix(msg, prefix) {
				t.Errorf("Parse(%q) error = %q, want prefix %q", tc.spec, msg, prefix)
			}
			if msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("Parse(%q) error %q is not lowercase", tc.spec, msg)
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	for _, tc := range []struct {
		spec  string
		zone  string // expected Location
		every time.Duration
	}{
		{"0 0 29 2 *", "Europe/Berlin", 0},
		{"@every 1s", "Europe/Berlin", time.Second},
		{"@every 90m", "Europe/Berlin", 90 * time.Minute},
		{"@every 1h30m15s", "Europe/Berlin", time.Hour + 30*time.Minute + 15*time.Second},
		{"TZ=Asia/Tokyo 0 9 * * *", "Asia/Tokyo", 0},
		{"CRON_TZ=UTC */5 * * * * *", "UTC", 0},
		{"TZ=Asia/Kolkata @every 2h", "Asia/Kolkata", 2 * time.Hour},
		{"TZ=America/New_York\t@hourly", "America/New_York", 0},
		{"@daily", "Europe/Berlin", 0},
		{"@midnight", "Europe/Berlin", 0},
		{"@hourly", "Europe/Berlin", 0},
		{"@weekly", "Europe/Berlin", 0},
		{"@monthly", "Europe/Berlin", 0},
		{"@yearly", "Europe/Berlin", 0},
		{"@annually", "Europe/Berlin", 0},
		{"  30 2 * * *  ", "Europe/Berlin", 0},
		{"0 0 31 * *", "Europe/Berlin", 0},
		{"0 0 30 2 mon", "Europe/Berlin", 0}, // the 30th or a Monday, in February
		{"0 12 ? jan-mar mon-fri", "Europe/Berlin", 0},
		{"0 0 0 1 1 *", "Europe/Berlin", 0},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := schedule.Parse(tc.spec, berlin)
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.spec {
				t.Errorf("String() = %q, want %q", s.String(), tc.spec)
			}
			if s.Location().String() != tc.zone {
				t.Errorf("Location() = %v, want %s", s.Location(), tc.zone)
			}
			if s.Every() != tc.every {
				t.Errorf("Every() = %v, want %v", s.Every(), tc.every)
			}
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			if next := s.Next(from); !next.After(from) {
				t.Errorf("Next(%s) = %s", from, next)
			}
		})
	}
}

func TestParseNilLocation(t *testing.T) {
	s, err := schedule.Parse("0 0 * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Location() != time.Local {
		t.Errorf("Location() = %v, want time.Local", s.Location())
	}
}
