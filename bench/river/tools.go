//go:build tools

// Package river pins River (riverqueue/river, the Go PostgreSQL job queue)
// whose own benchmark, `river bench`, figure 1 runs on the same server as
// schedulerd's burn-downs, taking turns with them. It is a module of its
// own, so River is no dependency of schedulerd.
//
// The CLI module (cmd/river, which holds `river bench`) is released less
// often than River itself: this module requires the newest CLI that the
// Go module proxy serves and raises River's library, its drivers and its
// shared packages to River's newest release above the CLI's own
// requirement, so that the benchmark works River's newest client,
// producer and completer. The bench reads both versions from here.
package river

import (
	_ "github.com/riverqueue/river"
	_ "github.com/riverqueue/river/cmd/river"
	_ "github.com/riverqueue/river/riverdriver/riverpgxv5"
)
