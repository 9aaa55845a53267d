// Package model owns the reference model of one node's scheduling: a
// plain, slow statement of the documented rules (docs/configuration.md,
// docs/firing-ahead.md, docs/guarantees.md) that says, for a config and a
// timeline of events, which runs must exist, for which ticks, with which
// statuses, attempts and attempt starts, and how many ticks each job
// skipped.
//
// It is written from the documentation, not from the engine: it reads the
// declared jobs (jobs.Definition, the validated config) but computes
// windows, jitter delays, catch-up, overlap, retries and claims itself.
// The simulator (scheduler/sim_test.go) runs the real engine on a fake
// clock through the same timeline and compares the store's history with
// what the model says.
//
// The model moves from instant to instant. At each instant it applies, in
// order: the attempts that end (or time out) and the attempts claimed
// ahead whose tick has come; the ticks that are due, then those due
// within the fire lead; the claims ahead of the ticks due within the
// claim lead; the claims of due runs; the expiry of runs past their
// not_after; and then the event of the timeline at that instant, if any,
// after which the engine's steps run again. Where the documented rules
// leave an instant's outcome to chance (two things the engine does at
// once whose order decides the outcome), the model says so
// (Result.Ambiguous) rather than guess: the simulator then draws another
// timeline.
package model
