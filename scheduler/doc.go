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
// # Words
//
// The loop (loop.go), the fires (fire.go), the claims (claim.go) and the
// tick queue (ticks.go) use these words in one sense each:
//
//   - tick: a time a cron schedule fires at. A job's cursor is the newest
//     tick it handled, fired or skipped. A job with jitter fires its tick at
//     the tick too; only the run's not_before is later (its start,
//     jobs.Definition.TickStart), and the run waits for it as any run does.
//   - fire: write the runs of jobs' ticks and move their cursors, in one
//     transaction for many jobs.
//   - due, early: a due tick's time has come; an early one is within its
//     lead, and is fired ahead.
//   - lead: how long before its tick a step is taken. FireLead: the tick
//     is fired then; ClaimLead: the run of a tick fired ahead is claimed
//     then, and its attempt starts at the tick. A large round gets more
//     lead, its round lead, in steps that follow the fire cost.
//   - ahead: before the tick. A tick fired ahead has its run written and
//     pending, and its cursor later than the clock; aheadTicks holds it
//     until the clock reaches the tick, and the tick is then reached.
//   - round: the jobs whose ticks fall at one time. A job queued for a
//     tick gets a rank in its round, which sets its round lead.
//   - part: a share of a large round reached, whose runs one claim takes,
//     so that the first attempts start after one claim, not after all.
//   - burst: an iteration that fires in more than one transaction, or
//     claims a round in parts. The results of attempts wait to be written
//     until it ends (resultQueue.burst), so that the writes that start
//     runs go first.
//   - iteration: one turn of the scheduling loop, a fixed list of steps
//     (iterate).
//
// Every timer loop reads time from an injected Clock, so tests of ticks,
// backoff and windows advance a schedulertest.FakeClock instead of sleeping.
package scheduler
