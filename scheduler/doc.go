// Package scheduler owns the engine of schedulerd: the tick enqueuer that
// turns cron schedules into runs exactly once per tick, the claimer and worker
// pool that executes runs, heartbeats, recovery of interrupted attempts,
// expiry of runs past their window, pruning of history, reload and shutdown.
//
// # Firing once in a cluster
//
// Every node runs the tick enqueuer for the cron jobs it declares; none is
// elected. A job's durable cursor (the newest tick handled) is advanced by
// compare-and-set in the same transaction that makes the runs of the ticks it
// covers, and each run's occurrence (job, scheduled time) is a permanent
// primary key. Of nodes racing for one tick, one advances the cursor; the
// others see the new cursor and plan from it. A lease-holding single enqueuer
// was the alternative: it would need its own lease, expiry and handover, and
// while a lease holder is paused or partitioned no node fires anything until
// the lease runs out. With compare-and-set there is nothing to hand over, a
// dead node costs no firing delay, and the unique key makes even a bug in the
// planning unable to fire a tick twice. The cost is a wasted transaction per
// lost race, one per tick per extra node, which is small at cron rates.
//
// Every timer loop reads time from an injected Clock, so tests of ticks,
// backoff and windows advance a schedulertest.FakeClock instead of sleeping.
package scheduler
