// Package store owns the persistence contract of schedulerd: the Store
// interface that the engine and the control socket use, its sentinel errors,
// and the parameter types. Backends live in store/sqlite and store/postgres;
// store/storetest is the conformance suite both must pass.
//
// A store speaks in jobs types and enforces what the engine must never be
// trusted to do alone: one run per occurrence (job, scheduled time), one
// non-terminal run per dedup id, atomic claims, and fenced writes about
// attempts. Every status change goes through jobs.ValidateTransition inside
// the transaction that writes it, together with its run event.
package store
