package rowscan

import (
	"database/sql"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Rows is a query's result, row by row: pgx.Rows as it is, *sql.Rows
// through SQL.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Scanner reads one row: a pgx.Row, a *sql.Row, or Rows at a row.
type Scanner interface {
	Scan(dest ...any) error
}

// SQL returns the result of a database/sql query as Rows, with the
// query's error.
func SQL(rows *sql.Rows, err error) (Rows, error) {
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// sqlRows is *sql.Rows as Rows. Its Close drops the error of
// (*sql.Rows).Close, as a deferred Close does: a failure while reading
// is in Err.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// All reads every row with scan, in order, and closes rows; err, the
// query's error, is returned as it is. No row is a nil slice.
func All[T any](rows Rows, err error, scan func(Scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// String reads a row of one text column.
func String(row Scanner) (string, error) {
	var s string
	err := row.Scan(&s)
	return s, err
}

// RunCounts reads rows of a status and a count into the counts of
// store.Store's RunsCount (from store.NewRunCounts), and closes rows.
func RunCounts(rows Rows, err error) (map[jobs.Status]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := store.NewRunCounts()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[jobs.Status(st)] += n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
