// Package storetest owns the conformance suite of store.Store: the behaviour
// that every backend (store/sqlite, store/postgres) must show, run against a
// real database by each backend's tests through Run.
//
// The suite pins every Now so that windows, backoff and ages are exact, and
// it checks the guarantees the store enforces itself: one run per occurrence,
// one active run per dedup id, atomic claims that honour concurrency limits,
// fenced writes about attempts, and validated, recorded transitions.
package storetest
