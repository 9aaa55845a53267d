package schedule

import (
	"math"
	"math/bits"
	"time"
)

// Fire times are computed on two timelines, both in whole seconds:
//
//   - instants: Unix seconds;
//   - wall times: the local calendar date and clock of the schedule's
//     location, encoded as the Unix seconds of the same date and clock in UTC.
//
// The wall time of an instant i is i+offset, where offset is the UTC offset of
// the zone in effect at i. The location's timeline splits into segments
// between zone transitions; within a segment the offset is constant, so wall
// time and instant advance together. A forward transition skips wall times
// (a gap), a backward one repeats them (an overlap).
//
// Calendar matching (nextWall) works on wall times only and knows nothing of
// zones; wildcard and fixed-time jobs then map wall times to instants
// differently (nextWildcard, nextFixed).

const (
	secondsPerDay = 24 * 60 * 60

	// searchSpan bounds every search: a little over 8 years, the longest
	// interval between two February 29ths (e.g. 2096 to 2104).
	searchSpan = (8*366 + 1) * secondsPerDay

	// maxShift bounds |wall time - instant| with a wide margin: UTC offsets in
	// the tz database, local mean time included, stay within ±16 hours.
	maxShift = 48 * 60 * 60

	// maxSegments bounds the zone segments a single computation walks through.
	maxSegments = 10000

	// noStart and noEnd stand for a zone segment that has no start (it goes
	// back to the beginning of time) or no end (it goes on forever).
	noStart = math.MinInt64
	noEnd   = math.MaxInt64
)

// minUnix and maxUnix bound the instants Next computes from (about 34,800
// years either side of 1970), far inside the range where the arithmetic below
// cannot overflow.
const (
	minUnix = -(1 << 40)
	maxUnix = 1 << 40
)

// zoneAt returns the UTC offset in effect at instant sec in loc, and the
// bounds [start, end) of the segment with that offset, noStart or noEnd when
// unbounded.
func zoneAt(sec int64, loc *time.Location) (offset, start, end int64) {
	t := time.Unix(sec, 0).In(loc)
	_, off := t.Zone()
	s, e := t.ZoneBounds()
	start, end = noStart, noEnd
	if !s.IsZero() {
		start = s.Unix()
	}
	if !e.IsZero() {
		end = e.Unix()
	}
	return int64(off), start, end
}

// nextWildcard returns the first instant after t whose wall time matches:
// wall times in a gap never occur, and those in an overlap occur twice.
func (s *Schedule) nextWildcard(t int64) (int64, bool) {
	limit := t + searchSpan
	var memo wallMemo
	i := t + 1
	for range maxSegments {
		off, _, end := zoneAt(i, s.loc)
		w, ok := s.nextWallMemo(i+off, limit, &memo)
		if !ok {
			return 0, false
		}
		if end == noEnd || w-off < end {
			return w - off, true
		}
		// w is past the end of this segment: look again from the next one,
		// whose wall times may start before or after w.
		i = end
	}
	return 0, false
}

// nextFixed returns the next fire time after t of a fixed-time job. Such a job
// fires, for each matching wall time w, at reach(w): the first instant whose
// wall time is w or later. Hence a wall time in an overlap fires at its first
// occurrence, and one in a gap at the instant of the jump.
//
// The fire times after t are reach(w) for the matching w above the highest
// wall time already reached at or before t. That is the wall time of t,
// unless t is in the second pass of an overlap, where it is the last wall time
// before the jump back.
func (s *Schedule) nextFixed(t int64) (int64, bool) {
	off, start, _ := zoneAt(t, s.loc)
	high := t + off
	// A segment that ended more than maxShift before t reached wall times
	// below t's: only recent ones matter.
	for n := 0; n < maxSegments && start != noStart && start > t-maxShift; n++ {
		prevOff, prevStart, _ := zoneAt(start-1, s.loc)
		high = max(high, start-1+prevOff)
		start = prevStart
	}
	w, ok := s.nextWall(high+1, t+searchSpan)
	if !ok {
		return 0, false
	}
	return s.reach(w)
}

// reach returns the first instant whose wall time is w or later: the instant
// of w itself (its first occurrence if w is repeated), or, if w is skipped,
// the instant of the jump over it.
func (s *Schedule) reach(w int64) (int64, bool) {
	// Every instant up to w-maxShift has a wall time below w.
	i := w - maxShift
	for range maxSegments {
		off, _, end := zoneAt(i, s.loc)
		if i+off >= w {
			// i starts a segment (the first i cannot get here) and the
			// earlier segments all stayed below w: the jump skipped w.
			return i, true
		}
		if end == noEnd || w < end+off {
			return w - off, true
		}
		i = end
	}
	return 0, false
}

// wallMemo remembers the last nextWall search: a search from a wall time
// between its start and its result has the same result.
type wallMemo struct {
	valid       bool
	ok          bool
	from, found int64
	limit       int64
}

func (s *Schedule) nextWallMemo(from, limit int64, m *wallMemo) (int64, bool) {
	if m.valid && m.limit == limit && from >= m.from && (!m.ok || from <= m.found) {
		return m.found, m.ok
	}
	found, ok := s.nextWall(from, limit)
	*m = wallMemo{valid: true, ok: ok, from: from, found: found, limit: limit}
	return found, ok
}

// nextWall returns the first wall time at or after from that matches the
// calendar fields, or false if there is none up to limit.
func (s *Schedule) nextWall(from, limit int64) (int64, bool) {
	days := floorDiv(from, secondsPerDay)
	sod := int(from - days*secondsPerDay)
	y, mo, d := civilFromDays(days)
	h, mi, sec := sod/3600, sod/60%60, sod%60

	for {
		if s.month&(1<<mo) == 0 {
			next := nextBit(uint64(s.month), mo+1)
			if next < 0 {
				y++
				next = nextBit(uint64(s.month), 1)
			}
			mo, d, h, mi, sec = next, 1, 0, 0, 0
			if daysFromCivil(y, mo, d)*secondsPerDay > limit {
				return 0, false
			}
		}
		dim := daysIn(y, mo)
		if s.ext.last || s.ext.weekday {
			// L and W name one day of the month, or none.
			if t := s.domTarget(y, mo, dim); t < d {
				d = dim + 1
			} else if t != d {
				d, h, mi, sec = t, 0, 0, 0
			}
		} else if s.dowStar {
			// Days are given by the day-of-month field alone.
			if next := nextBit(uint64(s.dom), d); next < 0 || next > dim {
				d = dim + 1
			} else if next != d {
				d, h, mi, sec = next, 0, 0, 0
			}
		}
		if d > dim {
			mo, d, h, mi, sec = mo+1, 1, 0, 0, 0
			if mo > 12 {
				y, mo = y+1, 1
			}
			if daysFromCivil(y, mo, d)*secondsPerDay > limit {
				return 0, false
			}
			continue
		}
		if !s.dayMatches(y, mo, d) {
			d, h, mi, sec = d+1, 0, 0, 0
			continue
		}
		next := nextBit(uint64(s.hour), h)
		if next < 0 {
			d, h, mi, sec = d+1, 0, 0, 0
			continue
		}
		if next != h {
			h, mi, sec = next, 0, 0
		}
		if next = nextBit(s.minute, mi); next < 0 {
			h, mi, sec = h+1, 0, 0
			continue
		}
		if next != mi {
			mi, sec = next, 0
		}
		if next = nextBit(s.second, sec); next < 0 {
			mi, sec = mi+1, 0
			continue
		}
		w := daysFromCivil(y, mo, d)*secondsPerDay + int64(h*3600+mi*60+next)
		if w > limit {
			return 0, false
		}
		return w, true
	}
}

// dayMatches applies cron's day rule: if either day field is "*", the day
// must match both fields (the starred one matches every day), else either.
// With a day form of Cronos (L, W, #), the day must match both, as in Cronos.
func (s *Schedule) dayMatches(y int64, mo, d int) bool {
	wd := weekday(daysFromCivil(y, mo, d))
	dowMatch := s.dow&(1<<wd) != 0
	if s.ext != (dayExt{}) {
		dim := daysIn(y, mo)
		switch {
		case s.ext.nth != 0 && (d-1)/7+1 != int(s.ext.nth):
			return false
		case s.ext.lastWeek && d+7 <= dim:
			return false
		case s.ext.last || s.ext.weekday:
			return dowMatch && d == s.domTarget(y, mo, dim)
		}
		return dowMatch && s.dom&(1<<d) != 0
	}
	domMatch := s.dom&(1<<d) != 0
	if s.domStar || s.dowStar {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// domTarget returns the day of month that L, L-n, nW, LW or L-nW name in a
// month of dim days, or 0 when there is none (L-30 in February, 31W in
// April).
func (s *Schedule) domTarget(y int64, mo, dim int) int {
	t := int(s.ext.day)
	if s.ext.last {
		t = dim - t
	}
	if t < 1 || t > dim {
		return 0
	}
	if s.ext.weekday {
		t = nearestWeekday(y, mo, t, dim)
	}
	return t
}

// nearestWeekday returns the weekday (Monday to Friday) nearest to day d of
// a month of dim days, without leaving the month: a Saturday moves to the
// Friday before, or to the Monday after when it is the 1st; a Sunday to the
// Monday after, or to the Friday before when it is the last day.
func nearestWeekday(y int64, mo, d, dim int) int {
	switch weekday(daysFromCivil(y, mo, d)) {
	case 6: // Saturday
		if d == 1 {
			return 3
		}
		return d - 1
	case 0: // Sunday
		if d == dim {
			return d - 2
		}
		return d + 1
	}
	return d
}

// nextBit returns the lowest set bit of set at position from or above, or -1.
func nextBit(set uint64, from int) int {
	if from > 63 {
		return -1
	}
	set = set >> from << from
	if set == 0 {
		return -1
	}
	return bits.TrailingZeros64(set)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// daysFromCivil returns the day number (days since 1970-01-01) of a date in
// the proleptic Gregorian calendar.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400                     // [0, 399]
	mp := int64((m + 9) % 12)              // March is 0
	doy := (153*mp+2)/5 + int64(d) - 1     // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // [0, 11]
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

// weekday returns the day of the week of a day number, 0 for Sunday.
func weekday(days int64) int {
	return int(days + 4 - floorDiv(days+4, 7)*7) // 1970-01-01 was a Thursday
}

func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
