package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/schedulerd/schedulerd/internal/safefs"
	"github.com/schedulerd/schedulerd/store"
)

var _ store.Store = (*Store)(nil)

// Options configure Open.
type Options struct {
	// Path is the database file. Its directory is created (0750) if
	// missing; it, and every directory above it, must pass the checks of
	// internal/safefs. The database and its WAL and shared-memory files are
	// 0600 whatever the umask (0640 when the operator gave the database
	// file to a group).
	Path string
	// Lock takes an exclusive lock on Path+".lock" (and writes our pid into
	// it) so that a second daemon on the same state directory refuses to
	// start: Open then fails with an error wrapping store.ErrLocked. Offline
	// commands (migrate, inspection) pass false.
	Lock bool
	// Logger receives migration and pruning notes; nil discards them.
	Logger *slog.Logger
	// CheckpointInterval is how often the WAL is folded into the database
	// file, when there were commits since the last time; default 1s.
	CheckpointInterval time.Duration

	// checkpointed, in tests, receives the result of each checkpoint.
	checkpointed chan<- checkpointResult
	// walLimit, in tests, replaces the default walLimit.
	walLimit int64
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	path   string
	logger *slog.Logger
	// writer has a single connection: SQLite has one writer at a time, and
	// holding it in one connection whose transactions begin IMMEDIATE means
	// a write never starts as a read and then fails to upgrade (SQLITE_BUSY).
	writer *sql.DB
	// reader is a small pool of read-only connections; in WAL mode they read
	// the last committed state while the writer works.
	reader *sql.DB
	lock   *lockFile
	// prepared holds the statements of the busy write paths (claims,
	// transitions, fires), prepared once on the writer's connection: a
	// write transaction reuses them instead of parsing their SQL again,
	// which would cost more than running them. Read-only after Open.
	prepared map[string]*sql.Stmt

	statements atomic.Int64
	// commits counts write transactions committed; the checkpointer works
	// only when it has moved.
	commits atomic.Int64
	// committed receives a value, coalesced, after each commit: the
	// checkpointer sleeps on it while nothing is written.
	committed chan struct{}
	// ckptTurns counts the checkpointer's wakeups (for tests).
	ckptTurns    atomic.Int64
	ckptStop     chan struct{}
	ckptDone     chan struct{}
	checkpointed chan<- checkpointResult
	wal          string // the WAL file
	walLimit     int64

	// results tells the engine of the results that commits write.
	results *store.ResultFeed

	closeOnce sync.Once
	closeErr  error
}

// Pragmas of every connection. synchronous=NORMAL with WAL: a commit is
// durable against a crash of the process (the WAL is written before the
// commit returns), which is what the occurrence key and the fencing rely on;
// only a crash of the operating system or a power loss may lose the last
// commits before the next checkpoint. FULL would fsync the WAL on every
// commit, which costs a disk flush per claim, transition and heartbeat.
//
// The writer never checkpoints (wal_autocheckpoint 0): a checkpoint copies
// the WAL into the database file and flushes it to disk, which in the
// commit that crossed the threshold made that fire or claim tens of
// milliseconds late. checkpointLoop does it in the background instead.
//
// When the writer starts the WAL again after a checkpoint copied all of
// it, journal_size_limit(0) empties the file first: the new frames are
// appended, not written over the old ones, which took several times as
// long here (a burst of ticks after a quiet minute started its runs later
// than the first burst of the run, and no later with the limit).
//
// temp_store(MEMORY) keeps the writer's statement journals in memory: a
// statement that writes many rows (a batch of completions, a claim) keeps
// the pages it changes there in case it must be undone, and spilled them
// to a temporary file past 64 KiB, a pwrite per page. With it the
// claim-and-complete benchmark makes fewer pwrite calls. Every write
// statement is bounded (chunks of 64 rows, prunes in batches).
const (
	writerParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(0)&_pragma=temp_store(MEMORY)&_txlock=immediate"
	readerParams = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=query_only(1)"
)

// Open opens (creating it if needed) the database at opts.Path and applies
// the migrations it lacks.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("open sqlite store: path is empty")
	}
	abs, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	// The directory is checked (and made) first, and held open: the lock
	// and the database files are opened through it, so that nothing is
	// created in a directory that others could write to or swap.
	dir, err := safefs.OpenDir(filepath.Dir(abs), stateDirRole, dirMode)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	defer dir.Close()
	s := &Store{path: opts.Path, logger: opts.Logger, results: store.NewResultFeed(), committed: make(chan struct{}, 1)}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	name := filepath.Base(abs)
	if opts.Lock {
		if s.lock, err = acquireLock(dir, name+".lock", opts.Path); err != nil {
			return nil, err
		}
	}
	if err := prepareFiles(dir, name, s.logger); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	uri := "file:" + escapePath(abs) + "?"
	if s.writer, err = sql.Open("sqlite", uri+writerParams); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", opts.Path, err)
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)
	if s.reader, err = sql.Open("sqlite", uri+readerParams); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", opts.Path, err)
	}
	s.reader.SetMaxOpenConns(4)
	s.reader.SetMaxIdleConns(4)
	s.reader.SetConnMaxLifetime(0)
	s.reader.SetConnMaxIdleTime(0)
	// The writer connects (and turns WAL on) before any reader does.
	if _, err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", opts.Path, err)
	}
	s.prepare(ctx)
	s.checkpointed, s.wal, s.walLimit = opts.checkpointed, abs+"-wal", cmp.Or(opts.walLimit, walLimit)
	s.ckptStop, s.ckptDone = make(chan struct{}), make(chan struct{})
	// The commit count is read here, not when the goroutine first runs: a
	// commit made before then would count as checkpointed, and wait for
	// the next commit's checkpoint.
	go s.checkpointLoop(cmp.Or(opts.CheckpointInterval, time.Second), s.commits.Load())
	return s, nil
}

// walLimit is the WAL size past which a checkpoint waits for the writer
// and truncates the WAL: under writes that never pause, a passive
// checkpoint cannot catch up, and the WAL would grow without bound.
const walLimit = 64 << 20

// checkpointResult is what one checkpoint did: the frames in the WAL and
// how many of them are now in the database file (for tests).
type checkpointResult struct {
	mode              string
	commits           int64 // the commits it covers
	busy, log, copied int
	err               error
}

// checkpointLoop folds the WAL into the database file an interval after
// a commit, covering the commits of that interval, on a reader connection:
// a passive checkpoint never waits for the writer, and the writer goes on
// while it runs. A WAL past walLimit is truncated, which waits for the
// writer's current transaction. seen is the commit count when the store
// opened (its migrations): the loop checkpoints once there are commits
// past it. While nothing is committed the loop sleeps: an idle daemon's
// process is not woken every interval for nothing.
func (s *Store) checkpointLoop(interval time.Duration, seen int64) {
	defer close(s.ckptDone)
	for {
		select {
		case <-s.ckptStop:
			return
		case <-s.committed:
		}
		t := time.NewTimer(interval)
		select {
		case <-s.ckptStop:
			t.Stop()
			return
		case <-t.C:
		}
		s.ckptTurns.Add(1)
		n := s.commits.Load()
		if n == seen {
			continue
		}
		seen = n
		mode := "PASSIVE"
		if fi, err := os.Stat(s.wal); err == nil && fi.Size() > s.walLimit {
			mode = "TRUNCATE"
		}
		res := checkpointResult{mode: mode, commits: n}
		res.err = s.read().queryRow(context.Background(), "PRAGMA wal_checkpoint("+mode+")").Scan(&res.busy, &res.log, &res.copied)
		if res.err != nil {
			s.logger.Warn("checkpoint the WAL", "mode", mode, "error", res.err)
		}
		if s.checkpointed != nil {
			select {
			case s.checkpointed <- res:
			case <-s.ckptStop:
				return
			}
		}
	}
}

// preparedQueries are the statements the writer keeps prepared.
var preparedQueries = []string{
	sqlGetRun, sqlRunsByID, sqlOccurrenceRun, sqlInsertOccurrence, sqlDedupRun, sqlInsertRun, sqlInsertEvent,
	sqlRequestCancel, sqlClaimCandidates, sqlClaimRuns, sqlGetCursor, sqlUpsertResults,
}

// prepare prepares the statements of preparedQueries on the writer. One
// that does not prepare (a schema that lacks its table) is left out: it
// runs unprepared, and reports its error where it is used.
func (s *Store) prepare(ctx context.Context) {
	s.prepared = make(map[string]*sql.Stmt, len(preparedQueries))
	for _, q := range append(preparedQueries, changeQueries()...) {
		st, err := s.writer.PrepareContext(ctx, q)
		if err != nil {
			s.logger.DebugContext(ctx, "statement not prepared", "sql", strings.Join(strings.Fields(q), " "), "error", err)
			continue
		}
		s.prepared[q] = st
	}
}

// escapePath makes a file path safe inside a SQLite URI.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// Close closes the database and releases the lock. It is safe to call more
// than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.ckptStop != nil {
			close(s.ckptStop)
			<-s.ckptDone
		}
		var errs []error
		for _, st := range s.prepared {
			errs = append(errs, st.Close())
		}
		if s.reader != nil {
			errs = append(errs, s.reader.Close())
		}
		if s.writer != nil {
			errs = append(errs, s.writer.Close())
		}
		if s.lock != nil {
			errs = append(errs, s.lock.release())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Statements returns the number of SQL statements (transaction control
// included) that the store has executed since Open.
func (s *Store) Statements() int64 { return s.statements.Load() }

// interpretError maps SQLite and database/sql errors to the store's
// sentinels; it is the one place where that happens. Other errors pass
// through unchanged.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrDuplicate, err)
		}
	}
	return err
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs statements on a database or a transaction and counts them.
type conn struct {
	q querier
	n *atomic.Int64
	// stmts, in a write transaction, runs the prepared statements.
	stmts *txStmts
	// ended, in a write transaction, collects the results it writes, for
	// the feed once it commits.
	ended *[]store.JobResult
}

// txStmts binds the store's prepared statements to one write transaction,
// each on its first use there.
type txStmts struct {
	tx       *sql.Tx
	prepared map[string]*sql.Stmt
	bound    map[string]*sql.Stmt
}

// runner returns what runs query: its prepared statement bound to the
// transaction when it has one, else the database or transaction itself.
func (c conn) runner(ctx context.Context, query string) querier {
	if c.stmts == nil {
		return c.q
	}
	if st := c.stmts.bound[query]; st != nil {
		return stmtQuerier{st}
	}
	st := c.stmts.prepared[query]
	if st == nil {
		return c.q
	}
	if c.stmts.bound == nil {
		c.stmts.bound = map[string]*sql.Stmt{}
	}
	st = c.stmts.tx.StmtContext(ctx, st)
	c.stmts.bound[query] = st
	return stmtQuerier{st}
}

// stmtQuerier runs one prepared statement; the query text is its own.
type stmtQuerier struct{ st *sql.Stmt }

func (q stmtQuerier) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return q.st.ExecContext(ctx, args...)
}

func (q stmtQuerier) QueryContext(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
	return q.st.QueryContext(ctx, args...)
}

func (q stmtQuerier) QueryRowContext(ctx context.Context, _ string, args ...any) *sql.Row {
	return q.st.QueryRowContext(ctx, args...)
}

func (c conn) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n.Add(1)
	return c.runner(ctx, query).ExecContext(ctx, query, args...)
}

func (c conn) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n.Add(1)
	return c.runner(ctx, query).QueryContext(ctx, query, args...)
}

func (c conn) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	c.n.Add(1)
	return c.runner(ctx, query).QueryRowContext(ctx, query, args...)
}

// read returns a conn on the read-only pool.
func (s *Store) read() conn { return conn{q: s.reader, n: &s.statements} }

// write runs fn in one write transaction, which holds the database's write
// lock from its first statement; op prefixes the error.
func (s *Store) write(ctx context.Context, op string, fn func(c conn) error) (err error) {
	s.statements.Add(1)
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", op, interpretError(err))
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback() // the one writer connection must not stay in a transaction
			panic(p)
		}
		if err != nil {
			s.statements.Add(1)
			_ = tx.Rollback()
			err = fmt.Errorf("%s: %w", op, interpretError(err))
		}
	}()
	var ended []store.JobResult
	if err = fn(conn{q: tx, n: &s.statements, stmts: &txStmts{tx: tx, prepared: s.prepared}, ended: &ended}); err != nil {
		return err
	}
	s.statements.Add(1)
	if err = tx.Commit(); err == nil {
		s.commits.Add(1)
		select {
		case s.committed <- struct{}{}:
		default:
		}
		s.results.Publish(ended)
	}
	return err
}

// fail prefixes a read error with op after mapping it.
func fail(op string, err error) error {
	return fmt.Errorf("%s: %w", op, interpretError(err))
}

// now returns t, or the store's clock when t is zero, in UTC at the
// precision the database keeps.
func now(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// micro returns t as the database gives it back: in UTC, to the
// microsecond.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// dbTime is the stored form of a time: unix microseconds, NULL when zero.
func dbTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// goTime is the inverse of dbTime.
func goTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// micros is a time column (unix microseconds) as rowscan reads it
// (rowscan.Time).
type micros struct{ sql.NullInt64 }

// UTC returns the time read, in UTC; zero for NULL.
func (t *micros) UTC() time.Time { return goTime(t.NullInt64) }

// nullString stores an empty string as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// intOrNull stores a nil int as NULL.
func intOrNull(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// placeholders returns "?, ?, ?" for n arguments.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// anys converts strings to query arguments.
func anys(ss []string) []any {
	a := make([]any, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}
