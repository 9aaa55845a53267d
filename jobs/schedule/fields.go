package schedule

import (
	"fmt"
	"strconv"
	"strings"
)

// Field syntax is checked here, strictly, before robfig/cron sees a spec:
// robfig forgives typos ("1,,5" reads as "1,5", "+1" as "1", "*-5" as "*")
// and knows neither crontab(5)'s Sunday written 7, nor wrap-around ranges,
// nor the day forms of Cronos and Quartz (L, W, #). What robfig can express
// is handed to it unchanged; a wrap-around range or a day of week 7 is handed
// to it as the list of values it stands for; the day forms are kept in a
// dayExt and the field becomes "*" (day of month) or the day (day of week).

// field is one calendar field of a spec.
type field struct {
	name     string // as error messages say it
	min, max int
	names    map[string]int // lowercase month or weekday names; nil in other fields
}

var (
	secondField = field{"second", 0, 59, nil}
	minuteField = field{"minute", 0, 59, nil}
	hourField   = field{"hour", 0, 23, nil}
	domField    = field{"day of month", 1, 31, nil}
	monthField  = field{"month", 1, 12, map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	// dowField allows 7 for Sunday, as crontab(5) does; robfig stops at 6.
	dowField = field{"day of week", 0, 7, map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

// dayExt holds the day forms of Cronos and Quartz; it is zero when a spec
// has none. When it is not zero, a day must match both day fields.
type dayExt struct {
	// last: day of month "L" or "L-n", the month's last day minus day.
	last bool
	// weekday: day of month "nW", "LW" or "L-nW": the weekday (Monday to
	// Friday) nearest to day n (or to the last day minus n), in the same
	// month.
	weekday bool
	// day is n of "nW" and of "L-n".
	day uint8
	// nth is n of day of week "d#n" (1 to 5): the month's nth such weekday.
	nth uint8
	// lastWeek: day of week "dL", the month's last such weekday.
	lastWeek bool
}

// rewriteFields checks the 5 or 6 fields of a spec and returns them as
// robfig reads them, with the day forms robfig does not know.
func rewriteFields(fields []string) ([]string, dayExt, error) {
	kinds := []field{minuteField, hourField, domField, monthField, dowField}
	if len(fields) == 6 {
		kinds = append([]field{secondField}, kinds...)
	} else if len(fields) != 5 {
		return nil, dayExt{}, fmt.Errorf("expected 5 to 6 fields, found %d: %s", len(fields), strings.Join(fields, " "))
	}
	var ext dayExt
	out := make([]string, len(fields))
	for i, text := range fields {
		var err error
		switch f := kinds[i]; {
		case f.name == domField.name && strings.ContainsAny(text, "LlWw"):
			out[i] = "*"
			err = domForm(text, &ext)
		case f.name == dowField.name && strings.ContainsAny(text, "Ll#"):
			out[i], err = dowForm(text, &ext)
		default:
			out[i], err = f.list(text)
		}
		if err != nil {
			return nil, dayExt{}, err
		}
	}
	return out, ext, nil
}

// errorf returns an error about the field's text.
func (f field) errorf(text, format string, args ...any) error {
	return fmt.Errorf("%s field %q: %s", f.name, text, fmt.Sprintf(format, args...))
}

// list checks a list of items and returns it as robfig reads it.
func (f field) list(text string) (string, error) {
	items := strings.Split(text, ",")
	changed := false
	for i, it := range items {
		if it == "" {
			switch {
			case len(items) == 1:
				return "", f.errorf(text, "empty")
			case i == 0:
				return "", f.errorf(text, "a comma starts the list")
			case i == len(items)-1:
				return "", f.errorf(text, "a comma ends the list")
			default:
				return "", f.errorf(text, "empty list item between two commas")
			}
		}
		r, err := f.item(text, it)
		if err != nil {
			return "", err
		}
		if r != it {
			items[i], changed = r, true
		}
	}
	if !changed {
		return text, nil
	}
	return strings.Join(items, ","), nil
}

// item checks one list item: "*" or "?", a value, or a range "a-b", each
// with an optional step "/n". It returns the item unchanged when robfig
// reads it so, else the list of the values it stands for: a wrap-around
// range, or a day of week 7.
func (f field) item(text, it string) (string, error) {
	base, stepText, hasStep := strings.Cut(it, "/")
	step := 1
	if hasStep {
		n, err := f.number(text, stepText, "step")
		if err != nil {
			return "", err
		}
		if n < 1 {
			return "", f.errorf(text, "step %s must be at least 1", stepText)
		}
		step = n
	}
	if base == "*" || base == "?" {
		return it, nil
	}
	if c := base[:min(1, len(base))]; c == "*" || c == "?" {
		return "", f.errorf(text, "%q may only be followed by a step", c)
	}
	loText, hiText, isRange := strings.Cut(base, "-")
	lo, err := f.value(text, loText)
	if err != nil {
		return "", err
	}
	hi := f.max // "a/n" is "a-max/n"
	if f.name == dowField.name {
		hi = 6 // as robfig reads it: 7 is written as a range end only
	}
	switch {
	case isRange:
		if hi, err = f.value(text, hiText); err != nil {
			return "", err
		}
	case !hasStep:
		hi = lo
	}
	if f.name == dowField.name {
		return dowValues(it, lo, hi, step), nil
	}
	if lo <= hi {
		return it, nil
	}
	return joinValues(wrapValues(lo, hi, step, f.min, f.max)), nil
}

// wrapValues returns the values of a wrap-around range lo-hi/step (lo > hi)
// over the cycle min..max: from lo up to max, then on from min up to hi, the
// step counted across the wrap as Cronos does ("45-15/2" in minutes is 45,
// 47, ... 59, 1, 3, ... 15).
func wrapValues(lo, hi, step, min, max int) []int {
	n := max - min + 1
	span := (hi - lo + n) % n
	var vs []int
	for k := 0; k*step <= span; k++ {
		vs = append(vs, min+(lo-min+k*step)%n)
	}
	return vs
}

// dowValues returns a day-of-week item as robfig reads it. 7 is Sunday: a
// range may end at 7 ("5-7" is Friday to Sunday) or start there ("7-2" is
// Sunday to Tuesday); a range whose start is after its end wraps around the
// week ("FRI-MON").
func dowValues(it string, lo, hi, step int) string {
	switch {
	case lo < 7 && lo <= hi && hi < 7:
		return it
	case lo == 7 && hi == 7:
		return "0"
	case lo == 7:
		lo = 0
	}
	var vs []int
	if lo <= hi {
		for v := lo; v <= hi; v += step {
			vs = append(vs, v%7)
		}
	} else {
		vs = wrapValues(lo, hi, step, 0, 6)
	}
	return joinValues(vs)
}

func joinValues(vs []int) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

// value reads a number or, in the month and day-of-week fields, a
// three-letter name in any case, and checks its bounds.
func (f field) value(text, s string) (int, error) {
	if n, ok := f.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, err := f.number(text, s, "value")
	if err != nil {
		return 0, err
	}
	switch {
	case n < f.min:
		return 0, f.errorf(text, "%d is below minimum %d", n, f.min)
	case n > f.max:
		return 0, f.errorf(text, "%d is above maximum %d", n, f.max)
	}
	return n, nil
}

// number reads a decimal number: digits only, no sign.
func (f field) number(text, s, what string) (int, error) {
	if s == "" {
		return 0, f.errorf(text, "missing %s", what)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			if what == "value" && f.names != nil {
				return 0, f.errorf(text, "%q is neither a number nor a name such as %s", s, exampleName(f))
			}
			return 0, f.errorf(text, "%s %q is not a number", what, s)
		}
	}
	if len(s) > 4 {
		return 10000, nil // above every bound, without overflow
	}
	n, _ := strconv.Atoi(s)
	return n, nil
}

func exampleName(f field) string {
	if f.name == monthField.name {
		return "jan"
	}
	return "mon"
}

// domForm reads the day-of-month forms of Cronos and Quartz into ext: "L",
// "L-n" (n from 0 to 30), "LW", "L-nW" and "nW" (n from 1 to 31), in any
// case, alone in the field.
func domForm(text string, ext *dayExt) error {
	bad := func() error {
		return domField.errorf(text, "L and W are written L, L-n, LW, L-nW or nW (n a number), alone in the field")
	}
	u := strings.ToUpper(text)
	if w, ok := strings.CutSuffix(u, "W"); ok {
		ext.weekday, u = true, w
	}
	if rest, ok := strings.CutPrefix(u, "L"); ok {
		ext.last = true
		if rest == "" {
			return nil
		}
		offset, ok := strings.CutPrefix(rest, "-")
		if !ok || !isDigits(offset) {
			return bad()
		}
		n, _ := domField.number(text, offset, "offset")
		if n > 30 {
			return domField.errorf(text, "offset %d is above maximum 30", n)
		}
		ext.day = uint8(n)
		return nil
	}
	if !ext.weekday || !isDigits(u) {
		return bad()
	}
	n, err := domField.value(text, u)
	if err != nil {
		return err
	}
	ext.day = uint8(n)
	return nil
}

// dowForm reads the day-of-week forms of Cronos and Quartz into ext: "dL"
// (the month's last such day) and "d#n" (its nth, n from 1 to 5), with d a
// number from 0 to 7 or a name, in any case, alone in the field. It returns
// the field as robfig reads it: the day.
func dowForm(text string, ext *dayExt) (string, error) {
	u := strings.ToUpper(text)
	day, nth, isNth := strings.Cut(u, "#")
	if isNth {
		if !isDigits(nth) {
			return "", dowField.errorf(text, "# is written d#n, n a number from 1 to 5 (5#3: the third Friday), alone in the field")
		}
		n, _ := dowField.number(text, nth, "n")
		if n < 1 || n > 5 {
			return "", dowField.errorf(text, "#%d: a month has a first to a fifth such day, #1 to #5", n)
		}
		ext.nth = uint8(n)
	} else {
		d, ok := strings.CutSuffix(u, "L")
		if !ok || d == "" {
			if u == "L" {
				return "", dowField.errorf(text, "L needs a day before it (5L: the last Friday); Quartz's L alone, Saturday, is 6 or sat")
			}
			return "", dowField.errorf(text, "L is written dL (5L: the last Friday), alone in the field")
		}
		day, ext.lastWeek = d, true
	}
	if strings.ContainsAny(day, ",-/*?") {
		return "", dowField.errorf(text, "L and # follow a single day, alone in the field")
	}
	d, err := dowField.value(text, day)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(d % 7), nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
