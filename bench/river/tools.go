//go:build tools

// Package river pins the River CLI (riverqueue/river, the Go PostgreSQL
// job queue whose published throughput is the 45,000 runs/s target) that
// the benchmark builds and runs on the same server as a reference. It is
// a module of its own, so River is no dependency of schedulerd.
package river

import _ "github.com/riverqueue/river/cmd/river"
