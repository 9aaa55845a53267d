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
// the schedule's location and overrides the default given to [Parse]. Field
// syntax (lists, ranges, steps, month and weekday names, "?") is that of
// github.com/robfig/cron/v3, which is used for parsing only, and so is the
// day rule: when both day-of-month and day-of-week are restricted (neither is
// "*" or "?"; a step such as "*/2" is a restriction), a day matches if either
// matches; otherwise it must match both.
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
// The seconds field plays no part in this classification. "@every D" is not a
// calendar schedule: it fires D after the previous fire time, in real time,
// whatever the zone.
package schedule
