// Package rowscan owns the reading of rows that the two stores share: Rows,
// the one interface over pgx's rows and database/sql's, and the loops that
// collect rows into values.
package rowscan
