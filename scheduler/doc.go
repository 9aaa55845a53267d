// Package scheduler owns the engine of schedulerd: the tick enqueuer that
// turns cron schedules into runs exactly once per tick, the claimer and worker
// pool that executes runs, heartbeats, recovery of interrupted attempts,
// expiry of runs past their window, pruning of history, reload and shutdown.
//
// Every timer loop reads time from an injected Clock, so tests of ticks,
// backoff and windows advance a FakeClock instead of sleeping.
package scheduler
