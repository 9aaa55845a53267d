package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationSource is where Migrate reads its migrations: the embedded files,
// or a broken set in tests.
var migrationSource fs.FS = embeddedMigrations

// migrationName is the form of a migration file: 001_init.up.sql.
var migrationName = regexp.MustCompile(`^([0-9]+)_[a-z0-9_]+\.up\.sql$`)

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the migrations of fsys (in its migrations directory),
// numbered from 1 without gap or duplicate.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migration %s: name must look like 001_name.up.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		b, err := fs.ReadFile(fsys, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		switch {
		case i > 0 && m.version == ms[i-1].version:
			return nil, fmt.Errorf("migrations %s and %s have the same number %d", ms[i-1].name, m.name, m.version)
		case m.version != i+1:
			return nil, fmt.Errorf("migration %s: number %d follows %d: migrations are numbered from 1 without gaps", m.name, m.version, i)
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations")
	}
	return ms, nil
}

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
		err := s.write(ctx, "migrate "+m.name, func(c conn) error {
			// Read inside the transaction: another process may migrate too.
			var have int
			if err := c.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
				return err
			}
			if have > len(ms) {
				return fmt.Errorf("database schema version %d is newer than this program knows (%d): upgrade schedulerd", have, len(ms))
			}
			if have >= m.version {
				done = true
				return nil
			}
			if have != m.version-1 {
				return fmt.Errorf("database schema version %d cannot take migration %d", have, m.version)
			}
			if _, err := c.exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := c.exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.version, time.Now().UnixMicro())
			return err
		})
		if err != nil {
			return applied, err
		}
		if !done {
			applied = append(applied, m.version)
			s.logger.InfoContext(ctx, "applied migration", "version", m.version, "name", m.name)
		}
	}
	return applied, nil
}
