package schedule

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestWildcardClassification(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		wildcard bool
	}{
		{"30 2 * * *", false},
		{"0 0 * * *", false},
		{"0 0-23 * * *", false},
		{"0-59 0-23 * * *", false},
		{"0,30 1,2 * * *", false},
		{"* 30 2 * * *", false}, // the seconds field does not count
		{"*/10 0 0 * * *", false},
		{"@yearly", false},
		{"@annually", false},
		{"@monthly", false},
		{"@weekly", false},
		{"@daily", false},
		{"@midnight", false},
		{"TZ=UTC @daily", false},
		{"* * * * *", true},
		{"30 * * * *", true},
		{"* 2 * * *", true},
		{"*/15 * * * *", true},
		{"0 */2 * * *", true},
		{"*/5 1 * * *", true},
		{"? 1 * * *", true},
		{"0 ? * * *", true},
		{"0 */5 2 * * *", true},
		{"0 0 * * * *", true},
		{"@hourly", true},
		{"CRON_TZ=Europe/Berlin @hourly", true},
	} {
		s, err := Parse(tc.spec, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if s.wildcard != tc.wildcard {
			t.Errorf("%q: wildcard = %v, want %v", tc.spec, s.wildcard, tc.wildcard)
		}
	}
}

// TestCivil checks the calendar arithmetic against the time package.
func TestCivil(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(days int64) {
		t.Helper()
		want := time.Unix(days*secondsPerDay, 0).UTC()
		y, m, d := civilFromDays(days)
		if y != int64(want.Year()) || m != int(want.Month()) || d != want.Day() {
			t.Fatalf("civilFromDays(%d) = %d-%d-%d, want %s", days, y, m, d, want)
		}
		if got := daysFromCivil(y, m, d); got != days {
			t.Fatalf("daysFromCivil(%d, %d, %d) = %d, want %d", y, m, d, got, days)
		}
		if got := weekday(days); got != int(want.Weekday()) {
			t.Fatalf("weekday(%d) = %d, want %d", days, got, want.Weekday())
		}
		if got, wantDays := daysIn(y, m), time.Date(int(y), time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day(); got != wantDays {
			t.Fatalf("daysIn(%d, %d) = %d, want %d", y, m, got, wantDays)
		}
	}
	for days := int64(-800000); days <= 800000; days += 37 {
		check(days)
	}
	for range 100000 {
		check(rng.Int64N(2*maxUnix/secondsPerDay) - maxUnix/secondsPerDay)
	}
}

func TestFloorDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 86400, -1}, {86399, 86400, 0},
	} {
		if got := floorDiv(tc.a, tc.b); got != tc.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNextBit(t *testing.T) {
	set := uint64(1<<3 | 1<<10 | 1<<59)
	for _, tc := range []struct{ from, want int }{
		{0, 3}, {3, 3}, {4, 10}, {11, 59}, {59, 59}, {60, -1}, {63, -1}, {64, -1}, {100, -1},
	} {
		if got := nextBit(set, tc.from); got != tc.want {
			t.Errorf("nextBit(from %d) = %d, want %d", tc.from, got, tc.want)
		}
	}
}

// TestPack: packed schedules behave as the originals; equal ones (same spec,
// same location) share one copy; nil stays nil.
func TestPack(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	must := func(spec string, loc *time.Location) *Schedule {
		s, err := Parse(spec, loc)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in := []*Schedule{
		must("0 * * * *", time.UTC), nil, must("0 * * * *", time.UTC),
		must("0 * * * *", paris), must("@every 90s", time.UTC), must("TZ=Asia/Tokyo 30 2 * * 1-5", time.UTC),
	}
	out := Pack(in)
	if len(out) != len(in) {
		t.Fatalf("Pack returned %d schedules for %d", len(out), len(in))
	}
	if out[1] != nil {
		t.Errorf("nil packed into %v", out[1])
	}
	if out[0] != out[2] {
		t.Errorf("equal schedules not shared")
	}
	if out[0] == out[3] {
		t.Errorf("schedules of different locations shared")
	}
	from := time.Date(2026, 3, 28, 23, 59, 0, 0, time.UTC)
	for i, s := range in {
		if s == nil {
			continue
		}
		p := out[i]
		if p == s || p.String() != s.String() || p.Location() != s.Location() || p.Every() != s.Every() {
			t.Errorf("%d: packed %q %v %v, original %q %v %v", i, p, p.Location(), p.Every(), s, s.Location(), s.Every())
		}
		a, b := from, from
		for range 50 {
			a, b = s.Next(a), p.Next(b)
			if !a.Equal(b) {
				t.Fatalf("%d %q: packed next %s, original %s", i, s, b, a)
			}
		}
	}
}
