// Package config owns the schedulerd config file: it turns strict TOML into
// validated daemon settings and job definitions, or into errors that name the
// file, the line and the key of every problem.
//
// A file has three sections: [daemon] for the settings of this node,
// [defaults] for job settings that every job takes unless it sets its own,
// and one [[job]] table per job. Unknown keys, wrong types, bare numbers as
// durations and values out of range are errors; a file with any error yields
// no config at all, so a reload either applies a whole file or nothing.
//
// Durations are Go duration strings ("90s", "2h"). Times (at, not_before,
// not_after) are TOML datetimes: one with an offset is absolute, and a local
// one (no offset) is read in the job's timezone.
package config
