// Package postgres owns the shared store of a schedulerd cluster: a
// PostgreSQL database (github.com/jackc/pgx/v5) that implements store.Store
// and store.Notifier for several nodes at once, its numbered migrations, and
// the wakeups that LISTEN/NOTIFY brings to idle nodes.
//
// Every write method is one transaction at READ COMMITTED, retried a few
// times on a serialization failure or a deadlock. What the engine must never
// be trusted to do alone is enforced by the schema and by row locks: one run
// per occurrence (a permanent primary key), one non-terminal run per dedup
// id (a partial unique index), claims with FOR UPDATE SKIP LOCKED, per-job
// concurrency limits under a per-job advisory lock, fenced transitions under
// the run's row lock, and cursor compare-and-set under the cursor's row lock.
//
// Times compared for windows, leases and liveness are the database's: a zero
// Now stands for now(), the start of the transaction on the server.
package postgres
