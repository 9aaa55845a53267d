package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/internal/proctest"
)

var srv *Server

func TestMain(m *testing.M) { os.Exit(Main(m, &srv)) }

func query(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func execSQL(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func TestNewDatabase(t *testing.T) {
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases with one DSN %s", a)
	}
	nameA, nameB := query(t, a, `SELECT current_database()`), query(t, b, `SELECT current_database()`)
	if nameA == nameB || nameA == "postgres" {
		t.Fatalf("databases %q and %q", nameA, nameB)
	}
	t.Run("dropped", func(t *testing.T) {
		srv.NewDatabase(t)
	})
	// The subtest's database is gone; ours stay until we end.
	if n := query(t, srv.DSN(), `SELECT count(*)::text FROM pg_database WHERE datname LIKE 'schedulerd_test_%'`); n != "2" && !srv.external {
		t.Fatalf("%s test databases, want 2", n)
	}
}

func TestSettings(t *testing.T) {
	srv.Require(t)
	if srv.external {
		t.Skip("an external server has its own settings")
	}
	for name, want := range map[string]string{
		"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
		"max_connections": "200", "listen_addresses": "127.0.0.1",
	} {
		if got := query(t, srv.DSN(), `SHOW `+name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(srv.dir, ".s.PGSQL."+query(t, srv.DSN(), `SHOW port`))); err != nil {
		t.Errorf("unix socket in the private directory: %v", err)
	}
}

func TestRestart(t *testing.T) {
	srv.Require(t)
	if srv.external {
		t.Skip("an external server is not ours to restart")
	}
	dsn := srv.NewDatabase(t)
	query(t, dsn, `SELECT 'ok'`)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	query(t, dsn, `SELECT 'ok'`)
	if err := srv.StopServer(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	if err := srv.StartServer(); err != nil {
		t.Fatal(err)
	}
	query(t, dsn, `SELECT 'ok'`)
}

// TestStartStop starts a second server next to the package's and stops it:
// nothing of it stays.
func TestStartStop(t *testing.T) {
	srv.Require(t)
	if srv.external {
		t.Skip("external server")
	}
	start := time.Now()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %s", time.Since(start).Round(time.Millisecond))
	if s.port == srv.port || s.dir == srv.dir {
		t.Fatalf("second server shares port %d or directory %s", s.port, s.dir)
	}
	query(t, s.DSN(), `SELECT 'ok'`)
	s.Stop()
	s.Stop()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("directory after Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, s.DSN()); err == nil {
		conn.Close(ctx)
		t.Fatal("connected after Stop")
	}
}

func TestDatabaseDSN(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/db1?sslmode=disable"},
		{"postgresql://h/x", "postgresql://h/db1"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=db1"},
	}
	for _, tc := range tests {
		if got := DatabaseDSN(tc.dsn, "db1"); got != tc.want {
			t.Errorf("DatabaseDSN(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

// TestEnableAutovacuum: a throwaway server starts without autovacuum, and
// EnableAutovacuum turns it on, also across a restart.
func TestEnableAutovacuum(t *testing.T) {
	srv.Require(t)
	if srv.external {
		t.Skip("an external server has its own settings")
	}
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if got := query(t, s.DSN(), `SHOW autovacuum`); got != "off" {
		t.Fatalf("autovacuum at start = %s, want off", got)
	}
	if err := s.EnableAutovacuum(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s.DSN(), `SHOW autovacuum`); got != "on" {
		t.Fatalf("autovacuum after EnableAutovacuum = %s, want on", got)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s.DSN(), `SHOW autovacuum`); got != "on" {
		t.Fatalf("autovacuum after a restart = %s, want on", got)
	}
}

// TestPairFailover: a pair's standby has every committed row, takes the
// writes once failed over to, and the old primary, rebuilt as its standby,
// follows it, so that a second failover keeps every row too.
func TestPairFailover(t *testing.T) {
	proctest.Long(t, "a primary and a standby started, failed over and rebuilt twice")
	srv.Require(t)
	p, err := StartPair()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	for _, sql := range []string{`SHOW synchronous_standby_names`, `SHOW synchronous_commit`} {
		if got := query(t, p.Primary().DSN(), sql); got != "*" && got != "on" {
			t.Fatalf("%s = %s on the primary", sql, got)
		}
	}
	if got := query(t, p.Primary().DSN(), `SELECT sync_state FROM pg_stat_replication`); got != "sync" {
		t.Fatalf("the standby's sync_state = %s, want sync", got)
	}
	execSQL(t, p.Primary().DSN(), `CREATE TABLE t (n int)`, `INSERT INTO t VALUES (1)`)
	dirs := map[string]bool{p.Primary().dir: true, p.Standby().dir: true}
	for round := 2; round <= 3; round++ {
		old := p.Primary()
		if err := p.Failover(); err != nil {
			t.Fatal(err)
		}
		if p.Primary() == old || p.Standby() != old {
			t.Fatal("Failover did not swap the servers")
		}
		// Every row committed on the old primary is on the new one, which
		// takes writes without a standby until Rebuild.
		if got := query(t, p.Primary().DSN(), `SELECT count(*)::text FROM t`); got != strconv.Itoa(round-1) {
			t.Fatalf("round %d: %s rows after the failover, want %d", round, got, round-1)
		}
		execSQL(t, p.Primary().DSN(), `INSERT INTO t VALUES (1)`)
		if err := p.Rebuild(); err != nil {
			t.Fatal(err)
		}
		if got := query(t, p.Standby().DSN(), `SELECT pg_is_in_recovery()::text`); got != "true" {
			t.Fatalf("round %d: the rebuilt server is not a standby", round)
		}
		if got := query(t, p.Primary().DSN(), `SELECT sync_state FROM pg_stat_replication`); got != "sync" {
			t.Fatalf("round %d: the rebuilt standby's sync_state = %s, want sync", round, got)
		}
	}
	if err := p.RestartPrimary(true); err != nil {
		t.Fatal(err)
	}
	if got := query(t, p.Primary().DSN(), `SELECT count(*)::text FROM t`); got != "3" {
		t.Fatalf("%s rows after a crash of the primary, want 3", got)
	}
	p.Stop()
	for dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("directory %s after Stop: %v", dir, err)
		}
	}
}

func TestStartWith(t *testing.T) {
	srv.Require(t)
	if srv.external {
		t.Skip("an external server has its own settings")
	}
	s, err := StartWith("shared_preload_libraries = 'pg_stat_statements'", "max_connections = 50")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if got := query(t, s.DSN(), `SHOW shared_preload_libraries`); got != "pg_stat_statements" {
		t.Errorf("shared_preload_libraries = %q", got)
	}
	if got := query(t, s.DSN(), `SHOW max_connections`); got != "50" {
		t.Errorf("max_connections = %s, want 50 (a setting replaces the default)", got)
	}
	if got := query(t, s.DSN(), `SHOW fsync`); got != "off" {
		t.Errorf("fsync = %s, want the defaults kept", got)
	}
}
