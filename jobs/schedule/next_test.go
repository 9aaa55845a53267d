package schedule_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// Zone transitions used below, as in Go's embedded tz database (local times):
//
//	Europe/Berlin        2026-03-29 02:00 CET -> 03:00 CEST;  2026-10-25 03:00 CEST -> 02:00 CET
//	America/New_York     2026-03-08 02:00 EST -> 03:00 EDT;   2026-11-01 02:00 EDT -> 01:00 EST
//	America/Santiago     2026-04-05 00:00 -03 -> 2026-04-04 23:00 -04;  2026-09-06 00:00 -04 -> 01:00 -03
//	America/Havana       2026-03-08 00:00 CST -> 01:00 CDT;   2026-11-01 01:00 CDT -> 00:00 CST
//	Australia/Lord_Howe  2026-04-05 02:00 +11 -> 01:30 +1030; 2026-10-04 02:00 +1030 -> 02:30 +11
//	Pacific/Apia         2011-12-30 00:00 -10 -> 2011-12-31 00:00 +14 (a whole day skipped)
//	Asia/Jerusalem       2026-03-27 02:00 IST -> 03:00 IDT (a Friday)
//	Asia/Kolkata (+05:30), Asia/Kathmandu (+05:45) and UTC: no DST.

// nextCase is a row of TestNext: from a local time, the next fire times.
type nextCase struct {
	spec string
	zone string
	// from is a local wall time "2006-01-02 15:04[:05]" that must occur
	// exactly once, or an RFC 3339 time with offset (for repeated times).
	from string
	// want are the next fire times, as local wall times with offset.
	want []string
}

var nextCases = []nextCase{
	// Europe/Berlin, spring forward: 02:00-03:00 does not exist.
	{"30 2 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}},
	{"0 2 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
	{"0,30 2 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
	{"30 1 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T01:30:00+01:00", "2026-03-30T01:30:00+02:00"}},
	{"30 3 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T03:30:00+02:00", "2026-03-30T03:30:00+02:00"}},
	{"0 3 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00"}},
	{"0 0-23 * * *", "Europe/Berlin", "2026-03-29 00:30", []string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
	{"30 * * * *", "Europe/Berlin", "2026-03-29 00:00", []string{"2026-03-29T00:30:00+01:00", "2026-03-29T01:30:00+01:00", "2026-03-29T03:30:00+02:00", "2026-03-29T04:30:00+02:00"}},
	{"*/15 * * * *", "Europe/Berlin", "2026-03-29 01:30", []string{"2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:15:00+02:00"}},
	{"* 2 * * *", "Europe/Berlin", "2026-03-29 01:58", []string{"2026-03-30T02:00:00+02:00", "2026-03-30T02:01:00+02:00"}},
	{"@hourly", "Europe/Berlin", "2026-03-29 00:30", []string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
	{"@daily", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00"}},
	{"@weekly", "Europe/Berlin", "2026-03-25 12:00", []string{"2026-03-29T00:00:00+01:00", "2026-04-05T00:00:00+02:00"}},
	// 6 fields: seconds. "15 30 2" is fixed-time, "0 */20 *" wildcard, and
	// the three seconds of 02:59 all map to the jump.
	{"15 30 2 * * *", "Europe/Berlin", "2026-03-28 12:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:15+02:00"}},
	{"*/20 59 1-3 * * *", "Europe/Berlin", "2026-03-29 01:59:30", []string{"2026-03-29T01:59:40+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:59:00+02:00", "2026-03-29T03:59:20+02:00"}},
	{"0 */20 * * * *", "Europe/Berlin", "2026-03-29 01:30", []string{"2026-03-29T01:40:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:20:00+02:00"}},
	{"30 */30 * * * *", "Europe/Berlin", "2026-03-29 01:30:30", []string{"2026-03-29T03:00:30+02:00", "2026-03-29T03:30:30+02:00"}},
	// @every is real time: 90 minutes across the jump.
	{"@every 90m", "Europe/Berlin", "2026-03-29 01:00", []string{"2026-03-29T03:30:00+02:00", "2026-03-29T05:00:00+02:00"}},

	// Europe/Berlin, fall back: 02:00-03:00 happens twice.
	{"30 2 * * *", "Europe/Berlin", "2026-10-24 12:00", []string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
	{"0 2 * * *", "Europe/Berlin", "2026-10-24 12:00", []string{"2026-10-25T02:00:00+02:00", "2026-10-26T02:00:00+01:00"}},
	{"30 1 * * *", "Europe/Berlin", "2026-10-24 12:00", []string{"2026-10-25T01:30:00+02:00", "2026-10-26T01:30:00+01:00"}},
	{"30 3 * * *", "Europe/Berlin", "2026-10-24 12:00", []string{"2026-10-25T03:30:00+01:00", "2026-10-26T03:30:00+01:00"}},
	{"30 2 * * *", "Europe/Berlin", "2026-10-25T02:30:00+02:00", []string{"2026-10-26T02:30:00+01:00"}},
	{"30 2 * * *", "Europe/Berlin", "2026-10-25T02:15:00+01:00", []string{"2026-10-26T02:30:00+01:00"}},
	{"0 3 * * *", "Europe/Berlin", "2026-10-25T02:15:00+01:00", []string{"2026-10-25T03:00:00+01:00"}},
	{"0 0-23 * * *", "Europe/Berlin", "2026-10-25 00:30", []string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"}},
	{"30 * * * *", "Europe/Berlin", "2026-10-25 01:00", []string{"2026-10-25T01:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00"}},
	{"30 * * * *", "Europe/Berlin", "2026-10-25T02:30:00+02:00", []string{"2026-10-25T02:30:00+01:00"}},
	{"*/15 * * * *", "Europe/Berlin", "2026-10-25T02:30:00+02:00", []string{"2026-10-25T02:45:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00"}},
	{"* 2 * * *", "Europe/Berlin", "2026-10-25T02:58:00+02:00", []string{"2026-10-25T02:59:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:01:00+01:00"}},
	{"30 0 2 * * *", "Europe/Berlin", "2026-10-24 12:00", []string{"2026-10-25T02:00:30+02:00", "2026-10-26T02:00:30+01:00"}},
	{"* 30 2 * * *", "Europe/Berlin", "2026-10-25T02:30:58+02:00", []string{"2026-10-25T02:30:59+02:00", "2026-10-26T02:30:00+01:00"}},
	{"@every 1h", "Europe/Berlin", "2026-10-25T02:30:00+02:00", []string{"2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00"}},

	// America/New_York.
	{"30 2 * * *", "America/New_York", "2026-03-07 12:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
	{"0 * * * *", "America/New_York", "2026-03-08 00:30", []string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
	{"30 1 * * *", "America/New_York", "2026-10-31 12:00", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
	{"*/30 * * * *", "America/New_York", "2026-11-01 00:45", []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}},

	// America/Santiago: midnight skipped on 2026-09-06; 23:00-24:00 of
	// 2026-04-04 repeated.
	{"0 0 * * *", "America/Santiago", "2026-09-05 12:00", []string{"2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"}},
	{"0 * * * *", "America/Santiago", "2026-09-05 22:30", []string{"2026-09-05T23:00:00-04:00", "2026-09-06T01:00:00-03:00", "2026-09-06T02:00:00-03:00"}},
	{"@monthly", "America/Santiago", "2026-08-15 12:00", []string{"2026-09-01T00:00:00-04:00", "2026-10-01T00:00:00-03:00"}},
	{"0 0 6 9 *", "America/Santiago", "2026-01-01 12:00", []string{"2026-09-06T01:00:00-03:00", "2027-09-06T00:00:00-03:00"}},
	{"30 23 * * *", "America/Santiago", "2026-04-04 12:00", []string{"2026-04-04T23:30:00-03:00", "2026-04-05T23:30:00-04:00"}},
	{"0 0 * * *", "America/Santiago", "2026-04-04 12:00", []string{"2026-04-05T00:00:00-04:00", "2026-04-06T00:00:00-04:00"}},
	{"30 * * * *", "America/Santiago", "2026-04-04 22:00", []string{"2026-04-04T22:30:00-03:00", "2026-04-04T23:30:00-03:00", "2026-04-04T23:30:00-04:00", "2026-04-05T00:30:00-04:00"}},

	// America/Havana: midnight skipped on 2026-03-08; 00:00-01:00 of
	// 2026-11-01 repeated.
	{"0 0 * * *", "America/Havana", "2026-03-07 12:00", []string{"2026-03-08T01:00:00-04:00", "2026-03-09T00:00:00-04:00"}},
	{"0 0 * * *", "America/Havana", "2026-10-31 12:00", []string{"2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00"}},

	// Australia/Lord_Howe: 30-minute shifts.
	{"45 1 * * *", "Australia/Lord_Howe", "2026-04-04 12:00", []string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
	{"*/15 * * * *", "Australia/Lord_Howe", "2026-04-05 01:20", []string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30", "2026-04-05T02:00:00+10:30"}},
	{"15 2 * * *", "Australia/Lord_Howe", "2026-10-03 12:00", []string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
	{"0 * * * *", "Australia/Lord_Howe", "2026-10-04 00:30", []string{"2026-10-04T01:00:00+10:30", "2026-10-04T03:00:00+11:00"}},
	{"30 * * * *", "Australia/Lord_Howe", "2026-10-04 00:45", []string{"2026-10-04T01:30:00+10:30", "2026-10-04T02:30:00+11:00", "2026-10-04T03:30:00+11:00"}},

	// Pacific/Apia skipped 2011-12-30 entirely.
	{"0 12 * * *", "Pacific/Apia", "2011-12-29 13:00", []string{"2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},
	{"0 * * * *", "Pacific/Apia", "2011-12-29 22:30", []string{"2011-12-29T23:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T01:00:00+14:00"}},

	// Zones without DST, including 30- and 45-minute offsets.
	{"30 2 * * *", "Asia/Kolkata", "2026-03-29 00:00", []string{"2026-03-29T02:30:00+05:30", "2026-03-30T02:30:00+05:30"}},
	{"*/45 * * * *", "Asia/Kolkata", "2026-10-25 01:50", []string{"2026-10-25T02:00:00+05:30", "2026-10-25T02:45:00+05:30", "2026-10-25T03:00:00+05:30"}},
	{"0 12 * * *", "Asia/Kathmandu", "2026-03-29 12:00", []string{"2026-03-30T12:00:00+05:45", "2026-03-31T12:00:00+05:45"}},
	{"0 0 29 2 *", "UTC", "2026-01-01 00:00", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
	{"0 0 29 2 *", "UTC", "2096-03-01 00:00", []string{"2104-02-29T00:00:00Z"}},
	{"@yearly", "UTC", "2026-06-01 00:00", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
	// Both day fields restricted: the 13th or a Friday.
	{"0 0 13 * 5", "UTC", "2026-02-01 00:00", []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z", "2026-03-20T00:00:00Z"}},
	// Both restricted, one as a range with a step: odd days or Mondays.
	{"0 0 1-31/2 * mon", "UTC", "2026-02-01 00:00", []string{"2026-02-02T00:00:00Z", "2026-02-03T00:00:00Z", "2026-02-05T00:00:00Z", "2026-02-07T00:00:00Z", "2026-02-09T00:00:00Z", "2026-02-11T00:00:00Z"}},
	// A field written starting with "*" is no restriction for ISC cron, even
	// with a step: Mondays with an odd date.
	{"0 0 */2 * mon", "UTC", "2026-02-01 00:00", []string{"2026-02-09T00:00:00Z", "2026-02-23T00:00:00Z", "2026-03-09T00:00:00Z", "2026-03-23T00:00:00Z", "2026-04-13T00:00:00Z"}},
	// With an L, W or # form, a day matches both day fields, as in Cronos:
	// Friday the 13th (always the second Friday), a last day that is a Friday.
	{"0 0 13 * 5#2", "UTC", "2026-01-01 00:00", []string{"2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z", "2026-11-13T00:00:00Z"}},
	{"0 0 L * 5", "UTC", "2026-01-01 00:00", []string{"2026-07-31T00:00:00Z", "2027-04-30T00:00:00Z"}},
	// Day of month starred: the day of week alone decides (Fridays in February).
	{"0 0 * feb fri", "UTC", "2026-01-01 00:00", []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2027-02-05T00:00:00Z"}},
	{"@every 1s", "UTC", "2026-01-01 00:00", []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},

	// The day forms L, W and # follow the same DST rules: the day is chosen
	// on the calendar, then the wall time is mapped as for any other spec.
	// Europe/Berlin changes on the last Sunday of March and of October.
	{"30 2 * 3 0L", "Europe/Berlin", "2026-03-01 00:00", []string{"2026-03-29T03:00:00+02:00", "2027-03-28T03:00:00+02:00"}},
	{"30 2 * 10 SUNL", "Europe/Berlin", "2026-10-01 00:00", []string{"2026-10-25T02:30:00+02:00", "2027-10-31T02:30:00+02:00"}},
	{"*/30 2 * 10 7L", "Europe/Berlin", "2026-10-25 00:00", []string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2027-10-31T02:00:00+02:00"}},
	{"30 2 * 3 0#5", "Europe/Berlin", "2026-03-01 00:00", []string{"2026-03-29T03:00:00+02:00", "2030-03-31T03:00:00+02:00"}},
	{"30 2 L 3 *", "Europe/Berlin", "2024-03-01 00:00", []string{"2024-03-31T03:00:00+02:00", "2025-03-31T02:30:00+02:00"}},
	{"30 2 L 10 *", "Europe/Berlin", "2021-10-01 00:00", []string{"2021-10-31T02:30:00+02:00", "2022-10-31T02:30:00+01:00"}},
	{"30 * L 10 *", "Europe/Berlin", "2021-10-31 01:45", []string{"2021-10-31T02:30:00+02:00", "2021-10-31T02:30:00+01:00", "2021-10-31T03:30:00+01:00"}},
	{"30 2 L-2 3 *", "Europe/Berlin", "2026-03-01 00:00", []string{"2026-03-29T03:00:00+02:00", "2027-03-29T02:30:00+02:00"}},
	// W never picks the Sunday of the change: 29W moves to Monday the 30th.
	{"30 2 29W 3 *", "Europe/Berlin", "2026-03-01 00:00", []string{"2026-03-30T02:30:00+02:00"}},
	{"0 2 LW 3 *", "Europe/Berlin", "2024-03-01 00:00", []string{"2024-03-29T02:00:00+01:00", "2025-03-31T02:00:00+02:00"}},
	// America/New_York changes on the second Sunday of March and the first
	// of November.
	{"30 2 * 3 0#2", "America/New_York", "2026-03-01 00:00", []string{"2026-03-08T03:00:00-04:00", "2027-03-14T03:00:00-04:00"}},
	{"30 1 * 11 SUN#1", "America/New_York", "2026-10-31 12:00", []string{"2026-11-01T01:30:00-04:00", "2027-11-07T01:30:00-04:00"}},
	{"30 * * 11 0#1", "America/New_York", "2026-11-01 00:00", []string{"2026-11-01T00:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:30:00-05:00"}},
	{"30 1 L-29 11 *", "America/New_York", "2026-10-31 12:00", []string{"2026-11-01T01:30:00-04:00", "2027-11-01T01:30:00-04:00"}},
	{"30 2 8W 3 *", "America/New_York", "2026-03-01 00:00", []string{"2026-03-09T02:30:00-04:00"}},
	{"30 1 1W 11 *", "America/New_York", "2026-10-31 12:00", []string{"2026-11-02T01:30:00-05:00"}},
	// Australia/Lord_Howe changes by 30 minutes on the first Sunday of
	// April (01:30-02:00 repeated) and of October (02:00-02:30 skipped).
	{"15 2 * 10 0#1", "Australia/Lord_Howe", "2026-10-01 00:00", []string{"2026-10-04T02:30:00+11:00", "2027-10-03T02:30:00+11:00"}},
	{"45 1 * 4 SUN#1", "Australia/Lord_Howe", "2026-04-01 00:00", []string{"2026-04-05T01:45:00+11:00", "2027-04-04T01:45:00+11:00"}},
	{"*/15 1 * 4 0#1", "Australia/Lord_Howe", "2026-04-05 01:20", []string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30", "2027-04-04T01:00:00+11:00"}},
	{"15 2 L-27 10 *", "Australia/Lord_Howe", "2026-10-01 00:00", []string{"2026-10-04T02:30:00+11:00", "2027-10-04T02:15:00+11:00"}},
	{"15 2 4W 10 *", "Australia/Lord_Howe", "2026-10-01 00:00", []string{"2026-10-05T02:15:00+11:00"}},
	{"45 1 * 4 0L", "Australia/Lord_Howe", "2026-04-01 00:00", []string{"2026-04-26T01:45:00+10:30"}},
	// Asia/Jerusalem springs forward on a Friday (2026-03-27 02:00 -> 03:00),
	// a day W can pick.
	// In 2027 the 27th is a Saturday: 27W is Friday the 26th, the day of the
	// change again.
	{"30 2 27W 3 *", "Asia/Jerusalem", "2026-03-01 00:00", []string{"2026-03-27T03:00:00+03:00", "2027-03-26T03:00:00+03:00"}},
	{"30 2 * 3 FRIL", "Asia/Jerusalem", "2026-03-01 00:00", []string{"2026-03-27T03:00:00+03:00"}},
	{"30 2 * 3 5#4", "Asia/Jerusalem", "2026-03-01 00:00", []string{"2026-03-27T03:00:00+03:00"}},
	// A wildcard job follows real time: 02:xx of the 27th does not occur.
	{"*/20 2 L-4 3 *", "Asia/Jerusalem", "2026-03-27 00:00", []string{"2027-03-27T02:00:00+03:00", "2027-03-27T02:20:00+03:00"}},
	// The zone prefix overrides the default location.
	{"TZ=Asia/Tokyo 0 9 * * *", "Europe/Berlin", "2026-03-29 00:00", []string{"2026-03-29T09:00:00+09:00", "2026-03-30T09:00:00+09:00"}},
	{"CRON_TZ=Europe/Berlin 30 2 * * *", "UTC", "2026-03-28 12:00", []string{"2026-03-29T03:00:00+02:00"}},
}

func TestNext(t *testing.T) {
	for _, tc := range nextCases {
		t.Run(tc.zone+"/"+tc.spec+"/"+tc.from, func(t *testing.T) {
			loc := mustLoad(t, tc.zone)
			s, err := schedule.Parse(tc.spec, loc)
			if err != nil {
				t.Fatal(err)
			}
			from := parseFrom(t, tc.from, loc)
			var got []string
			for range tc.want {
				next := s.Next(from)
				if next.Location() != s.Location() {
					t.Errorf("Next(%s) location = %v, want %v", from, next.Location(), s.Location())
				}
				got = append(got, next.Format(time.RFC3339))
				from = next
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("from %s:\n got  %v\n want %v", tc.from, got, tc.want)
			}
		})
	}
}

// TestNextSubSecond checks that Next ignores the fraction of a second of t
// and the location t is in.
func TestNextSubSecond(t *testing.T) {
	loc := mustLoad(t, "Europe/Berlin")
	s, err := schedule.Parse("*/10 * * * * *", loc)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 29, 1, 59, 50, 0, loc)
	for _, from := range []time.Time{
		base.Add(-time.Nanosecond),
		base.Add(-500 * time.Millisecond).In(time.UTC),
		base.Add(-999999999 * time.Nanosecond).In(mustLoad(t, "Asia/Tokyo")),
	} {
		if got := s.Next(from); !got.Equal(base) {
			t.Errorf("Next(%s) = %s, want %s", from, got, base)
		}
	}
	if got, want := s.Next(base.Add(time.Nanosecond)), base.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Next(%s) = %s, want %s", base.Add(time.Nanosecond), got, want)
	}
	every, err := schedule.Parse("@every 1m", loc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := every.Next(base.Add(700*time.Millisecond)), base.Add(time.Minute); !got.Equal(want) {
		t.Errorf("@every: Next = %s, want %s", got, want)
	}
}

// TestNextOutOfRange checks that Next returns the zero time, and does not
// hang or overflow, for instants it does not support.
func TestNextOutOfRange(t *testing.T) {
	s, err := schedule.Parse("0 0 * * *", mustLoad(t, "Europe/Berlin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []time.Time{
		time.Date(100000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-100000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(1<<62, 0),
		time.Unix(-1<<62, 0),
	} {
		if got := s.Next(from); !got.IsZero() {
			t.Errorf("Next(%s) = %s, want zero", from, got)
		}
	}
	// The zero Time (year 1) is in range.
	if got := s.Next(time.Time{}); got.IsZero() || got.Year() != 1 {
		t.Errorf("Next(zero) = %s, want a time in year 1", got)
	}
}

func mustLoad(t testing.TB, zone string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// parseFrom parses an RFC 3339 time, or a local wall time that must occur
// exactly once in loc.
func parseFrom(t testing.TB, s string, loc *time.Location) time.Time {
	t.Helper()
	if ts, err := time.Parse(time.RFC3339, s); err == nil {
		return ts
	}
	layout := "2006-01-02 15:04"
	if len(s) > len(layout) {
		layout += ":05"
	}
	ts, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Format(layout) != s {
		t.Fatalf("local time %s does not exist in %s", s, loc)
	}
	for d := -3 * time.Hour; d <= 3*time.Hour; d += time.Minute {
		if d != 0 && ts.Add(d).Format(layout) == s {
			t.Fatalf("local time %s is ambiguous in %s: give an offset", s, loc)
		}
	}
	return ts
}

// TestConcurrentNext calls Next on one schedule from several goroutines; run
// with -race.
func TestConcurrentNext(t *testing.T) {
	s, err := schedule.Parse("*/15 * * * *", mustLoad(t, "Europe/Berlin"))
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)
	want := s.Next(s.Next(from))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if got := s.Next(s.Next(from)); !got.Equal(want) {
					t.Errorf("Next = %s, want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestZeroSchedule(t *testing.T) {
	var s schedule.Schedule
	if got := s.Next(time.Now()); !got.IsZero() {
		t.Errorf("zero Schedule: Next = %s, want zero", got)
	}
}
