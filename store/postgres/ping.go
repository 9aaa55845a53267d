package postgres

import "context"

// Ping sends SELECT 1 through the main pool, the connections that claims,
// fires and transitions use: it fails when the server is down or
// unreachable, or when no connection of the pool frees up before ctx ends.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.read().queryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fail("ping", err)
	}
	return nil
}
