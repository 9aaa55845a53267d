// Package schedule owns cron schedule specs: it parses and validates them and
// computes their fire times with ISC (Vixie) cron time-zone and DST semantics.
//
// # Specs
//
// A spec is one of
//
//   - 5 fields: minute hour day-of-month month day-of-week;
//   - 6 fields: a leading seconds field, then the 5 above;
//   - a descriptor: @yearly, @annually, @monthly, @weekly, @daily, @midnight
//     or @hourly;
//   - "@every D" with D a Go duration of at least one second and a whole
//     number of seconds.
//
// Any of these may be preceded by "TZ=Zone " or "CRON_TZ=Zone ", which sets
// the schedule's location and overrides the default given to [Parse].
// "@reboot" is refused: it means "when cron starts", and a scheduler whose
// ticks are kept across restarts has no tick for that.
//
// # Fields
//
// Fields are read as crontab(5) documents them (cronie), and are parsed by
// github.com/robfig/cron/v3 after a stricter check of their syntax:
//
//   - A field is a comma-separated list of items: "*" (or "?"), a value, or
//     a range "a-b", each optionally followed by a step "/n"; "a/n" is
//     "a-max/n". Values are decimal numbers; months and days of week may
//     also be written as three-letter names in any case ("jan", "MON",
//     "Fri"). An empty item ("1,,5"), a comma at either end, a sign, a
//     missing number and a value out of range are errors.
//   - Day of week: 0 to 7, Sunday being 0 or 7, in ranges too ("5-7" is
//     Friday to Sunday, "7-2" Sunday to Tuesday).
//   - Wrap-around ranges, as in Cronos: a range whose start is after its end
//     goes on past the field's maximum and on from its minimum. "22-2" hours
//     is 22, 23, 0, 1, 2; "FRI-MON" is Friday to Monday; "NOV-FEB" and
//     "28-3" days of month (28 to 31, then 1 to 3, whatever the month's
//     length) likewise. A step is counted across the wrap: "45-15/2" minutes
//     is 45, 47, ... 59, 1, 3, ... 15.
//
// Day of month and day of week also take the day forms of Cronos (and
// Quartz), each alone in its field, in any case:
//
//   - "L": the last day of the month; "L-n" (n up to 30): n days before it,
//     in months that have such a day ("L-30" is the 1st of 31-day months).
//   - "nW": the weekday (Monday to Friday) nearest day n, in the same
//     month: a Saturday moves to the Friday before, or to Monday the 3rd when
//     it is the 1st; a Sunday to the Monday after, or to the Friday before
//     when it is the last day. In months without day n there is none: "31W"
//     never fires in April, and "0 0 31W 4 *" is refused like "0 0 31 4 *".
//     "LW" and "L-nW" are the weekday nearest the last day, or n days before.
//   - Day of week "dL": the last such day of the month ("5L", "FRIL": the
//     last Friday); "d#n" (n from 1 to 5): the nth ("5#3": the third Friday),
//     in months that have one. d is 0 to 7 or a name, numbered as in cron,
//     not as in Quartz (where 1 is Sunday): Quartz's "6L" is "5L" or "FRIL"
//     here. Quartz's "L" alone (Saturday) is refused.
//
// The day rule is cron's: when both day fields are restricted, a day matches
// if either matches; when either is written starting with "*" or "?" (so "*"
// and steps such as "*/2": crontab(5)'s "0 0 */2 * sun" runs on Sundays with
// an odd date), a day must match both. When either day field holds an L, W or
// # form, a day must match both, as in Cronos: "0 0 L * 5" is a last day of
// the month that is a Friday, and "0 0 13 * 5#2" a Friday the 13th. Plain day
// fields keep cron's either-matches rule, which Cronos does not follow:
// "0 0 13 * 5" is every Friday and every 13th, as in crontab.
//
// A spec with no fire time within 8 years (of 2024-01-01, and of now) is
// refused as never firing: "0 0 30 2 *", "0 0 L-30 2 *", "0 0 31W 4 *".
//
// # Time zones and DST
//
// A schedule follows the wall clock of its location. Fire times are computed
// here, not by robfig/cron, whose Next mishandles DST. Like ISC cron, a spec
// is either a wildcard job or a fixed-time job:
//
//   - Wildcard job: the minute or the hour field is written starting with "*"
//     (or "?"), as in "* 2 * * *", "*/15 * * * *", "30 * * * *", "0 */2 * * *"
//     and @hourly. It follows real time: it fires at every instant whose wall
//     clock matches. Wall times skipped by a spring-forward jump do not occur;
//     wall times repeated by a fall-back jump occur, and fire, twice.
//   - Fixed-time job: every other spec, e.g. "30 2 * * *", "0 0-23 * * *",
//     @daily, @weekly, @monthly, @yearly. Each matching wall time fires once,
//     at the first instant the wall clock reads that time or later: a time in
//     the repeated hour fires at its first occurrence only, and a time in a
//     skipped interval fires at the instant of the jump (e.g. 03:00 CEST for
//     "30 2 * * *" in Europe/Berlin on the spring-forward day). Several wall
//     times that map to one instant fire once.
//
// The seconds field plays no part in this classification, nor do the day
// fields: L, W and # choose days on the calendar, and their times map to
// instants by the same rules ("30 2 * 3 0L" in Europe/Berlin fires at 03:00
// CEST on the last Sunday of March, the day of the jump). "@every D" is not a
// calendar schedule: it fires D after the previous fire time, in real time,
// whatever the zone.
package schedule
