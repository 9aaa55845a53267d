package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerd/schedulerd/store"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationSource is where Migrate reads its migrations: the embedded files,
// or a broken set in tests.
var migrationSource fs.FS = embeddedMigrations

// Advisory lock keys, in the two-int4 key space, which never meets the
// one-bigint keys that other software may use: (lockSpace, lockMigrate)
// serializes migrations, (lockSpace+1, hash of a job name) the claims of a
// job with a concurrency limit.
const (
	lockSpace   int32 = 0x5343_4844 // "SCHD"
	lockMigrate int32 = 1
	lockJobs          = lockSpace + 1
)

// loadMigrations reads and checks the migrations of fsys; see
// store.LoadMigrations.
func loadMigrations(fsys fs.FS) ([]store.Migration, error) { return store.LoadMigrations(fsys) }

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
			if _, err := c.exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := c.exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.Name, err)
		}
		applied = append(applied, m.Version)
		s.logger.InfoContext(ctx, "applied migration", "version", m.Version, "name", m.Name)
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
