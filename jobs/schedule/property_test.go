package schedule_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// propertyZones are the zones of the randomized tests: 60- and 30-minute
// shifts, skipped midnights, odd offsets, no DST.
var propertyZones = []string{
	"Europe/Berlin", "America/New_York", "America/Santiago", "America/Havana",
	"Australia/Lord_Howe", "Pacific/Chatham", "Asia/Beirut", "Asia/Kolkata",
	"Asia/Kathmandu", "UTC",
}

// randomField returns a random cron field over [lo, hi]. hot values, if
// any, are picked more often (the hours around DST transitions).
func randomField(rng *rand.Rand, lo, hi int, hot []int) string {
	val := func() int {
		if len(hot) > 0 && rng.IntN(2) == 0 {
			return hot[rng.IntN(len(hot))]
		}
		return lo + rng.IntN(hi-lo+1)
	}
	switch rng.IntN(8) {
	case 0, 1:
		return "*"
	case 2:
		return fmt.Sprintf("*/%d", 2+rng.IntN(hi-lo))
	case 3:
		a, b := val(), val()
		return fmt.Sprintf("%d-%d", min(a, b), max(a, b))
	case 4:
		a, b := val(), val()
		return fmt.Sprintf("%d-%d/%d", min(a, b), max(a, b), 1+rng.IntN(4))
	case 5:
		return fmt.Sprintf("%d,%d,%d", val(), val(), val())
	case 6:
		return fmt.Sprintf("%d/%d", val(), 1+rng.IntN(hi-lo+1))
	default:
		return fmt.Sprint(val())
	}
}

// randomSpec returns a random 5- or 6-field spec, mostly firing often enough
// for the reference scan, and whether it is a wildcard job.
func randomSpec(rng *rand.Rand) (string, bool) {
	minute := randomField(rng, 0, 59, []int{0, 15, 30, 45, 59})
	hour := randomField(rng, 0, 23, []int{0, 1, 2, 3, 22, 23})
	dom, month, dow := "*", "*", "*"
	if rng.IntN(5) == 0 {
		dom = randomField(rng, 1, 31, nil)
	}
	if rng.IntN(8) == 0 {
		month = randomField(rng, 1, 12, nil)
	}
	if rng.IntN(5) == 0 {
		dow = randomField(rng, 0, 6, nil)
	}
	fields := []string{minute, hour, dom, month, dow}
	if rng.IntN(3) == 0 {
		sec := "0"
		if rng.IntN(2) == 0 {
			sec = randomField(rng, 0, 59, []int{0, 30, 59})
		}
		fields = append([]string{sec}, fields...)
	}
	return strings.Join(fields, " "), strings.HasPrefix(minute, "*") || strings.HasPrefix(hour, "*")
}

// randomStart returns a random instant, usually within a few hours of one of
// loc's zone transitions between 2000 and 2040.
func randomStart(rng *rand.Rand, loc *time.Location) time.Time {
	lo := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	t := time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9)).In(loc)
	if rng.IntN(5) == 0 {
		return t
	}
	_, end := t.ZoneBounds()
	if end.IsZero() {
		return t
	}
	return end.Add(time.Duration(rng.Int64N(int64(6*time.Hour))) - 4*time.Hour)
}

// reference computes fire times by brute force, scanning one second at a
// time: the specification Next must agree with.
type reference struct {
	spec     *cron.SpecSchedule
	wildcard bool
	loc      *time.Location
	// domStar and dowStar: the day field is written starting with "*" or
	// "?", as ISC cron reads it (robfig's star bit misses "*/2").
	domStar, dowStar bool
	// days, when set, decides the days instead of the spec's day fields.
	days func(date time.Time) bool
}

var referenceParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func newReference(t testing.TB, spec string, wildcard bool, loc *time.Location) reference {
	t.Helper()
	r, err := parseReference(spec, loc)
	if err != nil {
		t.Fatal(err)
	}
	r.wildcard = wildcard
	return r
}

// parseReference parses spec (without a zone prefix) with robfig.
func parseReference(spec string, loc *time.Location) (reference, error) {
	parsed, err := referenceParser.Parse(spec)
	if err != nil {
		return reference{}, err
	}
	r := reference{spec: parsed.(*cron.SpecSchedule), loc: loc}
	const star = 1 << 63
	r.domStar, r.dowStar = r.spec.Dom&star != 0, r.spec.Dow&star != 0
	if f := strings.Fields(spec); len(f) >= 5 {
		isStar := func(s string) bool { return strings.HasPrefix(s, "*") || strings.HasPrefix(s, "?") }
		r.domStar, r.dowStar = isStar(f[len(f)-3]), isStar(f[len(f)-1])
	}
	return r, nil
}

// wall returns the wall time of instant sec, as Unix seconds of the same
// clock reading in UTC.
func (r reference) wall(sec int64) int64 {
	_, off := time.Unix(sec, 0).In(r.loc).Zone()
	return sec + int64(off)
}

// matches reports whether wall time w matches the spec: robfig's fields,
// with ISC cron's day rule, or r.days.
func (r reference) matches(w int64) bool {
	u := time.Unix(w, 0).UTC()
	s := r.spec
	if 1<<uint(u.Second())&s.Second == 0 || 1<<uint(u.Minute())&s.Minute == 0 ||
		1<<uint(u.Hour())&s.Hour == 0 || 1<<uint(u.Month())&s.Month == 0 {
		return false
	}
	if r.days != nil {
		return r.days(u)
	}
	domMatch := 1<<uint(u.Day())&s.Dom != 0
	dowMatch := 1<<uint(u.Weekday())&s.Dow != 0
	if r.domStar || r.dowStar {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// next returns the first fire time after t within window seconds, or false.
// A wildcard job fires at each instant whose wall time matches. A fixed-time
// job fires at an instant when the wall clock newly reaches or passes a
// matching wall time, higher than any reached before.
func (r reference) next(t time.Time, window int64) (int64, bool) {
	start := t.Unix()
	if r.wildcard {
		for i := start + 1; i <= start+window; i++ {
			if r.matches(r.wall(i)) {
				return i, true
			}
		}
		return 0, false
	}
	// The highest wall time reached so far: zone transitions are at whole
	// minutes in these zones and years, so the last second of each minute
	// of the past two days, and t itself, are the candidates.
	high := r.wall(start)
	for i := (start-2*86400)/60*60 - 1; i < start; i += 60 {
		high = max(high, r.wall(i))
	}
	for i := start + 1; i <= start+window; i++ {
		w := r.wall(i)
		for ; high < w; high++ {
			if r.matches(high + 1) {
				return i, true
			}
		}
	}
	return 0, false
}

// TestNextMatchesReference compares Next with the brute-force reference, for
// random specs from random instants near DST transitions.
func TestNextMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260329, 20261025))
	cases := 1200
	if testing.Short() {
		cases = 200
	}
	const window = 6 * 3600
	var stats struct{ skipped, found, none, acrossTransition int }
	defer func() { t.Logf("reference comparisons: %+v", stats) }()
	for range cases {
		spec, wildcard := randomSpec(rng)
		loc := mustLoad(t, propertyZones[rng.IntN(len(propertyZones))])
		s, err := schedule.Parse(spec, loc)
		if err != nil {
			if strings.Contains(err.Error(), "never fires") {
				stats.skipped++
				continue
			}
			t.Fatal(err)
		}
		ref := newReference(t, spec, wildcard, loc)
		from := randomStart(rng, loc)
		for range 3 {
			got := s.Next(from)
			want, ok := ref.next(from, window)
			switch {
			case ok && got.Unix() != want:
				t.Fatalf("%q in %s: Next(%s) = %s, reference %s", spec, loc, from.Format(time.RFC3339),
					got.Format(time.RFC3339), time.Unix(want, 0).In(loc).Format(time.RFC3339))
			case !ok && !got.IsZero() && got.Unix() <= from.Unix()+window:
				t.Fatalf("%q in %s: Next(%s) = %s, reference finds none within %ds", spec, loc,
					from.Format(time.RFC3339), got.Format(time.RFC3339), window)
			}
			if !ok {
				stats.none++
				break
			}
			stats.found++
			if start, _ := got.ZoneBounds(); !start.Before(from) {
				stats.acrossTransition++
			}
			from = got
		}
	}
}

// TestNextMatchesReferenceDayForms is TestNextMatchesReference for the day
// forms L-n, nW, d#n and dL: each random spec names, with them, the local
// date of a zone transition near its start, and the reference decides days
// with the time package.
func TestNextMatchesReferenceDayForms(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 2026))
	cases := 600
	if testing.Short() {
		cases = 100
	}
	const window = 6 * 3600
	var stats struct{ found, none, acrossTransition int }
	defer func() { t.Logf("reference comparisons: %+v", stats) }()
	dayNames := []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	for range cases {
		loc := mustLoad(t, propertyZones[rng.IntN(len(propertyZones))])
		from := randomStart(rng, loc)
		target := from.Add(time.Duration(rng.IntN(4)) * time.Hour).In(loc)
		_, _, d := target.Date()
		last := lastOfMonth(target)
		wd := int(target.Weekday())
		type form struct {
			text string
			days func(u time.Time) bool
		}
		doms := []form{
			{"*", func(time.Time) bool { return true }},
			{fmt.Sprintf("L-%d", last-d), func(u time.Time) bool { return u.Day() == lastOfMonth(u)-(last-d) }},
		}
		if d == last {
			doms = append(doms, form{"L", func(u time.Time) bool { return u.AddDate(0, 0, 1).Day() == 1 }})
		}
		if isWeekday(target) {
			doms = append(doms, form{fmt.Sprintf("%dW", d), func(u time.Time) bool { return u.Day() == nearestWeekdayOracle(u, d) }})
		}
		day := strconv.Itoa(wd)
		if rng.IntN(2) == 0 {
			day = dayNames[wd]
		}
		nth := (d-1)/7 + 1
		dows := []form{
			{"*", func(time.Time) bool { return true }},
			{fmt.Sprintf("%s#%d", day, nth), func(u time.Time) bool {
				return int(u.Weekday()) == wd && u.AddDate(0, 0, -7*(nth-1)).Month() == u.Month() && u.AddDate(0, 0, -7*nth).Month() != u.Month()
			}},
		}
		if d+7 > last {
			dows = append(dows, form{day + "L", func(u time.Time) bool { return int(u.Weekday()) == wd && u.AddDate(0, 0, 7).Month() != u.Month() }})
		}
		dom, dow := doms[rng.IntN(len(doms))], dows[rng.IntN(len(dows))]
		if dom.text == "*" && dow.text == "*" {
			dom = doms[1]
		}
		minute := randomField(rng, 0, 59, []int{0, 15, 30, 45, 59})
		hour := randomField(rng, 0, 23, []int{0, 1, 2, 3, 22, 23})
		spec := strings.Join([]string{minute, hour, dom.text, "*", dow.text}, " ")
		wildcard := strings.HasPrefix(minute, "*") || strings.HasPrefix(hour, "*")
		s, err := schedule.Parse(spec, loc)
		if err != nil {
			t.Fatal(err)
		}
		ref := newReference(t, strings.Join([]string{minute, hour, "*", "*", "*"}, " "), wildcard, loc)
		ref.days = func(u time.Time) bool { return dom.days(u) && dow.days(u) }
		for range 3 {
			got := s.Next(from)
			want, ok := ref.next(from, window)
			switch {
			case ok && got.Unix() != want:
				t.Fatalf("%q in %s: Next(%s) = %s, reference %s", spec, loc, from.Format(time.RFC3339),
					got.Format(time.RFC3339), time.Unix(want, 0).In(loc).Format(time.RFC3339))
			case !ok && !got.IsZero() && got.Unix() <= from.Unix()+window:
				t.Fatalf("%q in %s: Next(%s) = %s, reference finds none within %ds", spec, loc,
					from.Format(time.RFC3339), got.Format(time.RFC3339), window)
			}
			if !ok {
				stats.none++
				break
			}
			stats.found++
			if start, _ := got.ZoneBounds(); !start.Before(from) {
				stats.acrossTransition++
			}
			from = got
		}
	}
}

// TestNextMonotonic checks, for random specs, zones and instants, that Next
// is strictly after its argument, that chained calls strictly increase, and
// that Next(f - 1s) is f for each fire time f.
func TestNextMonotonic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	lo := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	cases := 500
	if testing.Short() {
		cases = 100
	}
	for range cases {
		spec, _ := randomSpec(rng)
		if rng.IntN(10) == 0 {
			spec = []string{"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@every 1h", "@every 61s", "0 0 29 2 *"}[rng.IntN(8)]
		}
		loc := mustLoad(t, propertyZones[rng.IntN(len(propertyZones))])
		s, err := schedule.Parse(spec, loc)
		if err != nil {
			if strings.Contains(err.Error(), "never fires") {
				continue
			}
			t.Fatal(err)
		}
		var from time.Time
		if rng.IntN(2) == 0 {
			from = time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9))
		} else {
			from = randomStart(rng, loc)
		}
		checkChain(t, s, from, 30)
	}
}

// checkChain calls Next n times from from, checking the invariants.
func checkChain(t testing.TB, s *schedule.Schedule, from time.Time, n int) {
	t.Helper()
	for range n {
		next := s.Next(from)
		if next.IsZero() {
			return
		}
		if !next.After(from) {
			t.Fatalf("%q in %s: Next(%s) = %s, not after", s, s.Location(), from.Format(time.RFC3339Nano), next.Format(time.RFC3339))
		}
		if next.Nanosecond() != 0 {
			t.Fatalf("%q: Next(%s) = %s, not a whole second", s, from, next)
		}
		if next.Location() != s.Location() {
			t.Fatalf("%q: Next(%s) in %v, want %v", s, from, next.Location(), s.Location())
		}
		if s.Every() == 0 {
			if again := s.Next(next.Add(-time.Second)); !again.Equal(next) {
				t.Fatalf("%q in %s: Next(%s) = %s but Next(%s) = %s", s, s.Location(), from.Format(time.RFC3339),
					next.Format(time.RFC3339), next.Add(-time.Second).Format(time.RFC3339), again.Format(time.RFC3339))
			}
		}
		from = next
	}
}
