// Package schedulertest holds what tests of the scheduler, and of programs
// that embed it, use in its place: FakeClock, a scheduler.Clock that moves
// only when told to.
package schedulertest
