package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// The decoder gives local dates, times and datetimes these zones (named by
// its internal package); the zone of an offset datetime is never named so.
const (
	zoneLocalDatetime = "datetime-local"
	zoneLocalDate     = "date-local"
	zoneLocalTime     = "time-local"
)

// typeName names the TOML type of a decoded value, for messages.
func typeName(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("a string (%s)", clip(strconv.Quote(v)))
	case int64:
		return fmt.Sprintf("an integer (%d)", v)
	case float64:
		return fmt.Sprintf("a float (%s)", strconv.FormatFloat(v, 'g', -1, 64))
	case bool:
		return fmt.Sprintf("a boolean (%t)", v)
	case time.Time:
		switch v.Location().String() {
		case zoneLocalDate:
			return "a date"
		case zoneLocalTime:
			return "a time of day"
		}
		return "a datetime"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

// clip shortens s for a message.
func clip(s string) string { return clipN(s, 60) }

// clipN shortens s to about n bytes, at a rune boundary.
func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// duration is a TOML duration: a Go duration string such as "90s" or "2h".
// A bare number is refused rather than read as nanoseconds.
type duration time.Duration

var _ toml.Unmarshaler = (*duration)(nil)

// UnmarshalTOML decodes a duration from a decoded TOML value.
func (d *duration) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		x, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s is not a duration; use a number with a unit such as \"90s\" or \"2h\"", clip(strconv.Quote(v)))
		}
		*d = duration(x)
		return nil
	case int64:
		return fmt.Errorf("a bare number (%d) is not a duration; use a string such as \"90s\"", v)
	case float64:
		return fmt.Errorf("a bare number (%s) is not a duration; use a string such as \"90s\"", strconv.FormatFloat(v, 'g', -1, 64))
	}
	return fmt.Errorf("must be a duration string such as \"90s\", not %s", typeName(v))
}

// Rules for durations.
type durationRule int

const (
	positive       durationRule = iota // > 0
	nonNegative                        // >= 0
	positiveOrNone                     // > 0, or the string "none" (read by the caller)
)

// duration reads key k of sc as a duration that follows rule.
func (p *parser) duration(sc scope, k string, v any, rule durationRule) (time.Duration, bool) {
	var d duration
	if err := d.UnmarshalTOML(v); err != nil {
		if _, isString := v.(string); isString && rule == positiveOrNone {
			p.errorf(sc, k, "%v, or \"none\"", err)
		} else {
			p.errorf(sc, k, "%v", err)
		}
		return 0, false
	}
	x := time.Duration(d)
	switch {
	case rule == positive && x <= 0:
		p.errorf(sc, k, "must be positive, got %s", x)
		return 0, false
	case rule == positiveOrNone && x <= 0:
		p.errorf(sc, k, "must be positive, or \"none\", got %s", x)
		return 0, false
	case rule == nonNegative && x < 0:
		p.errorf(sc, k, "must not be negative, got %s", x)
		return 0, false
	}
	return x, true
}

// str reads key k of sc as a string. A NUL byte cannot be passed to a
// process and is refused.
func (p *parser) str(sc scope, k string, v any) (string, bool) {
	s, ok := v.(string)
	switch {
	case !ok:
		p.errorf(sc, k, "must be a string, not %s", typeName(v))
		return "", false
	case strings.IndexByte(s, 0) >= 0:
		p.errorf(sc, k, "must not contain a NUL byte")
		return "", false
	}
	return s, true
}

// nonEmpty reads key k of sc as a string that is not empty.
func (p *parser) nonEmpty(sc scope, k string, v any) (string, bool) {
	s, ok := p.str(sc, k, v)
	if ok && s == "" {
		p.errorf(sc, k, "must not be empty")
		return "", false
	}
	return s, ok
}

// oneOf reads key k of sc as one of the strings in values.
func (p *parser) oneOf(sc scope, k string, v any, values ...string) (string, bool) {
	s, ok := p.str(sc, k, v)
	if !ok {
		return "", false
	}
	for _, x := range values {
		if s == x {
			return s, true
		}
	}
	p.errorf(sc, k, "must be one of %s; got %s", strings.Join(values, ", "), clip(strconv.Quote(s)))
	return "", false
}

// integer reads key k of sc as an integer in [lo, hi].
func (p *parser) integer(sc scope, k string, v any, lo, hi int64) (int, bool) {
	n, ok := v.(int64)
	if !ok {
		if _, isString := v.(string); isString {
			p.errorf(sc, k, "must be an integer, written without quotes; got %s", typeName(v))
		} else {
			p.errorf(sc, k, "must be an integer, not %s", typeName(v))
		}
		return 0, false
	}
	if n < lo || n > hi {
		p.errorf(sc, k, "must be between %d and %d, got %d", lo, hi, n)
		return 0, false
	}
	return int(n), true
}

// boolean reads key k of sc as a boolean.
func (p *parser) boolean(sc scope, k string, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		p.errorf(sc, k, "must be true or false, not %s", typeName(v))
	}
	return b, ok
}

// table reads key k of sc as a table; example shows how to write one.
func (p *parser) table(sc scope, k string, v any, example string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		p.errorf(sc, k, "must be a table such as %s, not %s", example, typeName(v))
	}
	return m, ok
}

// datetime reads key k of sc as a TOML datetime. A local datetime keeps the
// decoder's zone; inZone interprets it once the job's zone is known.
func (p *parser) datetime(sc scope, k string, v any) (time.Time, bool) {
	t, ok := v.(time.Time)
	if !ok {
		if _, isString := v.(string); isString {
			p.errorf(sc, k, "must be a TOML datetime written without quotes, such as 2026-12-31T23:00:00Z; got %s", typeName(v))
		} else {
			p.errorf(sc, k, "must be a datetime such as 2026-12-31T23:00:00Z, not %s", typeName(v))
		}
		return time.Time{}, false
	}
	switch t.Location().String() {
	case zoneLocalDate:
		p.errorf(sc, k, "must be a date and a time, such as %sT00:00:00; got only a date", t.Format("2006-01-02"))
		return time.Time{}, false
	case zoneLocalTime:
		p.errorf(sc, k, "must be a date and a time, such as 2026-12-31T%s; got only a time of day", t.Format("15:04:05"))
		return time.Time{}, false
	}
	return t, true
}

// inZone interprets a local datetime (no offset) in loc; a datetime with an
// offset is absolute and only shown in loc. A local time that occurs twice
// (a fall-back hour) is the first occurrence, as for a fixed-time cron job;
// one that falls in a gap (a spring-forward hour) is moved forward by the
// length of the gap: 02:30 on a day that jumps from 02:00 to 03:00 is 03:30.
func inZone(t time.Time, loc *time.Location) time.Time {
	if t.Location().String() != zoneLocalDatetime {
		return t.In(loc)
	}
	// time.Date does not say which instant it picks in those two cases, so
	// try each offset in use around the date: the wall clock read as UTC,
	// minus an offset, is an instant that may show this wall clock in loc.
	wall := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	d := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc)
	var first, last time.Time
	for _, probe := range []time.Time{d.Add(-24 * time.Hour), d, d.Add(24 * time.Hour)} {
		_, offset := probe.Zone()
		c := wall.Add(-time.Duration(offset) * time.Second).In(loc)
		if sameWall(c, wall) && (first.IsZero() || c.Before(first)) {
			first = c
		}
		if last.IsZero() || c.After(last) {
			last = c
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: the instant read with the offset from before the jump.
	return last
}

// sameWall reports whether a and b show the same date and time of day.
func sameWall(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute() &&
		a.Second() == b.Second() && a.Nanosecond() == b.Nanosecond()
}

// unknown reports key k of sc as unknown, suggesting the nearest known key.
func (p *parser) unknown(sc scope, k string, known []string) {
	hint := ""
	if s := nearest(k, known); s != "" {
		hint = fmt.Sprintf("; did you mean %s?", quoteKey(s))
	}
	p.errorf(sc, k, "unknown key%s", hint)
}

// nearest returns the key of known closest to k when it is close enough to
// be a typo, else "".
func nearest(k string, known []string) string {
	best, bestD := "", 3
	if len(k) <= 4 {
		bestD = 2
	}
	for _, s := range known {
		if d := editDistance(strings.ToLower(k), s); d < bestD {
			best, bestD = s, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, for short keys.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
