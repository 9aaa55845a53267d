package main

import (
	"os"
	"runtime"
	"runtime/debug"
)

// gcHeadroom is how far the heap may grow beyond the live heap between
// collections, when that is less than Go's default of doubling.
const gcHeadroom = 16 << 20

// settleMemory runs after the jobs of a config are in force (start and
// every reload). It hands back the garbage of parsing the config, and sets
// the collector's target from the live heap: most of a large daemon's heap
// is its job definitions, which stay until the next reload, and Go's
// default (GOGC=100) lets a daemon with many jobs double its heap between
// collections, its resident memory rising slowly until the next one.
// GOGC or GOMEMLIMIT set in the environment are left in charge.
func settleMemory() {
	debug.FreeOSMemory()
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms) // right after a collection: HeapAlloc is live
	debug.SetGCPercent(gcPercent(ms.HeapAlloc))
}

// leanGCPercent is the collector's target while a config is parsed and
// put in force, until settleMemory. Most of what that allocates is soon
// garbage (the TOML decoder's tree, the store's statements for every job),
// and under Go's default the heap doubled over it: a large daemon's peak
// while starting was several times what it holds once running (the
// figures are in the commit that added it: ac47a07).
const leanGCPercent = 25

// leanGC sets the collector's target to leanGCPercent, unless GOGC or
// GOMEMLIMIT are set in the environment; settleMemory sets the target for
// the running daemon.
func leanGC() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(leanGCPercent)
	}
}

// gcPercent is the GOGC that lets a live heap of the given size grow by
// gcHeadroom, within [25, 100]: small daemons keep Go's default.
func gcPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	return int(min(100, max(25, gcHeadroom*100/live)))
}
