package config

import "slices"

// Keys returns the keys of each table of a config file, by table:
// "daemon"; "job", every key of a [[job]]; "defaults", those of them that
// [defaults] takes too; "retry", those of a retry table; "token", those of
// a [[token]]. The reference pages are checked against them.
func Keys() map[string][]string {
	return map[string][]string{
		"daemon":   slices.Clone(daemonKeys),
		"job":      slices.Clone(jobKeys),
		"defaults": slices.Clone(settingKeys),
		"retry":    slices.Clone(retryKeys),
		"token":    slices.Clone(tokenKeys),
	}
}
