// Package rowscan owns the reading of rows that the two stores share: Rows,
// the one interface over pgx's rows and database/sql's, the loops that
// collect rows into values, and the decoders of the rows that both
// backends store alike (events, attempts, cursors, notifications, job
// results) but for the encoding of time, which each backend brings as a
// Time destination: a timestamptz in PostgreSQL, unix microseconds in
// SQLite.
//
// A run's row stays each backend's own: the claims read thousands of them
// at a time, each backend its cheapest way, and the two differ in more
// than time (PostgreSQL reads the few distinct names without a copy).
package rowscan
