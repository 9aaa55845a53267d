// Package jobs owns the domain of schedulerd: job definitions, run statuses and
// the one function that validates their transitions, run events, retry policy
// and backoff, start windows, and the named operations (Complete, FailAttempt,
// Expire, Cancel) that produce every change of a run's state.
//
// It imports no store and no scheduler: the store persists what this package
// decides, and the scheduler calls it.
package jobs
