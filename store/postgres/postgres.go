package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// Options configure Open.
type Options struct {
	// DSN is a postgres:// URL or key=value settings, as libpq takes them.
	// target_session_attrs=read-write (with several hosts) is honoured.
	DSN string
	// Logger receives migration and connection notes; nil discards them.
	Logger *slog.Logger
	// MaxConns bounds the connections of the main pool; default 10.
	MaxConns int32
	// NoListen opens no LISTEN connection: the store hears only of its
	// own commits, whose wakeups and results it hands to Wakeups and
	// ResultFeed itself, as the listener would. For a process that is
	// the database's only writer: the simulator runs the engine this way
	// under testing/synctest, where a connection that waits for
	// notifications forever would keep the fake clock from moving.
	NoListen bool
}

var (
	_ store.Store            = (*Store)(nil)
	_ store.Notifier         = (*Store)(nil)
	_ store.ConcurrentWriter = (*Store)(nil)
)

// ConcurrentWrites says that transactions of a PostgreSQL store run side
// by side (store.ConcurrentWriter).
func (*Store) ConcurrentWrites() {}

// Store is the PostgreSQL implementation of store.Store.
//
// It holds two pools and one more connection. The main pool has at most
// MaxConns connections and serves every method but one; the engine claims,
// fires, transitions and heartbeats through the same Store, so a burst of
// claims or a slow query could take every connection of it. NodeHeartbeat
// therefore has a small pool of its own (heartbeatConns connections), so a
// node never fences itself for want of a connection while the database is
// fine. The third is the LISTEN connection of Wakeups, outside both pools.
type Store struct {
	logger    *slog.Logger
	pool      *pgxpool.Pool
	heartbeat *pgxpool.Pool
	listenCfg *pgx.ConnConfig

	statements atomic.Int64

	wakeups chan struct{}
	// results tells the engine of the results that the listener hears of.
	results    *store.ResultFeed
	stopListen context.CancelFunc
	listenDone chan struct{}
	// listening is closed once the listener first listens (for tests).
	listening chan struct{}
	// noListen: no listener (Options.NoListen); tx hands the wakeups and
	// results of each commit to Wakeups and the feed itself.
	noListen bool

	closeOnce sync.Once
}

const (
	defaultMaxConns = 10
	// heartbeatConns is the size of the heartbeat pool.
	heartbeatConns = 2
	// notifyChannel is the LISTEN/NOTIFY channel of wakeups.
	notifyChannel = "schedulerd_work"
)

// errReadOnly: the server takes no writes.
var errReadOnly = errors.New("the server is read-only (a hot standby or a demoted primary, or default_transaction_read_only is on); schedulerd needs the primary")

// Open connects to the database of opts.DSN and applies the migrations it
// lacks. Errors and logs show the DSN with its password hidden.
func Open(ctx context.Context, opts Options) (*Store, error) {
	dsn := DSN(opts.DSN)
	s, err := open(ctx, opts)
	if err != nil {
		return nil, redactError(fmt.Errorf("open postgres store %s: %w", dsn, err), opts.DSN)
	}
	s.logger.InfoContext(ctx, "opened postgres store", "dsn", dsn)
	return s, nil
}

func open(ctx context.Context, opts Options) (*Store, error) {
	if strings.TrimSpace(opts.DSN) == "" {
		return nil, errors.New("the DSN is empty")
	}
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		// The text repeats the DSN, which Open names already: keep what
		// follows it.
		msg := err.Error()
		if i := strings.Index(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
		return nil, fmt.Errorf("cannot parse the DSN: %s", msg)
	}
	s := &Store{
		logger:    opts.Logger,
		wakeups:   make(chan struct{}, 1),
		results:   store.NewResultFeed(),
		listening: make(chan struct{}),
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "schedulerd"
	}
	// Plan each statement with its parameters. The hot statements take
	// their rows as arrays, and a generic plan cannot know how many there
	// are; worse, a generic plan made while a table was small (a fresh
	// database, before autovacuum analyzes it) stays cached on the
	// connection after the table grew: completions scanned the whole
	// attempts table in a burn-down. Planning costs little next to that,
	// and the hot path sends one statement per batch.
	if _, ok := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	cfg.MaxConns = cmp.Or(opts.MaxConns, defaultMaxConns)
	cfg.AfterConnect = s.checkWritable
	hb := cfg.Copy()
	hb.MaxConns, hb.MinConns = heartbeatConns, 0
	s.listenCfg = cfg.ConnConfig.Copy()

	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	// Connect now, so that an unreachable or read-only server is reported
	// as such; Migrate uses the connection next.
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	pc.Release()
	if _, err := s.Migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if s.heartbeat, err = pgxpool.NewWithConfig(ctx, hb); err != nil {
		s.pool.Close()
		return nil, err
	}
	if opts.NoListen {
		s.noListen = true
		close(s.listening)
		return s, nil
	}
	listenCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopListen, s.listenDone = cancel, make(chan struct{})
	go s.listen(listenCtx)
	return s, nil
}

// checkWritable is the pools' AfterConnect: a connection that lands on a
// server that takes no writes (a hot standby, a demoted primary) is refused,
// so the pool drops it and the next acquire connects again, to the primary
// when the DSN lists several hosts.
func (s *Store) checkWritable(ctx context.Context, conn *pgx.Conn) error {
	s.statements.Add(1)
	var ro string
	if err := conn.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&ro); err != nil {
		return fmt.Errorf("check transaction_read_only: %w", err)
	}
	if ro == "on" {
		return fmt.Errorf("%s:%d: %w", conn.Config().Host, conn.Config().Port, errReadOnly)
	}
	return nil
}

// Close stops the listener and closes the pools. It is safe to call more
// than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stopListen != nil {
			s.stopListen()
			<-s.listenDone
		}
		if s.heartbeat != nil {
			s.heartbeat.Close()
		}
		s.pool.Close()
	})
	return nil
}

// Statements returns the number of SQL statements (transaction control,
// LISTEN and the listener's keepalive pings included) that the store has
// sent since Open. The pools' own liveness checks are not counted.
func (s *Store) Statements() int64 { return s.statements.Load() }

// redactError returns err with every password of dsn hidden from its text;
// errors.Is and errors.As still see the errors it wraps.
func redactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := RedactDSN(err.Error())
	if cfg, perr := pgconn.ParseConfig(dsn); perr == nil && len(cfg.Password) >= 4 {
		msg = strings.ReplaceAll(msg, cfg.Password, redacted)
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// interpretError maps PostgreSQL and pgx errors to the store's sentinels;
// it is the one place where that happens. Other errors pass through
// unchanged.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			what := "the key already exists"
			switch pe.ConstraintName {
			case "runs_dedup":
				what = "a non-terminal run of the job has this dedup id"
			case "occurrences_pkey":
				what = "the occurrence already has a run"
			case "nodes_pkey":
				what = "the node is registered"
			}
			if pe.Detail != "" {
				what += " (" + pe.Detail + ")"
			}
			return fmt.Errorf("%w: %s: %w", store.ErrDuplicate, what, err)
		case pe.Code == "23514" && pe.ConstraintName == "runs_window": // check_violation
			return fmt.Errorf("run window: %w", jobs.ErrWindow)
		}
	}
	return err
}

// retryable reports whether a transaction failed only because it met
// another one: a serialization failure or a deadlock. It is then run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// readOnly reports whether err says the server takes no writes.
func readOnly(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006" // read_only_sql_transaction
}

// querier is what a pool, a pooled connection and a transaction share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// conn runs statements on a pool or in a transaction and counts them.
type conn struct {
	q querier
	n *atomic.Int64
	// notify asks for one wakeup notification when the transaction commits.
	notify bool
	// results are the results of runs that the transaction wrote, which it
	// sends on resultsChannel when it commits.
	results []store.JobResult
}

func (c *conn) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	return c.q.Exec(ctx, sql, args...)
}

func (c *conn) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	return c.q.Query(ctx, sql, args...)
}

func (c *conn) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n.Add(1)
	return c.q.QueryRow(ctx, sql, args...)
}

// send runs the statements queued in b in one round trip (a pipeline),
// each with its callback, in order; the first error stops it.
func (c *conn) send(ctx context.Context, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	c.n.Add(int64(b.Len()))
	return c.q.SendBatch(ctx, b).Close()
}

// wake makes the transaction notify the listeners of every node once, when
// it commits: runs were made or may have become due.
func (c *conn) wake() { c.notify = true }

// read returns a conn on the main pool, for statements outside a transaction.
func (s *Store) read() *conn { return &conn{q: s.pool, n: &s.statements} }

// maxTries bounds the runs of a transaction that meets serialization
// failures or deadlocks.
const maxTries = 5

// write runs fn in one transaction, again when it fails with a
// serialization failure or a deadlock (fn must then start over: it may not
// keep state from an earlier try); op prefixes the error.
func (s *Store) write(ctx context.Context, op string, fn func(c *conn) error) error {
	return s.retry(ctx, op, "transaction", func() error { return s.tx(ctx, fn) })
}

// writeOne runs fn, which sends one statement that writes (atomic on its
// own), on a connection of the main pool outside any transaction: one
// round trip instead of three. Like write, it runs fn again after a
// serialization failure or a deadlock, and it drops a connection that
// landed on a read-only server.
func (s *Store) writeOne(ctx context.Context, op string, fn func(c *conn) error) error {
	return s.retry(ctx, op, "statement", func() error { return s.autocommit(ctx, fn) })
}

// retry runs do, again after a short pause while it fails with a
// serialization failure or a deadlock, at most maxTries times; what (a
// transaction, a statement) names it in the debug log, op in the error.
func (s *Store) retry(ctx context.Context, op, what string, do func() error) error {
	for try := 1; ; try++ {
		err := do()
		if err == nil {
			return nil
		}
		if try < maxTries && retryable(err) && ctx.Err() == nil {
			s.logger.DebugContext(ctx, what+" conflict, retrying", "op", op, "try", try, "error", err)
			pause := time.Duration(try) * time.Duration(5+rand.IntN(20)) * time.Millisecond
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			continue
		}
		return fmt.Errorf("%s: %w", op, interpretError(err))
	}
}

// autocommit runs fn on a connection of the main pool, outside any
// transaction.
func (s *Store) autocommit(ctx context.Context, fn func(c *conn) error) (err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if readOnly(err) {
			_ = pc.Conn().Close(context.WithoutCancel(ctx))
		}
		pc.Release()
	}()
	return fn(&conn{q: pc, n: &s.statements})
}

// tx runs fn in one transaction on a connection of the main pool.
func (s *Store) tx(ctx context.Context, fn func(c *conn) error) (err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if readOnly(err) {
			// A server that became read-only under us: do not give this
			// connection to anyone again.
			_ = pc.Conn().Close(context.WithoutCancel(ctx))
		}
		pc.Release()
	}()
	s.statements.Add(1)
	tx, err := pc.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			s.statements.Add(1)
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	c := &conn{q: tx, n: &s.statements}
	if err = fn(c); err != nil {
		return err
	}
	if err = c.notifyCommit(ctx); err != nil {
		return err
	}
	s.statements.Add(1)
	if err = tx.Commit(ctx); err != nil {
		return err
	}
	if s.noListen {
		if c.notify {
			s.wake()
		}
		s.results.Publish(c.results)
	}
	return nil
}

// fail prefixes a read error with op after mapping it.
func fail(op string, err error) error {
	return fmt.Errorf("%s: %w", op, interpretError(err))
}

// ts is a time as a query argument: UTC at the database's precision, or
// NULL for a zero time, which the statements read as the database clock
// (COALESCE($n, now())) where a zero time means "now".
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Truncate(time.Microsecond)
}

// tsArg is a time as an element of a timestamptz[] argument: like ts,
// NULL for a zero time.
func tsArg(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t.UTC().Truncate(time.Microsecond), Valid: true}
}

// nullString stores an empty string as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// textArg is a string as an element of a text[] argument: like
// nullString, NULL for "".
func textArg(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

// cleanText makes free text (errors, progress messages) storable as text:
// PostgreSQL's text holds neither NUL bytes nor invalid UTF-8, and a write
// about an attempt must not fail for its message.
func cleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// bytesOf stores a string as bytea, never NULL.
func bytesOf(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}
