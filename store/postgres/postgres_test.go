package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/schedulerd/schedulerd/internal/pgtest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// srv is the package's PostgreSQL server; nil when there is none (the
// tests then skip, except on CI).
var srv *pgtest.Server

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &srv)) }

// openTest opens a store on a fresh database, closed when the test ends,
// and returns it with the database's DSN.
func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := srv.NewDatabase(t)
	return openDSN(t, dsn, Options{}), dsn
}

// openDSN opens another store on dsn, closed when the test ends.
func openDSN(t *testing.T, dsn string, opts Options) *Store {
	t.Helper()
	opts.DSN = dsn
	s, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// admin runs statements on dsn outside any store.
func admin(t *testing.T, dsn string, sqls ...string) {
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

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func manual(job string) store.RunInsertParams {
	return store.RunInsertParams{Job: job, Trigger: jobs.TriggerManual, ScheduledAt: t0, Retry: jobs.DefaultRetry, Now: t0}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTest(t)
		return s
	})
}

// TestClaimLimitAcrossStores: nodes with pools of their own keep a job's
// concurrency limit while they claim at once.
func TestClaimLimitAcrossStores(t *testing.T) {
	_, dsn := openTest(t)
	var stores []store.Store
	for range 3 {
		stores = append(stores, openDSN(t, dsn, Options{MaxConns: 4}))
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	storetest.ClaimLimitRace(ctx, t, stores, 9)
}

func TestMigrateConcurrentOpens(t *testing.T) {
	dsn := srv.NewDatabase(t)
	const n = 5
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), Options{DSN: dsn}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	want, err := loadMigrations(embeddedMigrations)
	if err != nil {
		t.Fatal(err)
	}
	var rows, max int
	if err := stores[0].pool.QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != len(want) || max != len(want) {
		t.Fatalf("schema_migrations: %d rows up to %d, want %d", rows, max, len(want))
	}
	applied, err := stores[1].Migrate(t.Context())
	if err != nil || len(applied) != 0 {
		t.Fatalf("Migrate on a migrated database = %v, %v", applied, err)
	}
}

// withMigrations replaces the migration source for one test.
func withMigrations(t *testing.T, fsys fstest.MapFS) {
	old := migrationSource
	migrationSource = fsys
	t.Cleanup(func() { migrationSource = old })
}

func TestMigrationSetErrors(t *testing.T) {
	good := "CREATE TABLE t1 (x integer);"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"gap", map[string]string{"migrations/001_a.up.sql": good, "migrations/003_c.up.sql": good}, "without gaps"},
		{"duplicate", map[string]string{"migrations/001_a.up.sql": good, "migrations/001_b.up.sql": good}, "same number"},
		{"not from one", map[string]string{"migrations/002_b.up.sql": good}, "without gaps"},
		{"bad name", map[string]string{"migrations/001_a.up.sql": good, "migrations/two.sql": good}, "name must look like"},
	}
	dsn := srv.NewDatabase(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, body := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(body)}
			}
			withMigrations(t, fsys)
			_, err := Open(t.Context(), Options{DSN: dsn})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestMigrationFailureRollsBack(t *testing.T) {
	dsn := srv.NewDatabase(t)
	withMigrations(t, fstest.MapFS{
		"migrations/001_a.up.sql": {Data: []byte("CREATE TABLE t1 (x integer);")},
		"migrations/002_b.up.sql": {Data: []byte("CREATE TABLE t2 (x integer); SELECT no_such_function();")},
	})
	_, err := Open(t.Context(), Options{DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "002_b.up.sql") {
		t.Fatalf("Open with a broken migration: %v", err)
	}
	withMigrations(t, fstest.MapFS{
		"migrations/001_a.up.sql": {Data: []byte("CREATE TABLE t1 (x integer);")},
		"migrations/002_b.up.sql": {Data: []byte("CREATE TABLE t2 (x integer);")},
	})
	s := openDSN(t, dsn, Options{})
	applied, err := s.Migrate(t.Context())
	if err != nil || len(applied) != 0 {
		t.Fatalf("Migrate = %v, %v", applied, err)
	}
	// A newer database than the program is refused.
	withMigrations(t, fstest.MapFS{"migrations/001_a.up.sql": {Data: []byte("CREATE TABLE t1 (x integer);")}})
	if _, err := s.Migrate(t.Context()); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Migrate with fewer migrations than applied: %v", err)
	}
}

// waitWakeup waits up to d for a wakeup of s.
func waitWakeup(s *Store, d time.Duration) bool {
	select {
	case <-s.Wakeups():
		return true
	case <-time.After(d):
		return false
	}
}

// drain empties the wakeup channel of s.
func drain(s *Store) {
	for {
		select {
		case <-s.Wakeups():
		default:
			return
		}
	}
}

func waitListening(t *testing.T, s *Store) {
	t.Helper()
	select {
	case <-s.listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not connect")
	}
}

// TestWakeups: a write on one node that makes runs due wakes another.
func TestWakeups(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn, Options{})
	waitListening(t, b)
	ctx := t.Context()

	drain(b)
	run, err := a.RunInsert(ctx, manual("report"))
	if err != nil {
		t.Fatal(err)
	}
	if !waitWakeup(b, time.Second) {
		t.Fatal("RunInsert on one store did not wake the other within a second")
	}

	// A claim makes nothing due: no wakeup.
	claimed, err := a.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(map[string]int{"report": 0}), Limit: 1, Now: t0})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("RunsClaim = %v, %v", claimed, err)
	}
	if waitWakeup(b, 300*time.Millisecond) {
		t.Fatal("a claim woke the other store")
	}
	// The end of an attempt frees a slot and makes a retry.
	res := jobs.Result{ExitCode: new(int), Err: errors.New("exit status 1")}
	*res.ExitCode = 1
	if _, err := a.RunTransition(ctx, jobs.FailAttempt(claimed[0], jobs.Fence{RunID: run.ID, Attempt: 1, Incarnation: "i"},
		"n", res, jobs.ReasonFailed, t0, nil)); err != nil {
		t.Fatal(err)
	}
	if !waitWakeup(b, time.Second) {
		t.Fatal("a retry did not wake the other store")
	}
	// A fire that makes runs.
	if _, err := a.ScheduleFire(ctx, store.FireParams{Job: "tick", Cursor: t0, Overlap: jobs.OverlapAllow, Now: t0,
		Runs: []store.RunInsertParams{{ScheduledAt: t0, Retry: jobs.DefaultRetry}, {ScheduledAt: t0.Add(-time.Minute), Retry: jobs.DefaultRetry}}}); err != nil {
		t.Fatal(err)
	}
	if !waitWakeup(b, time.Second) {
		t.Fatal("a fire did not wake the other store")
	}
}

// TestReconnect: after the server restarts, and after an outage, the same
// Store works again without being reopened, and so do its wakeups; its
// result feed reports that it may have missed results.
func TestReconnect(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn, Options{})
	waitListening(t, b)
	ctx := t.Context()
	if _, err := a.RunInsert(ctx, manual("before")); err != nil {
		t.Fatal(err)
	}
	if err := a.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "none", Incarnation: "none"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of an unknown node: %v", err)
	}
	if err := srv.Restart(); err != nil {
		t.Skip(err)
	}
	works := func(what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			_, err := a.RunInsert(ctx, manual(what))
			if err == nil {
				err = a.NodeHeartbeat(ctx, store.NodeHeartbeatParams{ID: "none", Incarnation: "none"})
				if errors.Is(err, store.ErrNotFound) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the store does not work again: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	works("after-restart")
	// The listener is back: it says so with a wakeup, then relays others.
	if !waitWakeup(b, 10*time.Second) {
		t.Fatal("no wakeup after the listener reconnected")
	}
	// Results committed while it was away are read again.
	if _, missed := b.ResultFeed().Take(); !missed {
		t.Fatal("the result feed did not report missed results after the listener reconnected")
	}
	drain(b)
	if _, err := a.RunInsert(ctx, manual("wake")); err != nil {
		t.Fatal(err)
	}
	if !waitWakeup(b, time.Second) {
		t.Fatal("no wakeup after the restart")
	}

	// An outage: operations fail (they do not hang), and work again after.
	if err := srv.StopServer(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := a.RunInsert(short, manual("outage"))
	cancel()
	if err == nil {
		t.Fatal("RunInsert succeeded with the server stopped")
	}
	if err := srv.StartServer(); err != nil {
		t.Fatal(err)
	}
	works("after-outage")
	runs, err := a.RunsList(ctx, store.RunFilter{})
	if err != nil || len(runs) < 4 {
		t.Fatalf("runs after the outage: %d, %v", len(runs), err)
	}
}

// TestReadOnlyServer: a store refuses connections to a server that takes
// no writes, with an error that says so, and recovers when it takes them
// again.
func TestReadOnlyServer(t *testing.T) {
	dsn := srv.NewDatabase(t)
	db := dbName(t, dsn)
	admin(t, srv.DSN(), `ALTER DATABASE `+db+` SET default_transaction_read_only = on`)
	_, err := Open(t.Context(), Options{DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "read-only") || !errors.Is(err, errReadOnly) {
		t.Fatalf("Open on a read-only server: %v", err)
	}
	t.Logf("Open on a read-only server: %v", err)

	// A store already open: its connections are ended (a failover), the
	// new ones land on a read-only server, then on a writable one.
	admin(t, srv.DSN(), `ALTER DATABASE `+db+` SET default_transaction_read_only = off`)
	s := openDSN(t, dsn, Options{})
	admin(t, srv.DSN(), `ALTER DATABASE `+db+` SET default_transaction_read_only = on`,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '`+db+`' AND pid <> pg_backend_pid()`)
	// The first tries may meet the ended connections; the pool drops
	// them and connects again.
	for try := 1; ; try++ {
		_, err := s.RunInsert(t.Context(), manual("x"))
		if errors.Is(err, errReadOnly) {
			break
		}
		if err == nil || try == 10 {
			t.Fatalf("RunInsert on a read-only server, try %d: %v", try, err)
		}
	}
	admin(t, srv.DSN(), `ALTER DATABASE `+db+` SET default_transaction_read_only = off`)
	if _, err := s.RunInsert(t.Context(), manual("x")); err != nil {
		t.Fatalf("RunInsert once the server is writable: %v", err)
	}
}

// TestReadOnlyConnectionDropped: a connection whose writes fail because
// the server takes none is closed, not given out again.
func TestReadOnlyConnectionDropped(t *testing.T) {
	_, dsn := openTest(t)
	s := openDSN(t, dsn, Options{MaxConns: 1})
	ctx := t.Context()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SET SESSION default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	c.Release()
	_, err = s.RunInsert(ctx, manual("x"))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Fatalf("RunInsert on a read-only session: %v", err)
	}
	if _, err := s.RunInsert(ctx, manual("x")); err != nil {
		t.Fatalf("RunInsert on the next connection: %v", err)
	}
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// TestPasswordsHidden: no error of Open and no log line shows a password.
func TestPasswordsHidden(t *testing.T) {
	const secret = "s3cret-Pa55word"
	srv.Require(t)
	dsn := srv.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	withPassword := strings.Replace(dsn, "postgres://postgres@", "postgres://postgres:"+secret+"@", 1)
	if withPassword == dsn {
		t.Skip("the test server's DSN is not a postgres://user@ URL")
	}
	var logs safeBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The trust authentication of the test server ignores the password:
	// these open.
	s, err := Open(t.Context(), Options{DSN: withPassword, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(logs.String(), "xxxxx") {
		t.Errorf("the log does not show the redacted DSN:\n%s", logs.String())
	}

	failing := []string{
		fmt.Sprintf("postgres://u:%s@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", secret),
		fmt.Sprintf("host=127.0.0.1 port=1 user=u password=%s dbname=db sslmode=disable connect_timeout=5", secret),
		fmt.Sprintf("host=127.0.0.1 port=1 user=u password='%s' dbname=db sslmode=disable", secret),
		fmt.Sprintf("postgres://u:%s@127.0.0.1:notaport/db", secret),
		fmt.Sprintf("postgres://u:%s@127.0.0.1:%d/db?sslmode=bogus", secret, cfg.Port),
		fmt.Sprintf("postgres://u@127.0.0.1:%d/db?password=%s&sslmode=disable", 1, secret),
		// No such database on a live server.
		strings.Replace(pgtest.DatabaseDSN(withPassword, "no_such_db"), "sslmode=disable", "sslmode=disable&application_name=x", 1),
	}
	for _, dsn := range failing {
		_, err := Open(t.Context(), Options{DSN: dsn, Logger: logger})
		if err == nil {
			t.Fatalf("Open(%s) succeeded", RedactDSN(dsn))
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("error does not name the redacted DSN: %v", err)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log shows the password:\n%s", logs.String())
	}
	if got := fmt.Sprint(DSN(withPassword)); strings.Contains(got, secret) {
		t.Errorf("DSN prints as %s", got)
	}
}

// safeBuffer is a bytes.Buffer for concurrent writers.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u:p%40ss@h/db", "postgresql://u:xxxxx@h/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?password=secret&sslmode=disable", "postgres://h/db?password=xxxxx&sslmode=disable"},
		{"host=h user=u password=secret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password = 'se cret' dbname=db", "host=h password = xxxxx dbname=db"},
		{"host=h password='it\\'s' dbname=db", "host=h password=xxxxx dbname=db"},
		{"postgres://u:se/cr@et@h:x/db", "postgres://u:xxxxx@h:x/db"},
		{"cannot parse `postgres://u:secret@h:bad/db`: invalid port", "cannot parse `postgres://u:xxxxx@h:bad/db`: invalid port"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := RedactDSN(tc.in); got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestStatementsIdle: an idle poll (claim and expiry, nothing due) costs
// one statement each.
func TestStatementsIdle(t *testing.T) {
	s, _ := openTest(t)
	waitListening(t, s)
	ctx := t.Context()
	before := s.Statements()
	runs, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(map[string]int{"a": 1, "b": 0}), Limit: 4})
	if err != nil || len(runs) != 0 {
		t.Fatalf("RunsClaim = %v, %v", runs, err)
	}
	if _, err := s.RunsExpire(ctx, store.RunsExpireParams{Node: "n"}); err != nil {
		t.Fatal(err)
	}
	if got := s.Statements() - before; got != 2 {
		t.Fatalf("an idle claim and expiry ran %d statements, want 2", got)
	}
}

// TestHeartbeatReserved: heartbeats go through when claims hold every
// connection of the main pool.
func TestHeartbeatReserved(t *testing.T) {
	_, dsn := openTest(t)
	s := openDSN(t, dsn, Options{MaxConns: 2})
	ctx := t.Context()
	if _, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "n1", Incarnation: "i1"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	busy, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := s.RunGet(busy, "x")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunGet on an exhausted pool: %v", err)
	}
	hb, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.NodeHeartbeat(hb, store.NodeHeartbeatParams{ID: "n1", Incarnation: "i1"}); err != nil {
		t.Fatalf("heartbeat with the main pool exhausted: %v", err)
	}
}

func TestInterpretError(t *testing.T) {
	s, _ := openTest(t)
	ctx := t.Context()
	err := s.write(ctx, "test", func(c *conn) error {
		for range 2 {
			if _, err := c.exec(ctx, `INSERT INTO cursors (job, last, updated_at) VALUES ('a', now(), now())`); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("unique violation: %v", err)
	}
	if _, err := s.RunGet(ctx, "none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing run: %v", err)
	}
	// A window refused by the schema rather than by the code.
	_, err = s.RunInsert(ctx, store.RunInsertParams{Job: "w", Trigger: jobs.TriggerManual, NotAfter: time.Now().Add(-time.Hour), Retry: jobs.DefaultRetry})
	if !errors.Is(err, jobs.ErrWindow) {
		t.Fatalf("window in the past: %v", err)
	}
	// Dedup refusals say why.
	p := manual("d")
	p.DedupID = "id-1"
	if _, err := s.RunInsert(ctx, p); err != nil {
		t.Fatal(err)
	}
	_, err = s.RunInsert(ctx, p)
	if !errors.Is(err, store.ErrDuplicate) || !strings.Contains(err.Error(), "dedup id") {
		t.Fatalf("second run with a dedup id: %v", err)
	}
}

// TestWriteRetries: a transaction that meets a serialization failure or a
// deadlock runs again; other errors end it at once.
func TestWriteRetries(t *testing.T) {
	s, _ := openTest(t)
	tries := 0
	err := s.write(t.Context(), "test", func(c *conn) error {
		tries++
		if tries < 3 {
			return &pgconn.PgError{Code: []string{"40001", "40P01"}[tries-1]}
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Fatalf("write = %v after %d tries, want success after 3", err, tries)
	}
	tries = 0
	err = s.write(t.Context(), "test", func(c *conn) error {
		tries++
		return &pgconn.PgError{Code: "40001"}
	})
	if err == nil || tries != maxTries {
		t.Fatalf("write = %v after %d tries, want an error after %d", err, tries, maxTries)
	}
	tries = 0
	boom := errors.New("boom")
	if err := s.write(t.Context(), "test", func(c *conn) error { tries++; return boom }); !errors.Is(err, boom) || tries != 1 {
		t.Fatalf("write = %v after %d tries", err, tries)
	}
}

// BenchmarkRunTransitionMany: claim and complete 1,000 runs per
// iteration, the completions one by one or in one batch.
func BenchmarkRunTransitionMany(b *testing.B) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.Context(), Options{DSN: srv.NewDatabase(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchClaimComplete(b, s, 1000, batch)
		})
	}
}

// BenchmarkScheduleFireMany: one tick of 10,000 cron jobs per iteration,
// fired one by one or in batches of 500.
func BenchmarkScheduleFireMany(b *testing.B) {
	for _, batch := range []int{0, 500} {
		name := "single"
		if batch > 0 {
			name = fmt.Sprintf("batch=%d", batch)
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(b.Context(), Options{DSN: srv.NewDatabase(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchFires(b, s, 10000, batch)
		})
	}
}

// TestClaimPassesRunsAnotherClaimHolds: a claim of one job's backlog while
// another claim holds its first runs (a node of the cluster claiming at
// the same moment) takes a full batch of the runs after them. Read first
// and locked after, it took none: the runs it read were all held.
func TestClaimPassesRunsAnotherClaimHolds(t *testing.T) {
	s, dsn := openTest(t)
	ctx := t.Context()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	storetest.InsertBacklog(t, s, at, slices.Repeat([]string{"a"}, 30)...)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, `SELECT id FROM runs WHERE job = 'a' ORDER BY not_before, created_at, id LIMIT 10 FOR UPDATE`)
	if err != nil {
		t.Fatal(err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(held) != 10 {
		t.Fatalf("held %d runs, %v", len(held), err)
	}

	for _, due := range []bool{false, true} {
		claimed, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(map[string]int{"a": 0}),
			Limit: 10, Now: at.Add(time.Second), Due: due})
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 10 {
			t.Fatalf("due %v: claimed %d runs while another claim holds the first 10, want 10", due, len(claimed))
		}
		for _, r := range claimed {
			if slices.Contains(held, r.ID) {
				t.Fatalf("due %v: claimed run %s that another claim holds", due, r.ID)
			}
		}
	}
}

// TestClaimOfOneJobIsOneStatement: a claim of one job without a
// concurrency limit is one statement, also when other jobs' runs are due
// before its own (it took three: the first due runs, which were not its,
// then which jobs have due runs, then the claim). A job with a limit
// keeps the first read, so that a poll with nothing of it due takes no
// lock.
func TestClaimOfOneJobIsOneStatement(t *testing.T) {
	s, _ := openTest(t)
	waitListening(t, s) // its LISTEN counts as a statement
	ctx := t.Context()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	storetest.InsertBacklog(t, s, at, append(slices.Repeat([]string{"other"}, 290), slices.Repeat([]string{"a"}, 10)...)...)
	claim := func(limit int) []*jobs.Run {
		t.Helper()
		runs, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(map[string]int{"a": limit}),
			Limit: 4, Now: at.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Job != "a" {
				t.Fatalf("claimed run %s of job %s", r.ID, r.Job)
			}
		}
		return runs
	}
	before := s.Statements()
	if runs := claim(0); len(runs) != 4 {
		t.Fatalf("claimed %d runs of the job's 10 due runs behind 290 of another job, want 4", len(runs))
	}
	if got := s.Statements() - before; got != 1 {
		t.Fatalf("a claim of one unlimited job ran %d statements, want 1", got)
	}
	// A limited job's claim still keeps its limit.
	if runs := claim(5); len(runs) != 1 {
		t.Fatalf("claimed %d runs of a job limited to 5 with 4 running, want 1", len(runs))
	}
}

// TestEndsAtOnce: a batch of attempts that end their runs is one statement
// (besides the transaction, its commit and the wakeup), without a read of
// the runs first; a transition of the batch that statement does not write
// (a stale fence) goes the locked way and gets its error. A run ended so
// keeps claimed_from, which RunGet does not report once the run has left
// running.
func TestEndsAtOnce(t *testing.T) {
	s, dsn := openTest(t)
	waitListening(t, s) // its LISTEN counts as a statement
	ctx := t.Context()
	ps := make([]store.RunInsertParams, 5)
	for i := range ps {
		ps[i] = manual("ends")
	}
	if _, err := s.RunInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.RunsClaim(ctx, store.ClaimParams{Node: "n", Incarnation: "i", Jobs: store.NewJobLimits(map[string]int{"ends": 0}), Limit: 5,
		Now: t0.Add(time.Minute)})
	if err != nil || len(claimed) != 5 {
		t.Fatalf("RunsClaim = %d runs, %v", len(claimed), err)
	}
	fence := func(r *jobs.Run) jobs.Fence {
		return jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
	}
	end := t0.Add(2 * time.Minute)

	before := s.Statements()
	var ts []jobs.Transition
	for _, r := range claimed[:3] {
		ts = append(ts, jobs.Complete(fence(r), "n", jobs.Result{ExitCode: new(int)}, end))
	}
	results, err := s.RunTransitionMany(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range results {
		if res.Err != nil || res.Run.ID != ts[i].RunID || res.Run.Status != jobs.StatusCompleted || !res.Run.FinishedAt.Equal(end) {
			t.Fatalf("result %d: %+v", i, res)
		}
	}
	if got := s.Statements() - before; got != 4 {
		t.Fatalf("a batch of three ends ran %d statements, want 4 (begin, the ends, the wakeup, commit)", got)
	}

	var kept string
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT claimed_from FROM runs WHERE id = $1`, claimed[0].ID).Scan(&kept); err != nil || kept != "pending" {
		t.Fatalf("claimed_from of the ended run = %q, %v; want pending", kept, err)
	}
	if got, err := s.RunGet(ctx, claimed[0].ID); err != nil || got.ClaimedFrom != "" {
		t.Fatalf("RunGet of the ended run: ClaimedFrom %q, %v; want none", got.ClaimedFrom, err)
	}

	stale := fence(claimed[3])
	stale.Attempt++
	before = s.Statements()
	results, err = s.RunTransitionMany(ctx, []jobs.Transition{
		jobs.Complete(stale, "n", jobs.Result{}, end),
		jobs.Complete(fence(claimed[4]), "n", jobs.Result{}, end),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(results[0].Err, store.ErrFenced) || results[1].Err != nil || results[1].Run.Status != jobs.StatusCompleted {
		t.Fatalf("results: %+v", results)
	}
	if got := s.Statements() - before; got != 5 {
		t.Fatalf("a batch of an end and a stale one ran %d statements, want 5 (the locked read of the stale one besides)", got)
	}
	if got, err := s.RunGet(ctx, claimed[3].ID); err != nil || got.Status != jobs.StatusRunning || got.ClaimedFrom != jobs.StatusPending {
		t.Fatalf("the run of the stale end: %+v, %v", got, err)
	}
}
