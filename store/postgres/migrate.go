package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationSource is where Migrate reads its migrations: the embedded files,
// or a broken set in tests.
var migrationSource fs.FS = embeddedMigrations

// migrationName is the form of a migration file: 001_init.up.sql.
var migrationName = regexp.MustCompile(`^([0-9]+)_[a-z0-9_]+\.up\.sql$`)

// Advisory lock keys, in the two-int4 key space, which never meets the
// one-bigint keys that other software may use: (lockSpace, lockMigrate)
// serializes migrations, (lockSpace+1, hash of a job name) the claims of a
// job with a concurrency limit.
const (
	lockSpace   int32 = 0x5343_4844 // "SCHD"
	lockMigrate int32 = 1
	lockJobs          = lockSpace + 1
)

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
// numbers. It holds a session advisory lock meanwhile, so nodes that start
// together migrate one after the other: the first applies, the others find
// nothing left to do. Open calls it; calling it again applies nothing.
func (s *Store) Migrate(ctx context.Context) (applied []int, err error) {
	ms, err := loadMigrations(migrationSource)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer pc.Release()
	c := &conn{q: pc, n: &s.statements}
	if _, err := c.exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockSpace, lockMigrate); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		_, uerr := c.exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, $2)`, lockSpace, lockMigrate)
		if uerr != nil {
			// The lock ends with the session: end the session.
			_ = pc.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	_, err = c.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var have, rows int
	if err := c.queryRow(ctx, `SELECT COALESCE(MAX(version), 0), COUNT(*) FROM schema_migrations`).Scan(&have, &rows); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	switch {
	case have > len(ms):
		return nil, fmt.Errorf("migrate: database schema version %d is newer than this program knows (%d): upgrade schedulerd", have, len(ms))
	case rows != have:
		return nil, fmt.Errorf("migrate: schema_migrations has %d rows up to version %d: the schema is damaged", rows, have)
	}
	for _, m := range ms[have:] {
		err := s.sessionTx(ctx, pc, func(c *conn) error {
			if _, err := c.exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := c.exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.name, err)
		}
		applied = append(applied, m.version)
		s.logger.InfoContext(ctx, "applied migration", "version", m.version, "name", m.name)
	}
	return applied, nil
}

// sessionTx runs fn in one transaction on the pooled connection pc.
func (s *Store) sessionTx(ctx context.Context, pc *pgxpool.Conn, fn func(c *conn) error) error {
	s.statements.Add(1)
	tx, err := pc.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(&conn{q: tx, n: &s.statements}); err != nil {
		s.statements.Add(1)
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	s.statements.Add(1)
	return tx.Commit(ctx)
}
