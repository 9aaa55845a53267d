package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationSource is where Migrate reads its migrations: the embedded files,
// or a broken set in tests.
var migrationSource fs.FS = embeddedMigrations

// loadMigrations reads and checks the migrations of fsys; see
// store.LoadMigrations.
func loadMigrations(fsys fs.FS) ([]store.Migration, error) { return store.LoadMigrations(fsys) }

// Migrate applies the migrations that the database lacks, each in its own
// transaction together with its schema_migrations row, and returns their
// numbers. Open calls it; calling it again applies nothing.
func (s *Store) Migrate(ctx context.Context) (applied []int, err error) {
	ms, err := loadMigrations(migrationSource)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var have int
	err = s.write(ctx, "migrate", func(c conn) error {
		_, err := c.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at INTEGER NOT NULL
		) STRICT`)
		if err != nil {
			return err
		}
		return c.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have)
	})
	if err != nil {
		return nil, err
	}
	if have > len(ms) {
		return nil, fmt.Errorf("migrate: database schema version %d is newer than this program knows (%d): upgrade schedulerd", have, len(ms))
	}
	for _, m := range ms[have:] {
		done := false
		err := s.write(ctx, "migrate "+m.Name, func(c conn) error {
			// Read inside the transaction: another process may migrate too.
			var have int
			if err := c.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
				return err
			}
			if have > len(ms) {
				return fmt.Errorf("database schema version %d is newer than this program knows (%d): upgrade schedulerd", have, len(ms))
			}
			if have >= m.Version {
				done = true
				return nil
			}
			if have != m.Version-1 {
				return fmt.Errorf("database schema version %d cannot take migration %d", have, m.Version)
			}
			if _, err := c.exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := c.exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.Version, time.Now().UnixMicro())
			return err
		})
		if err != nil {
			return applied, err
		}
		if !done {
			applied = append(applied, m.Version)
			s.logger.InfoContext(ctx, "applied migration", "version", m.Version, "name", m.Name)
		}
	}
	return applied, nil
}
