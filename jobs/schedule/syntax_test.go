package schedule_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// docCase is an example from a source's own documentation: from an instant
// in UTC, the next fire times.
type docCase struct {
	spec string
	doc  string // what the source says it means
	// from is "2006-01-02 15:04[:05]" in UTC. inclusive: a fire time at
	// from itself counts (Cronos's tests are written so).
	from      string
	inclusive bool
	want      []string // "2006-01-02 15:04[:05]" in UTC
}

// crontabExamples are the examples of crontab(5) (cronie's, with the lines
// Debian's page adds).
var crontabExamples = []docCase{
	{"5 0 * * *", "run five minutes after midnight, every day", "2026-01-01 00:00", false,
		[]string{"2026-01-01 00:05", "2026-01-02 00:05"}},
	{"15 14 1 * *", "run at 2:15pm on the first of every month", "2026-01-01 00:00", false,
		[]string{"2026-01-01 14:15", "2026-02-01 14:15", "2026-03-01 14:15"}},
	{"0 22 * * 1-5", "run at 10 pm on weekdays", "2026-01-01 00:00", false,
		[]string{"2026-01-01 22:00", "2026-01-02 22:00", "2026-01-05 22:00"}},
	{"23 0-23/2 * * *", "run 23 minutes after midn, 2am, 4am ..., everyday", "2026-01-01 00:00", false,
		[]string{"2026-01-01 00:23", "2026-01-01 02:23", "2026-01-01 04:23"}},
	{"5 4 * * sun", "run at 5 after 4 every sunday", "2026-01-01 00:00", false,
		[]string{"2026-01-04 04:05", "2026-01-11 04:05"}},
	{"0 */4 1 * mon", "run every 4th hour on the 1st and on every Monday", "2026-01-01 00:00", false,
		[]string{"2026-01-01 04:00", "2026-01-01 08:00", "2026-01-01 12:00", "2026-01-01 16:00", "2026-01-01 20:00", "2026-01-05 00:00"}},
	{"0 0 */2 * sun", "run at midn on every Sunday that's an uneven date", "2026-01-01 00:00", false,
		[]string{"2026-01-11 00:00", "2026-01-25 00:00", "2026-02-01 00:00", "2026-02-15 00:00"}},
	{"0 4 8-14 * *", "every second Saturday of the month (the command tests the weekday)", "2026-01-01 00:00", false,
		[]string{"2026-01-08 04:00", "2026-01-09 04:00"}},
	// Sunday is 0 or 7; names in any case.
	{"47 6 * * 7", "Debian's /etc/crontab: cron.weekly", "2026-01-01 00:00", false,
		[]string{"2026-01-04 06:47", "2026-01-11 06:47"}},
	{"0 12 * * 5-7", "Friday to Sunday", "2026-01-01 00:00", false,
		[]string{"2026-01-02 12:00", "2026-01-03 12:00", "2026-01-04 12:00", "2026-01-09 12:00"}},
	{"0 12 * Jan MON", "names in any case", "2026-01-01 00:00", false,
		[]string{"2026-01-05 12:00", "2026-01-12 12:00"}},
}

// cronosExamples are the examples of the Cronos README and rows of Cronos's
// own tests (CronExpressionFacts, inclusive of from). Cronos reads day of
// month and day of week with AND where cron reads OR: this package reads
// them with AND only when a field uses L, W or #, so no row here has two
// restricted plain day fields.
var cronosExamples = []docCase{
	{"* * * * *", "every minute", "2026-01-01 00:00", false, []string{"2026-01-01 00:01", "2026-01-01 00:02"}},
	{"0 0 1 * *", "at midnight, on day 1 of every month", "2026-01-01 00:00", false, []string{"2026-02-01 00:00", "2026-03-01 00:00"}},
	{"*/5 * * * *", "every 5 minutes", "2026-01-01 00:00", false, []string{"2026-01-01 00:05", "2026-01-01 00:10"}},
	{"30,45-15/2 1 * * *", "every 2 minutes from 1:45 on, wrapping to 1:01 ... 1:15, and at 1:30", "2026-01-01 00:00", false,
		[]string{"2026-01-01 01:01", "2026-01-01 01:03", "2026-01-01 01:05"}},
	{"30,45-15/2 1 * * *", "the same, later in the hour", "2026-01-01 01:14", false,
		[]string{"2026-01-01 01:15", "2026-01-01 01:30", "2026-01-01 01:45", "2026-01-01 01:47"}},
	{"0 0 * * MON-FRI", "at 00:00, Monday through Friday", "2026-01-01 00:00", false,
		[]string{"2026-01-02 00:00", "2026-01-05 00:00"}},
	{"0 23-01 * * *", "reversed range 23-01: 23, 00, 01", "2026-01-01 00:00", false,
		[]string{"2026-01-01 01:00", "2026-01-01 23:00", "2026-01-02 00:00", "2026-01-02 01:00"}},
	{"0 0 1 DEC-FEB *", "reversed range DEC-FEB", "2026-01-15 00:00", false,
		[]string{"2026-02-01 00:00", "2026-12-01 00:00", "2027-01-01 00:00"}},
	{"0 0 L * *", "at 00:00 on the last day of the month", "2026-01-01 00:00", false,
		[]string{"2026-01-31 00:00", "2026-02-28 00:00", "2026-03-31 00:00", "2026-04-30 00:00"}},
	{"0 0 L-1 * *", "at 00:00 the day before the last day of the month", "2026-01-01 00:00", false,
		[]string{"2026-01-30 00:00", "2026-02-27 00:00"}},
	{"0 0 3W * *", "at 00:00 on the weekday nearest the 3rd", "2026-01-01 00:00", false,
		[]string{"2026-01-02 00:00", "2026-02-03 00:00", "2026-03-03 00:00"}},
	{"0 0 LW * *", "at 00:00 on the last weekday of the month", "2026-01-01 00:00", false,
		[]string{"2026-01-30 00:00", "2026-02-27 00:00", "2026-03-31 00:00"}},
	{"0 0 * * 2L", "at 00:00 on the last Tuesday of the month", "2026-01-01 00:00", false,
		[]string{"2026-01-27 00:00", "2026-02-24 00:00", "2026-03-31 00:00"}},
	{"0 0 * * 6#3", "at 00:00 on the third Saturday of the month", "2026-01-01 00:00", false,
		[]string{"2026-01-17 00:00", "2026-02-21 00:00", "2026-03-21 00:00"}},
	{"0 0 ? 1 MON#1", "at 00:00 on the first Monday of January", "2026-01-01 00:00", false,
		[]string{"2026-01-05 00:00", "2027-01-04 00:00"}},

	{"* * * L * *", "", "2016-02-05", true, []string{"2016-02-29"}},
	{"* * * L * *", "", "2017-02-28", true, []string{"2017-02-28"}},
	{"* * * L-1 * *", "", "2016-01-31", true, []string{"2016-02-28"}},
	{"* * * L-2 * *", "", "2016-12-30", true, []string{"2017-01-29"}},
	{"* * * L-28 * *", "", "2017-02-01", true, []string{"2017-03-03"}},
	{"* * * L-29 * *", "", "2016-02-01", true, []string{"2016-03-02"}},
	{"* * * L-30 * *", "", "2016-02-01", true, []string{"2016-03-01"}},
	{"* * * L-30 * *", "", "2016-04-01", true, []string{"2016-05-01"}},
	{"* * * * * 0L", "", "2017-01-01", true, []string{"2017-01-29"}},
	{"* * * * * SUNL", "", "2017-01-01", true, []string{"2017-01-29"}},
	{"* * * * * 7L", "", "2016-12-31", true, []string{"2017-01-29"}},
	{"* * * * * FRIL", "", "2017-01-01", true, []string{"2017-01-27"}},
	{"* * * * * SUN#1", "", "2017-01-01", true, []string{"2017-01-01"}},
	{"* * * * * 0#1", "", "2017-02-01", true, []string{"2017-02-05"}},
	{"* * * * * 5#3", "", "2017-01-21", true, []string{"2017-02-17"}},
	{"* * * * * 2#5", "", "2017-02-01", true, []string{"2017-05-30"}},
	{"* * * 1W * *", "", "2017-01-01", true, []string{"2017-01-02"}},
	{"* * * 7W * *", "", "2017-01-07", true, []string{"2017-02-07"}},
	{"* * * 30W * *", "", "2017-04-29", true, []string{"2017-05-30"}},
	{"* * * 1W * *", "", "2017-04-01", true, []string{"2017-04-03"}},
	{"0 30 10 1W * *", "", "2017-04-03 12:00", true, []string{"2017-05-01 10:30"}},
	{"0 30 17 31W * *", "", "2018-03-30 17:45", true, []string{"2018-05-31 17:30"}},
	{"0 30 17 15W * *", "", "2016-12-30 17:45", true, []string{"2017-01-16 17:30"}},
	{"0 30 17 27W * 1L", "", "2017-03-10 17:45", true, []string{"2017-03-27 17:30"}},
	{"0 30 17 27W * 1#4", "", "2017-03-10 17:45", true, []string{"2017-03-27 17:30"}},
	{"* * * LW * *", "", "2017-09-30", true, []string{"2017-10-31"}},
	{"* * * LW * *", "", "2017-04-01", true, []string{"2017-04-28"}},
	{"* * * L-3W * *", "", "2017-01-01", true, []string{"2017-01-27"}},
	{"* * * L-0W * *", "", "2016-02-01", true, []string{"2016-02-29"}},
	{"* * * L-2W * *", "", "2016-02-01", true, []string{"2016-02-26"}},
	{"* * * L-3W * *", "", "2017-02-01", true, []string{"2017-02-24"}},
	{"57-5/3 * * * * ?", "", "2017-01-01 17:36:06", true, []string{"2017-01-01 17:36:57"}},
	{"57-5/3 * * * * ?", "", "2017-01-01 17:36:58", true, []string{"2017-01-01 17:37:00"}},
	{"57-5/3 * * * * ?", "", "2017-01-01 17:37:01", true, []string{"2017-01-01 17:37:03"}},
	{"57-5/3 * * * * ?", "", "2017-01-01 17:37:04", true, []string{"2017-01-01 17:37:57"}},
	{"* * * 20-5/5 * *", "", "2017-05-21", true, []string{"2017-05-25"}},
	{"* * * 20-5/5 * *", "", "2017-06-01", true, []string{"2017-06-04"}},
	{"* * * * 12-2 *", "", "2017-03-19", true, []string{"2017-12-01"}},
	{"* * * * 9-8/3 *", "", "2017-04-19", true, []string{"2017-06-01"}},
}

// quartzExamples are the examples of Quartz's CronTrigger tutorial, without
// its year field and with its days of week, 1 (Sunday) to 7, written as
// cron's, 0 to 6 (Quartz's "6L" and "6#3", Fridays, are "5L" and "5#3").
var quartzExamples = []docCase{
	{"0 0 12 * * ?", "fire at 12pm (noon) every day", "2026-01-01 00:00", false, []string{"2026-01-01 12:00", "2026-01-02 12:00"}},
	{"0 15 10 ? * *", "fire at 10:15am every day", "2026-01-01 00:00", false, []string{"2026-01-01 10:15", "2026-01-02 10:15"}},
	{"0 15 10 * * ?", "fire at 10:15am every day", "2026-01-01 00:00", false, []string{"2026-01-01 10:15", "2026-01-02 10:15"}},
	{"0 * 14 * * ?", "every minute starting at 2pm and ending at 2:59pm, every day", "2026-01-01 14:58", false,
		[]string{"2026-01-01 14:59", "2026-01-02 14:00"}},
	{"0 0/5 14 * * ?", "every 5 minutes starting at 2pm and ending at 2:55pm, every day", "2026-01-01 14:52", false,
		[]string{"2026-01-01 14:55", "2026-01-02 14:00"}},
	{"0 0/5 14,18 * * ?", "every 5 minutes from 2pm to 2:55pm, and from 6pm to 6:55pm", "2026-01-01 14:52", false,
		[]string{"2026-01-01 14:55", "2026-01-01 18:00", "2026-01-01 18:05"}},
	{"0 0-5 14 * * ?", "every minute from 2pm to 2:05pm, every day", "2026-01-01 14:03", false,
		[]string{"2026-01-01 14:04", "2026-01-01 14:05", "2026-01-02 14:00"}},
	{"0 10,44 14 ? 3 WED", "at 2:10pm and at 2:44pm every Wednesday in March", "2026-01-01 00:00", false,
		[]string{"2026-03-04 14:10", "2026-03-04 14:44", "2026-03-11 14:10"}},
	{"0 15 10 ? * MON-FRI", "at 10:15am every Monday to Friday", "2026-01-01 00:00", false,
		[]string{"2026-01-01 10:15", "2026-01-02 10:15", "2026-01-05 10:15"}},
	{"0 15 10 15 * ?", "at 10:15am on the 15th day of every month", "2026-01-01 00:00", false,
		[]string{"2026-01-15 10:15", "2026-02-15 10:15"}},
	{"0 15 10 L * ?", "at 10:15am on the last day of every month", "2026-01-01 00:00", false,
		[]string{"2026-01-31 10:15", "2026-02-28 10:15", "2026-03-31 10:15"}},
	{"0 15 10 L-2 * ?", "at 10:15am on the second-to-last day of every month", "2026-01-01 00:00", false,
		[]string{"2026-01-29 10:15", "2026-02-26 10:15", "2026-03-29 10:15"}},
	{"0 15 10 ? * 5L", "at 10:15am on the last Friday of every month (Quartz: 6L)", "2026-01-01 00:00", false,
		[]string{"2026-01-30 10:15", "2026-02-27 10:15", "2026-03-27 10:15"}},
	{"0 15 10 ? * 5#3", "at 10:15am on the third Friday of every month (Quartz: 6#3)", "2026-01-01 00:00", false,
		[]string{"2026-01-16 10:15", "2026-02-20 10:15", "2026-03-20 10:15"}},
	{"0 0 12 1/5 * ?", "at 12pm every 5 days every month, starting on the first day", "2026-01-01 00:00", false,
		[]string{"2026-01-01 12:00", "2026-01-06 12:00", "2026-01-11 12:00"}},
	{"0 11 11 11 11 ?", "every November 11th at 11:11am", "2026-01-01 00:00", false,
		[]string{"2026-11-11 11:11", "2027-11-11 11:11"}},
	// The special characters, as the tutorial explains them.
	{"0 0 0 15W * ?", "the weekday nearest the 15th: a Saturday moves to Friday the 14th, a Sunday to Monday the 16th", "2026-01-01 00:00", false,
		[]string{"2026-01-15", "2026-02-16", "2026-03-16", "2026-04-15", "2026-05-15", "2026-06-15", "2026-07-15", "2026-08-14"}},
	{"0 0 0 1W 8 ?", "1W on a Saturday the 1st fires on Monday the 3rd: it does not jump over the month's boundary", "2026-01-01 00:00", false,
		[]string{"2026-08-03", "2027-08-02"}},
	{"0 0 0 LW * ?", "the last weekday of the month", "2026-01-01 00:00", false,
		[]string{"2026-01-30", "2026-02-27", "2026-03-31"}},
	{"0 0 0 L-3 * ?", "the third-to-last day of the calendar month", "2026-01-01 00:00", false,
		[]string{"2026-01-28", "2026-02-25"}},
	{"0 0 0 ? * 1#1", "the first Monday of the month (Quartz: 2#1)", "2026-01-01 00:00", false,
		[]string{"2026-01-05", "2026-02-02", "2026-03-02"}},
	{"0 0 0 ? * 3#5", "the fifth Wednesday: no firing in a month without one (Quartz: 4#5)", "2026-01-01 00:00", false,
		[]string{"2026-04-29", "2026-07-29", "2026-09-30", "2026-12-30"}},
	{"0 0 0 ? * FRI#3", "FRI#3, with a name", "2026-01-01 00:00", false,
		[]string{"2026-01-16", "2026-02-20"}},
}

func TestDocumentationExamples(t *testing.T) {
	for _, set := range []struct {
		source string
		cases  []docCase
	}{
		{"crontab(5)", crontabExamples},
		{"Cronos", cronosExamples},
		{"Quartz", quartzExamples},
	} {
		for _, tc := range set.cases {
			t.Run(set.source+"/"+tc.spec+"/"+tc.from, func(t *testing.T) {
				s, err := schedule.Parse(tc.spec, time.UTC)
				if err != nil {
					t.Fatalf("%s (%s): %v", tc.spec, tc.doc, err)
				}
				from := parseUTC(t, tc.from)
				if tc.inclusive {
					from = from.Add(-time.Second)
				}
				var got, want []string
				for _, w := range tc.want {
					from = s.Next(from)
					got = append(got, from.Format(time.DateTime))
					want = append(want, parseUTC(t, w).Format(time.DateTime))
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s (%s), from %s:\n got  %v\n want %v", tc.spec, tc.doc, tc.from, got, want)
				}
			})
		}
	}
}

func parseUTC(t testing.TB, s string) time.Time {
	t.Helper()
	for _, layout := range []string{time.DateTime, "2006-01-02 15:04", time.DateOnly} {
		if ts, err := time.Parse(layout, s); err == nil {
			return ts
		}
	}
	t.Fatalf("bad time %q", s)
	return time.Time{}
}

// TestEquivalentSpecs: each spec fires exactly when its plain equivalent
// does.
func TestEquivalentSpecs(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	for _, tc := range []struct{ spec, plain string }{
		// crontab(5): Sunday is 0 or 7, in ranges too; names in any case.
		{"0 0 * * 7", "0 0 * * 0"},
		{"0 0 * * 5-7", "0 0 * * 5,6,0"},
		{"0 0 * * 0-7", "0 0 * * 0-6"},
		{"0 0 * * 1-7/2", "0 0 * * 1,3,5,0"},
		{"0 0 * * 7-2", "0 0 * * 0-2"},
		{"0 0 * * 7-7", "0 0 * * 0"},
		{"0 0 * * MON", "0 0 * * 1"},
		{"0 0 * * mOn-FrI", "0 0 * * 1-5"},
		{"0 0 1 Jan,DEC *", "0 0 1 1,12 *"},
		// Wrap-around ranges, as Cronos reads them.
		{"0 0 * * FRI-MON", "0 0 * * 5,6,0,1"},
		{"0 0 * * sat-sun", "0 0 * * 6,0"},
		{"0 0 * * 6-1/2", "0 0 * * 6,1"},
		{"0 22-2 * * *", "0 22,23,0,1,2 * * *"},
		{"0 22-2/3 * * *", "0 22,1 * * *"},
		{"45-15/2 * * * *", "45,47,49,51,53,55,57,59,1,3,5,7,9,11,13,15 * * * *"},
		{"0 0 28-3 * *", "0 0 28,29,30,31,1,2,3 * *"},
		{"0 0 1 NOV-FEB *", "0 0 1 11,12,1,2 *"},
		{"0 0 1 11-2/2 *", "0 0 1 11,1 *"},
		// The day forms in any case.
		{"0 0 l * *", "0 0 L * *"},
		{"0 0 L-0 * *", "0 0 L * *"},
		{"0 0 lw * *", "0 0 LW * *"},
		{"0 0 15w * *", "0 0 15W * *"},
		{"0 0 * * fril", "0 0 * * 5L"},
		{"0 0 * * 7L", "0 0 * * 0L"},
		{"0 0 * * 7#1", "0 0 * * SUN#1"},
		{"0 0 ? * 5#3", "0 0 * * 5#3"},
	} {
		s, err := schedule.Parse(tc.spec, berlin)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		p, err := schedule.Parse(tc.plain, berlin)
		if err != nil {
			t.Fatalf("%q: %v", tc.plain, err)
		}
		a, b := time.Date(2026, 1, 1, 0, 0, 0, 0, berlin), time.Date(2026, 1, 1, 0, 0, 0, 0, berlin)
		for range 200 {
			a, b = s.Next(a), p.Next(b)
			if !a.Equal(b) {
				t.Fatalf("%q fires at %s where %q fires at %s", tc.spec, a, tc.plain, b)
			}
		}
	}
}

// TestSyntaxErrors: typos robfig/cron forgives, and day forms written
// wrong, are errors naming the field.
func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"0 9 * * 1,,5", `day of week field "1,,5": empty list item between two commas`},
		{"0 9 * * 1,5,", `day of week field "1,5,": a comma ends the list`},
		{"0 9 * * ,1", `day of week field ",1": a comma starts the list`},
		{"0 9,,10 * * *", `hour field "9,,10": empty list item`},
		{"+1 * * * *", `minute field "+1": value "+1" is not a number`},
		{"-5 * * * *", `minute field "-5": missing value`},
		{"1- * * * *", `minute field "1-": missing value`},
		{"5/ * * * *", `minute field "5/": missing step`},
		{"*/ * * * *", `minute field "*/": missing step`},
		{"1/2/3 * * * *", `minute field "1/2/3": step "2/3" is not a number`},
		{"1-5-7 * * * *", `minute field "1-5-7": value "5-7" is not a number`},
		{"*/-1 * * * *", `step "-1" is not a number`},
		{"0 0 * * monday", `day of week field "monday": "monday" is neither a number nor a name`},
		{"0 0 * janu *", `month field "janu": "janu" is neither a number nor a name`},
		{"0 0 * * 8", "8 is above maximum 7"},
		{"0 0 0 * *", "0 is below minimum 1"},
		{"0 0 32 * *", "32 is above maximum 31"},
		{"0 0 * 0 *", "0 is below minimum 1"},
		{"0 24 * * *", "24 is above maximum 23"},
		{"60 * * * *", "60 is above maximum 59"},
		{"99999999999999999999 * * * *", "above maximum 59"},
		{"0 0 * * 1#", `day of week field "1#"`},
		{"L * * * *", `minute field "L"`},
		{"0 L * * *", `hour field "L"`},
		{"0 0 * L *", `month field "L"`},
		{"0 0 W * *", "L and W are written"},
		{"0 0 1-2W * *", "L and W are written"},
		{"0 0 1,2W * *", "L and W are written"},
		{"0 0 1/2W * *", "L and W are written"},
		{"0 0 1LW * *", "L and W are written"},
		{"0 0 L- * *", "L and W are written"},
		{"0 0 L-x * *", "L and W are written"},
		{"0 0 1,L * *", "L and W are written"},
		{"0 0 L-31 * *", "offset 31 is above maximum 30"},
		{"0 0 0W * *", "0 is below minimum 1"},
		{"0 0 32W * *", "32 is above maximum 31"},
		{"0 0 * * L", "L needs a day before it"},
		{"0 0 * * 5L,1", "L is written dL"},
		{"0 0 * * 1-5L", "L and # follow a single day"},
		{"0 0 * * */2L", "L and # follow a single day"},
		{"0 0 * * 5#6", "#6: a month has a first to a fifth"},
		{"0 0 * * 0#0", "#0: a month has a first to a fifth"},
		{"0 0 * * SUN#050", "#50: a month has a first to a fifth"},
		{"0 0 * * 5#3,1", "# is written d#n"},
		{"0 0 * * 8#1", "8 is above maximum 7"},
		{"0 0 * * #1", `day of week field "#1": missing value`},
		{"@reboot", "@reboot is not supported"},
		// Specs that can never fire.
		{"0 0 L-30 2 *", "never fires"},
		{"0 0 31W 4 *", "never fires"},
		{"0 0 30W 2 *", "never fires"},
		{"0 0 31W 2,4,6,9,11 *", "never fires"},
		{"0 0 L-29 2 *", "never fires"}, // only Feb 29 minus 29: none
		{"0 0 1-7 * 5#2", "never fires"},
		{"0 0 L * 0#1", "never fires"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := schedule.Parse(tc.spec, time.UTC)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tc.spec, s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) error = %q, want it to mention %q", tc.spec, err, tc.want)
			}
		})
	}
}

// dayForm is a day field and, computed with the time package, the days it
// stands for.
type dayForm struct {
	text string
	star bool // written starting with "*" or "?"
	ext  bool // an L, W or # form
	days func(d time.Time) bool
}

func lastOfMonth(d time.Time) int {
	return time.Date(d.Year(), d.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func isWeekday(d time.Time) bool { return d.Weekday() != time.Saturday && d.Weekday() != time.Sunday }

// nearestWeekdayOracle: the weekday of d's month at the least distance from
// day n of that month, or 0 when the month has no day n.
func nearestWeekdayOracle(d time.Time, n int) int {
	last := lastOfMonth(d)
	if n < 1 || n > last {
		return 0
	}
	best := 0
	for day := 1; day <= last; day++ {
		if !isWeekday(time.Date(d.Year(), d.Month(), day, 0, 0, 0, 0, time.UTC)) {
			continue
		}
		if best == 0 || abs(day-n) < abs(best-n) {
			best = day
		}
	}
	return best
}

func abs(n int) int { return max(n, -n) }

var domForms = []dayForm{
	{"*", true, false, func(time.Time) bool { return true }},
	{"*/2", true, false, func(d time.Time) bool { return d.Day()%2 == 1 }},
	{"1-31/2", false, false, func(d time.Time) bool { return d.Day()%2 == 1 }},
	{"13", false, false, func(d time.Time) bool { return d.Day() == 13 }},
	{"25-5", false, false, func(d time.Time) bool { return d.Day() >= 25 || d.Day() <= 5 }},
	{"L", false, true, func(d time.Time) bool { return d.Day() == lastOfMonth(d) }},
	{"L-3", false, true, func(d time.Time) bool { return d.Day() == lastOfMonth(d)-3 }},
	{"L-30", false, true, func(d time.Time) bool { return d.Day() == lastOfMonth(d)-30 }},
	{"LW", false, true, func(d time.Time) bool { return d.Day() == nearestWeekdayOracle(d, lastOfMonth(d)) }},
	{"L-2W", false, true, func(d time.Time) bool { return d.Day() == nearestWeekdayOracle(d, lastOfMonth(d)-2) }},
	{"1W", false, true, func(d time.Time) bool { return d.Day() == nearestWeekdayOracle(d, 1) }},
	{"15W", false, true, func(d time.Time) bool { return d.Day() == nearestWeekdayOracle(d, 15) }},
	{"30W", false, true, func(d time.Time) bool { return d.Day() == nearestWeekdayOracle(d, 30) }},
	{"31W", false, true, func(d time.Time) bool { return d.Day() == nearestWeekdayOracle(d, 31) }},
}

func weekdayIn(days ...time.Weekday) func(d time.Time) bool {
	return func(d time.Time) bool {
		for _, wd := range days {
			if d.Weekday() == wd {
				return true
			}
		}
		return false
	}
}

var dowForms = []dayForm{
	{"*", true, false, func(time.Time) bool { return true }},
	{"?", true, false, func(time.Time) bool { return true }},
	{"*/2", true, false, weekdayIn(time.Sunday, time.Tuesday, time.Thursday, time.Saturday)},
	{"1-5", false, false, weekdayIn(time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday)},
	{"7", false, false, weekdayIn(time.Sunday)},
	{"5-7", false, false, weekdayIn(time.Friday, time.Saturday, time.Sunday)},
	{"FRI-MON", false, false, weekdayIn(time.Friday, time.Saturday, time.Sunday, time.Monday)},
	{"sat-sun", false, false, weekdayIn(time.Saturday, time.Sunday)},
	{"5L", false, true, func(d time.Time) bool { return d.Weekday() == time.Friday && d.Day()+7 > lastOfMonth(d) }},
	{"0L", false, true, func(d time.Time) bool { return d.Weekday() == time.Sunday && d.AddDate(0, 0, 7).Month() != d.Month() }},
	{"7L", false, true, func(d time.Time) bool { return d.Weekday() == time.Sunday && d.AddDate(0, 0, 7).Month() != d.Month() }},
	{"0#1", false, true, func(d time.Time) bool { return d.Weekday() == time.Sunday && d.Day() <= 7 }},
	{"5#3", false, true, func(d time.Time) bool { return d.Weekday() == time.Friday && d.Day() > 14 && d.Day() <= 21 }},
	{"2#5", false, true, func(d time.Time) bool { return d.Weekday() == time.Tuesday && d.Day() > 28 }},
	{"sat#4", false, true, func(d time.Time) bool {
		return d.Weekday() == time.Saturday && d.AddDate(0, 0, -21).Month() == d.Month() && d.AddDate(0, 0, -28).Month() != d.Month()
	}},
}

// TestDayForms compares, for every pair of day-of-month and day-of-week
// forms, the days a spec fires on over 8 years with the days the time
// package says it stands for. Cron's rule: a day matches either restricted
// field; both when one is written "*..." ; both, as in Cronos, when one is
// an L, W or # form.
func TestDayForms(t *testing.T) {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(8, 0, 0)
	for _, dom := range domForms {
		for _, dow := range dowForms {
			spec := fmt.Sprintf("0 0 %s * %s", dom.text, dow.text)
			match := func(d time.Time) bool {
				if dom.ext || dow.ext || dom.star || dow.star {
					return dom.days(d) && dow.days(d)
				}
				return dom.days(d) || dow.days(d)
			}
			days := func(from, to time.Time) []string {
				var ds []string
				for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
					if match(d) {
						ds = append(ds, d.Format(time.DateOnly))
					}
				}
				return ds
			}
			want := days(start, end)
			s, err := schedule.Parse(spec, time.UTC)
			if err != nil {
				// Parse refuses a spec with no day within 8 years of
				// 2024-01-01 or of today.
				today := time.Now().UTC().Truncate(24 * time.Hour)
				if (len(want) > 0 && len(days(today, today.AddDate(8, 0, 1))) > 0) || !strings.Contains(err.Error(), "never fires") {
					t.Errorf("%q: %v; the days it stands for: %d", spec, err, len(want))
				}
				continue
			}
			var got []string
			for next := s.Next(start.Add(-time.Second)); next.Before(end); next = s.Next(next) {
				got = append(got, next.Format(time.DateOnly))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%q: fires on %d days, stands for %d\n got  %.200v\n want %.200v", spec, len(got), len(want), got, want)
			}
		}
	}
}
