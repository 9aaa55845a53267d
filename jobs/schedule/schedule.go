package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zone data embedded in the binary

	"github.com/robfig/cron/v3"
)

// parser is robfig's parser, used for syntax only: its Next is not used.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is the bit robfig sets in a field written as "*" or "?".
const starBit = 1 << 63

// referenceInstant is the fixed instant from which Parse checks that a spec
// can fire, besides the current time.
var referenceInstant = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// descriptorWildcard tells, for each descriptor robfig accepts, whether it is
// a wildcard job: @hourly is "0 * * * *", the others have a fixed minute and
// hour.
var descriptorWildcard = map[string]bool{
	"@yearly":   false,
	"@annually": false,
	"@monthly":  false,
	"@weekly":   false,
	"@daily":    false,
	"@midnight": false,
	"@hourly":   true,
}

// Schedule is a parsed, validated schedule. Safe for concurrent use.
// Schedules come from Parse; the zero Schedule never fires.
type Schedule struct {
	spec  string
	loc   *time.Location
	every time.Duration // non-zero for "@every"

	// Calendar fields as bit sets, without robfig's star bit. Bit n stands
	// for value n (months 1-12, weekdays 0-6 with 0 Sunday). Each is as
	// narrow as its values allow: a daemon may hold 100,000 schedules.
	second, minute uint64
	hour, dom      uint32
	month          uint16
	dow            uint8
	// domStar and dowStar record a day-of-month or day-of-week field written
	// starting with "*" or "?": then a day must match both fields, else
	// either.
	domStar, dowStar bool
	// wildcard is ISC cron's wildcard job: the minute or hour field starts
	// with "*" (or "?"). Otherwise the job is fixed-time.
	wildcard bool
	// ext holds the day forms L, W and # (zero without them); dom or dow
	// then holds the rest of its field ("*", or the weekday of "5L").
	ext dayExt
}

// Parse parses spec in the given default location (nil means time.Local).
// Accepts: 5 fields (min hour dom month dow), 6 fields with a leading seconds
// field, descriptors @yearly @annually @monthly @weekly @daily @midnight
// @hourly, "@every <Go duration>", and an optional "TZ=Zone " or
// "CRON_TZ=Zone " prefix that overrides loc. Fields follow crontab(5) and the
// day forms of Cronos (L, W, #): see the package documentation.
//
// It returns an error for an empty spec, an unknown zone, a zone prefix with
// no fields, a field that is not written as the package documentation says
// (an empty list item, a trailing comma, a value out of range), @reboot, an
// @every duration under one second or with a sub-second part, and a spec that
// cannot fire within 8 years of a fixed reference instant or of the current
// time (such as "0 0 30 2 *" or "0 0 L-30 2 *"). It never panics.
func Parse(spec string, loc *time.Location) (s *Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("schedule %q: invalid spec: %v", spec, r)
		}
	}()
	s, err = parse(spec, loc)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", spec, err)
	}
	return s, nil
}

func parse(spec string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.Local
	}
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return nil, errors.New("empty spec")
	}
	if hasZonePrefix(fields[0]) {
		zone := fields[0]
		name := zone[strings.Index(zone, "=")+1:]
		if name == "" {
			return nil, errors.New("empty time zone name")
		}
		l, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("unknown time zone %q", name)
		}
		loc = l
		fields = fields[1:]
		if len(fields) == 0 {
			return nil, fmt.Errorf("no schedule fields after %q", zone)
		}
		if hasZonePrefix(fields[0]) {
			return nil, errors.New("more than one time zone prefix")
		}
	}

	s := &Schedule{spec: spec, loc: loc}
	if fields[0] == "@every" {
		if len(fields) != 2 {
			return nil, errors.New("@every takes exactly one duration")
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil {
			return nil, fmt.Errorf("@every: invalid duration %q", fields[1])
		}
		if d < time.Second {
			return nil, fmt.Errorf("@every: duration %s is less than 1s", d)
		}
		if d%time.Second != 0 {
			return nil, fmt.Errorf("@every: duration %s is not a whole number of seconds", d)
		}
		s.every = d
		return s, nil
	}

	if fields[0] == "@reboot" {
		return nil, errors.New("@reboot is not supported: schedulerd keeps its ticks across restarts, " +
			"so a start of the daemon is no tick; to run a job at boot, run schedulerd trigger JOB from a systemd unit")
	}
	text := strings.Join(fields, " ")
	if !strings.HasPrefix(fields[0], "@") {
		rewritten, ext, err := rewriteFields(fields)
		if err != nil {
			return nil, err
		}
		text, s.ext = strings.Join(rewritten, " "), ext
	}
	parsed, err := parser.Parse(text)
	if err != nil {
		return nil, errors.New(lowerFirst(err.Error()))
	}
	ss, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("unsupported schedule type %T", parsed)
	}
	s.second, s.minute = ss.Second&^starBit, ss.Minute&^starBit
	s.hour, s.dom = uint32(ss.Hour&^starBit), uint32(ss.Dom&^starBit)
	s.month, s.dow = uint16(ss.Month&^starBit), uint8(ss.Dow&^starBit)
	if strings.HasPrefix(fields[0], "@") {
		s.wildcard = descriptorWildcard[fields[0]]
		s.domStar, s.dowStar = ss.Dom&starBit != 0, ss.Dow&starBit != 0
	} else {
		// As ISC cron reads them: a field is "*" for these rules when it is
		// written starting with "*" (or "?"), steps included ("*/2").
		f := fields[len(fields)-5:]
		s.wildcard = isStar(f[0]) || isStar(f[1])
		s.domStar, s.dowStar = isStar(f[2]), isStar(f[4])
	}
	for _, f := range []struct {
		name string
		bits uint64
	}{
		{"second", s.second}, {"minute", s.minute}, {"hour", uint64(s.hour)},
		{"day of month", uint64(s.dom)}, {"month", uint64(s.month)}, {"day of week", uint64(s.dow)},
	} {
		if f.bits == 0 {
			return nil, fmt.Errorf("%s field matches no value", f.name)
		}
	}
	if s.Next(referenceInstant).IsZero() || s.Next(time.Now()).IsZero() {
		return nil, errors.New("never fires: no fire time within 8 years")
	}
	return s, nil
}

// hasZonePrefix reports whether spec starts with "TZ=" or "CRON_TZ=".
func hasZonePrefix(spec string) bool {
	return strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=")
}

// isStar reports whether a field counts as "*" in ISC cron's sense: it is
// written starting with "*" ("?" is robfig's synonym for "*"). A minute or
// hour field so written makes a wildcard job; a day field so written makes a
// day match both day fields.
func isStar(field string) bool {
	return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?")
}

// lowerFirst lowercases the first letter of a robfig error message.
func lowerFirst(msg string) string {
	if msg != "" && msg[0] >= 'A' && msg[0] <= 'Z' {
		return string(msg[0]+'a'-'A') + msg[1:]
	}
	return msg
}

// String returns the original spec, as given to Parse.
func (s *Schedule) String() string { return s.spec }

// Location returns the location whose wall clock the schedule follows: the
// zone of a TZ= or CRON_TZ= prefix, else the location given to Parse.
func (s *Schedule) Location() *time.Location { return s.loc }

// Every returns the duration of an "@every" schedule, and 0 for the others.
func (s *Schedule) Every() time.Duration { return s.every }

// Next returns the first fire time strictly after t, in the schedule's
// location. Callers pass the previous scheduled time: calling Next on its own
// results enumerates every fire time exactly once, across DST transitions.
// For "@every D", Next returns t, truncated to the second, plus D.
// Next returns the zero time if there is no fire time within 8 years of t,
// which cannot happen for a parsed schedule except in the far future or past.
func (s *Schedule) Next(t time.Time) time.Time {
	sec := t.Unix() // floor: fire times are whole seconds
	if s.loc == nil || sec < minUnix || sec > maxUnix {
		return time.Time{}
	}
	if s.every != 0 {
		return time.Unix(sec, 0).Add(s.every).In(s.loc)
	}
	var (
		next int64
		ok   bool
	)
	if s.wildcard {
		next, ok = s.nextWildcard(sec)
	} else {
		next, ok = s.nextFixed(sec)
	}
	if !ok {
		return time.Time{}
	}
	return time.Unix(next, 0).In(s.loc)
}

// Pack copies schedules into one slice and their specs into one string and
// returns the copies in the same order, equal schedules (same spec, same
// location) sharing one copy; nil entries stay nil. Schedules are parsed
// one by one among the garbage of a config file's parsing: a daemon with
// 100,000 jobs kept 100,000 small objects scattered over memory that they
// pinned, and each spec, a substring of the decoded file, kept the whole
// file. Packed, they take two allocations.
func Pack(ss []*Schedule) []*Schedule {
	type key struct {
		spec string
		loc  *time.Location
	}
	first := make(map[key]int, len(ss)) // index in packed
	index := make([]int, len(ss))
	var distinct []*Schedule
	size := 0
	for i, s := range ss {
		if s == nil {
			index[i] = -1
			continue
		}
		k := key{s.spec, s.loc}
		n, ok := first[k]
		if !ok {
			n = len(distinct)
			first[k] = n
			distinct = append(distinct, s)
			size += len(s.spec)
		}
		index[i] = n
	}
	packed := make([]Schedule, len(distinct))
	for i, s := range distinct {
		packed[i] = *s
	}
	var b strings.Builder
	b.Grow(size)
	for _, s := range packed {
		b.WriteString(s.spec)
	}
	specs, off := b.String(), 0
	for i := range packed {
		n := len(packed[i].spec)
		packed[i].spec, off = specs[off:off+n], off+n
	}
	out := make([]*Schedule, len(ss))
	for i, n := range index {
		if n >= 0 {
			out[i] = &packed[n]
		}
	}
	return out
}
