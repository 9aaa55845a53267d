// Package sqlite owns the single-machine store of schedulerd: an embedded
// SQLite database (modernc.org/sqlite, pure Go) that implements store.Store,
// its numbered migrations, and the lock file that keeps a second daemon off
// the same state directory.
//
// The database runs in WAL mode with one writer connection whose
// transactions take the write lock up front (BEGIN IMMEDIATE), and a small
// pool of read-only connections for queries. Every write method is one
// transaction; uniqueness that the engine relies on (occurrences, dedup ids)
// is enforced by the schema, not only by the code path.
package sqlite
