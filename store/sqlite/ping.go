package sqlite

import "context"

// Ping reads the newest migration's version on a connection of the read
// pool: a read of a real page of the database file, which a store whose
// file or disk fails cannot answer. It never waits for the writer, so a
// long write transaction does not make the store look unreachable.
func (s *Store) Ping(ctx context.Context) error {
	var version int
	if err := s.read().queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return fail("ping", err)
	}
	return nil
}
