package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerd/schedulerd/internal/pgtest"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// Store kinds.
const (
	kindSQLite   = "sqlite"
	kindPostgres = "postgres"
)

// storeName is how the report names a store kind.
func storeName(kind string) string {
	if kind == kindPostgres {
		return "PostgreSQL"
	}
	return "SQLite"
}

// env is what the sections share: a private temporary directory, the
// PostgreSQL server (started on first use), the daemon binary (built on
// first use), the options and the report.
type env struct {
	opts   options
	rep    *Report
	dir    string // private temporary directory, removed at the end
	root   string // module root
	mu     sync.Mutex
	pg     *pgtest.Server
	pgErr  error
	bin    string
	binErr error
	// riverBin is the River CLI (riverref.go), built on first use.
	riverBin riverBuild
	riverErr error
	seq      int
	// results are figures that a later section uses (pgbench compares
	// with the throughput).
	results map[string]float64
}

// setResult records a figure for later sections.
func (e *env) setResult(key string, v float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.results == nil {
		e.results = map[string]float64{}
	}
	e.results[key] = v
}

// result returns a figure recorded by an earlier section.
func (e *env) result(key string) (float64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.results[key]
	return v, ok
}

// sqliteVersion returns the version of the SQLite library the stores use.
func sqliteVersion(ctx context.Context) string {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return ""
	}
	defer db.Close()
	var v string
	if db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v) != nil {
		return ""
	}
	return v
}

// newEnv makes the temporary directory.
func newEnv(opts options, rep *Report) (*env, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "schedulerd-bench-")
	if err != nil {
		return nil, err
	}
	return &env{opts: opts, rep: rep, dir: dir, root: root}, nil
}

// close stops the PostgreSQL server and removes the temporary directory.
func (e *env) close() {
	e.pg.Stop()
	_ = os.RemoveAll(e.dir)
}

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the benchmark from the repository")
		}
		dir = parent
	}
}

// name returns a fresh name with the given prefix (databases, directories).
func (e *env) name(prefix string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	return fmt.Sprintf("%s_%d", prefix, e.seq)
}

// subdir makes a fresh directory under the temporary directory.
func (e *env) subdir(prefix string) (string, error) {
	d := filepath.Join(e.dir, e.name(prefix))
	return d, os.MkdirAll(d, 0o755)
}

// postgres starts the PostgreSQL server on first use, as the tests do
// (pgtest.Start: a throwaway server from `pg_config --bindir`, or
// $SCHEDULERD_TEST_POSTGRES), with autovacuum on as on a real server.
func (e *env) postgres() (*pgtest.Server, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pg == nil && e.pgErr == nil {
		e.pg, e.pgErr = pgtest.Start()
		if e.pgErr != nil {
			e.pgErr = fmt.Errorf("start postgresql: %w", e.pgErr)
		} else if err := e.pg.EnableAutovacuum(); err != nil {
			// The sections write for minutes: without autovacuum their
			// claims would walk the dead index entries of every run.
			e.pg.Stop()
			e.pg, e.pgErr = nil, fmt.Errorf("start postgresql: enable autovacuum: %w", err)
		}
	}
	return e.pg, e.pgErr
}

// newDatabase creates an empty database and returns its DSN.
func (e *env) newDatabase(ctx context.Context, prefix string) (string, error) {
	srv, err := e.postgres()
	if err != nil {
		return "", err
	}
	name := e.name("bench_" + prefix)
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return pgtest.DatabaseDSN(srv.DSN(), name), nil
}

// dropDatabase drops a database made by newDatabase (best effort: it
// frees the disk of the large sections).
func (e *env) dropDatabase(ctx context.Context, dsn string) {
	srv, err := e.postgres()
	if err != nil {
		return
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return
	}
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{cfg.Database}.Sanitize()+` WITH (FORCE)`)
}

// daemon builds the schedulerd binary on first use, as `make build` does.
func (e *env) daemon() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bin == "" && e.binErr == nil {
		e.bin, e.binErr = e.goBuild(e.root, "schedulerd", "-trimpath", "./cmd/schedulerd")
		if e.binErr != nil {
			e.binErr = fmt.Errorf("build schedulerd: %w", e.binErr)
		}
	}
	return e.bin, e.binErr
}

// goBuild builds a Go program in dir, as `go build args` with
// CGO_ENABLED=0, into the bench directory under name, and returns its
// path.
func (e *env) goBuild(dir, name string, args ...string) (string, error) {
	bin := filepath.Join(e.dir, name)
	cmd := exec.Command("go", append([]string{"build", "-o", bin}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %s", err, tail(out))
	}
	return bin, nil
}

// backend is one database of one store kind: it opens store handles on it
// (several for PostgreSQL, one node each) and inspects it with plain SQL.
type backend struct {
	kind string
	name string // SQLite or PostgreSQL
	dsn  string // PostgreSQL
	path string // SQLite file
	db   *inspector
	e    *env
}

// newBackend makes a fresh database of the given kind.
func (e *env) newBackend(ctx context.Context, kind, prefix string) (*backend, error) {
	b := &backend{kind: kind, name: storeName(kind), e: e}
	switch kind {
	case kindPostgres:
		dsn, err := e.newDatabase(ctx, prefix)
		if err != nil {
			return nil, err
		}
		b.dsn = dsn
	default:
		dir, err := e.subdir(prefix)
		if err != nil {
			return nil, err
		}
		b.path = filepath.Join(dir, "schedulerd.db")
	}
	// Migrate first, so that the inspector finds the schema.
	st, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	_ = st.Close()
	if b.db, err = openInspector(ctx, b); err != nil {
		return nil, err
	}
	return b, nil
}

// open opens a store handle: what one node uses.
func (b *backend) open(ctx context.Context) (store.Store, error) {
	if b.kind == kindPostgres {
		return postgres.Open(ctx, postgres.Options{DSN: b.dsn})
	}
	return sqlite.Open(ctx, sqlite.Options{Path: b.path, Lock: true})
}

// close closes the inspector and, for PostgreSQL, drops the database.
func (b *backend) close(ctx context.Context) {
	b.db.close()
	if b.kind == kindPostgres {
		b.e.dropDatabase(ctx, b.dsn)
	} else {
		_ = os.RemoveAll(filepath.Dir(b.path))
	}
}

// storeDaemonConfig is the [daemon] store lines of a node on this backend.
func (b *backend) storeDaemonConfig(stateDir string) string {
	if b.kind == kindPostgres {
		return fmt.Sprintf("store = %q\nstate_dir = %q\n", b.dsn, stateDir)
	}
	return fmt.Sprintf("store = %q\nstate_dir = %q\n", b.path, stateDir)
}

// statementCounter is implemented by both stores.
type statementCounter interface{ Statements() int64 }

// statements returns the statement counter of a store handle, or -1.
func statements(st store.Store) int64 {
	if c, ok := st.(statementCounter); ok {
		return c.Statements()
	}
	return -1
}

// inspector reads and seeds a backend's database with plain SQL, outside
// the store: the correctness checks read what was committed.
type inspector struct {
	kind string
	sql  *sql.DB       // SQLite
	pg   *pgxpool.Pool // PostgreSQL
}

func openInspector(ctx context.Context, b *backend) (*inspector, error) {
	i := &inspector{kind: b.kind}
	var err error
	if b.kind == kindPostgres {
		i.pg, err = pgxpool.New(ctx, b.dsn)
		return i, err
	}
	i.sql, err = sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(30000)&_pragma=foreign_keys(1)")
	if err != nil {
		return nil, err
	}
	i.sql.SetMaxOpenConns(1)
	return i, nil
}

func (i *inspector) close() {
	if i == nil {
		return
	}
	if i.pg != nil {
		i.pg.Close()
	}
	if i.sql != nil {
		_ = i.sql.Close()
	}
}

// bind turns the ? placeholders of q into $n for PostgreSQL.
func (i *inspector) bind(q string) string {
	if i.kind != kindPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// t is a time as a query argument in the stored form.
func (i *inspector) t(t time.Time) any {
	if i.kind == kindPostgres {
		return t.UTC()
	}
	return t.UnixMicro()
}

// micros is an SQL expression for a time column as unix microseconds.
func (i *inspector) micros(col string) string {
	if i.kind == kindPostgres {
		return "(extract(epoch FROM " + col + ") * 1000000)::bigint"
	}
	return col
}

// exec runs a statement.
func (i *inspector) exec(ctx context.Context, q string, args ...any) error {
	q = i.bind(q)
	if i.pg != nil {
		_, err := i.pg.Exec(ctx, q, args...)
		return err
	}
	_, err := i.sql.ExecContext(ctx, q, args...)
	return err
}

// int returns the single integer a query answers.
func (i *inspector) int(ctx context.Context, q string, args ...any) (int64, error) {
	q = i.bind(q)
	var n sql.NullInt64
	var err error
	if i.pg != nil {
		err = i.pg.QueryRow(ctx, q, args...).Scan(&n)
	} else {
		err = i.sql.QueryRowContext(ctx, q, args...).Scan(&n)
	}
	return n.Int64, err
}

// rows calls scan for each row of a query whose columns are all integers
// or strings; scan gets them as []any of int64 or string.
func (i *inspector) rows(ctx context.Context, q string, args []any, scan func(cols []any) error) error {
	q = i.bind(q)
	if i.pg != nil {
		rows, err := i.pg.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			for k, v := range vals {
				switch x := v.(type) {
				case int32:
					vals[k] = int64(x)
				case int16:
					vals[k] = int64(x)
				}
			}
			if err := scan(vals); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	rows, err := i.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for k := range vals {
			ptrs[k] = &vals[k]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for k, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[k] = string(b)
			}
		}
		if err := scan(vals); err != nil {
			return err
		}
	}
	return rows.Err()
}

// statusCounts returns the number of runs per status, for the runs that
// match where (an SQL condition on runs; "" for all).
func (i *inspector) statusCounts(ctx context.Context, where string, args ...any) (map[string]int64, error) {
	q := `SELECT status, COUNT(*) FROM runs`
	if where != "" {
		q += ` WHERE ` + where
	}
	q += ` GROUP BY status`
	out := map[string]int64{}
	err := i.rows(ctx, q, args, func(c []any) error {
		out[c[0].(string)] = c[1].(int64)
		return nil
	})
	return out, err
}
