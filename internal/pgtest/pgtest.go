// Package pgtest owns the PostgreSQL server that tests of the PostgreSQL
// store run against: a throwaway server started from the local PostgreSQL
// binaries, or an existing one named by SCHEDULERD_TEST_POSTGRES, with a
// fresh database per test.
//
// A package's TestMain starts one server through Main; every package that
// does so gets its own server, on its own port and in its own directory, so
// the packages of "go test ./..." may run at once. Main stops the server when
// the tests end. Should the test binary die without running its deferred
// calls (a test that panics, a timeout, SIGKILL), a watchdog process that
// Start leaves behind notices that the binary is gone (its pipe from the
// binary closes) and stops the server and removes its directory. Only when
// the watchdog is killed too (kill -9 of the whole session) can a server stay
// behind; it holds nothing that a later Start uses, since ports and
// directories are picked fresh each time.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/internal/testtool"
)

// EnvDSN names the environment variable that points the tests at an
// existing server instead of a throwaway one. Its role needs CREATEDB.
const EnvDSN = "SCHEDULERD_TEST_POSTGRES"

// Server is a PostgreSQL server for tests.
type Server struct {
	dsn string
	// external: the server came from EnvDSN; it is neither stopped nor
	// restarted by this package.
	external bool

	bindir string
	dir    string // private directory: data, socket, log
	data   string
	log    string
	port   int
	// runAs is the unprivileged user that runs the server's binaries when
	// the tests run as root (initdb refuses root); empty otherwise.
	runAs string

	// settings replace or add to the settings of writeConfig.
	settings []string

	watchdog     *exec.Cmd
	watchdogPipe *os.File // its stdin; closing it tells it to clean up

	stopOnce sync.Once
	dbs      atomic.Int64
}

// skipReason is why Main found no server; tests then skip with it.
var skipReason = "no PostgreSQL server (pgtest.Main was not used)"

// Start returns a server: the one named by SCHEDULERD_TEST_POSTGRES when it
// is set (used as-is), else a throwaway server made with initdb and started
// with pg_ctl from the binaries in `pg_config --bindir`, listening only on a
// free port of 127.0.0.1 and on a unix socket in its private directory.
// When the tests run as root, the binaries run as the postgres user.
func Start() (*Server, error) { return StartWith() }

// StartWith is Start with settings, lines "name = value" that replace or
// add to those of a throwaway server (the benchmark loads
// pg_stat_statements this way). A server named by SCHEDULERD_TEST_POSTGRES
// keeps its own settings.
func StartWith(settings ...string) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return &Server{dsn: dsn, external: true}, nil
	}
	s, err := newServer(settings)
	if err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return s, nil
}

// newServer makes the private directory of a throwaway server (owned by the
// user that runs the binaries) and its watchdog; settings are lines
// "name = value" that replace or add to those of writeConfig.
func newServer(settings []string) (*Server, error) {
	bindir, err := binDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bindir: bindir, settings: settings}
	if os.Geteuid() == 0 {
		s.runAs = "postgres"
	}
	if s.dir, err = os.MkdirTemp("", "schedulerd-pgtest-"); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s.data = filepath.Join(s.dir, "data")
	s.log = filepath.Join(s.dir, "postgres.log")
	if s.runAs != "" {
		u, err := user.Lookup(s.runAs)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("start postgres: running as root, and there is no %s user to run initdb as: %w", s.runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			s.Stop()
			return nil, fmt.Errorf("start postgres: %w", err)
		}
	}
	if err := s.startWatchdog(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return s, nil
}

func (s *Server) start() error {
	out, err := s.run("initdb", "-D", s.data, "--username=postgres", "--auth=trust", "--no-sync",
		"--encoding=UTF8", "--locale=C")
	if err != nil {
		return fmt.Errorf("initdb: %w: %s", err, tail(out))
	}
	return s.listen()
}

// listen writes the config with a free port and starts the server. Another
// process may take the free port before the server binds it: then it tries
// another.
func (s *Server) listen() error {
	var err error
	for try := 0; ; try++ {
		if s.port, err = freePort(); err != nil {
			return err
		}
		if err := s.writeConfig(); err != nil {
			return err
		}
		err := s.pgctl("start", "-w", "-t", "30", "-l", s.log)
		if err == nil {
			break
		}
		logText, _ := os.ReadFile(s.log)
		if try < 4 && strings.Contains(string(logText), "could not bind") {
			_ = os.Remove(s.log)
			continue
		}
		return fmt.Errorf("%w; server log: %s", err, tail(logText))
	}
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	return nil
}

// writeConfig writes the settings of a disposable server, with s.settings
// replacing or adding to them. They go to postgresql.auto.conf, read last,
// so restarts keep them.
func (s *Server) writeConfig() error {
	conf := []string{
		"port = " + strconv.Itoa(s.port),
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + strings.ReplaceAll(s.dir, "'", "''") + "'",
		// Durability is worthless for a throwaway server, and costly.
		"fsync = off",
		"synchronous_commit = off",
		"full_page_writes = off",
		"wal_level = minimal",
		"max_wal_senders = 0",
		"max_connections = 200",
		// PostgreSQL's own default: the benchmark's server is this one,
		// and 16MB made its figures those of a server short of cache.
		"shared_buffers = 128MB",
		"autovacuum = off",
		"log_min_messages = warning",
	}
	for _, line := range s.settings {
		name, _, _ := strings.Cut(line, "=")
		i := slices.IndexFunc(conf, func(l string) bool {
			n, _, _ := strings.Cut(l, "=")
			return strings.TrimSpace(n) == strings.TrimSpace(name)
		})
		if i < 0 {
			conf = append(conf, line)
		} else {
			conf[i] = line
		}
	}
	path := filepath.Join(s.data, "postgresql.auto.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return s.chown(path)
}

func (s *Server) chown(path string) error {
	if s.runAs == "" {
		return nil
	}
	fi, err := os.Stat(s.data)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return os.Chown(path, int(st.Uid), int(st.Gid))
}

// startWatchdog starts a process that waits for this process to end (its
// stdin, a pipe from us, reaches EOF however we end), then stops the server
// and removes the directory. It ignores the terminal's signals and lives in
// its own session, so a Ctrl-C of the tests still cleans up.
func (s *Server) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	stop := append(s.command("pg_ctl"), "stop", "-D", s.data, "-m", "immediate", "-w", "-t", "30")
	cmd := exec.Command("/bin/sh", append([]string{"-c",
		`trap '' HUP INT TERM QUIT PIPE; read -r _; dir=$1; shift; "$@" >/dev/null 2>&1; rm -rf "$dir"`,
		"pgtest-watchdog", s.dir}, stop...)...)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("watchdog: %w", err)
	}
	s.watchdog, s.watchdogPipe = cmd, w
	return nil
}

// command returns the argv that runs the PostgreSQL binary name, as the
// unprivileged user when needed.
func (s *Server) command(name string) []string {
	bin := filepath.Join(s.bindir, name)
	if s.runAs != "" {
		return []string{"runuser", "-u", s.runAs, "--", bin}
	}
	return []string{bin}
}

// run runs a PostgreSQL binary in the server's directory and returns its output.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	argv := append(s.command(name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = append(cleanEnv(), "LC_ALL=C")
	// pg_ctl's server redirects its own output to the log; should anything
	// keep our pipe open, do not wait for it.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// cleanEnv is our environment without the libpq variables, which would
// point the binaries at another server.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// pgctl runs pg_ctl action on the server's data directory.
func (s *Server) pgctl(action string, args ...string) error {
	out, err := s.run("pg_ctl", append([]string{action, "-D", s.data}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", action, err, tail(out))
	}
	return nil
}

// Installed returns an error saying what is missing when the PostgreSQL
// server binaries that Start and StartPair run are not installed.
func Installed() error {
	_, err := binDir()
	return err
}

// binDir returns the directory of the server binaries.
func binDir() (string, error) {
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	// pg_config may come from a client package (libpq-dev) while the server
	// binaries are elsewhere: Debian keeps them per major version.
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	if err == nil {
		err = errors.New("initdb not found next to pg_config")
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (pg_config --bindir: %v); install postgresql or set %s", err, EnvDSN)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of a command's output or a log, for an error.
func tail(b []byte) string {
	const max = 2000
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return s
}

// Stop stops a throwaway server at once (pg_ctl stop -m immediate) and
// removes its directory. It does nothing for an external server, and is
// safe to call more than once and on nil.
func (s *Server) Stop() {
	if s == nil || s.external {
		return
	}
	s.stopOnce.Do(func() {
		if s.port != 0 {
			_ = s.pgctl("stop", "-m", "immediate", "-w", "-t", "30")
		}
		_ = os.RemoveAll(s.dir)
		if s.watchdog != nil {
			s.watchdogPipe.Close()
			_ = s.watchdog.Wait()
		}
	})
}

// DSN returns the DSN of the server's administrative connection.
func (s *Server) DSN() string { return s.dsn }

// Require skips the test when there is no server (s is nil).
func (s *Server) Require(t testing.TB) {
	t.Helper()
	if s == nil {
		testtool.Skip(t, "no PostgreSQL server (apt-get install postgresql): "+skipReason)
	}
}

// NewDatabase creates a database with a unique name and returns its DSN.
// The database is dropped (WITH (FORCE)) when the test ends. On a nil
// server it skips the test.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.Require(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("schedulerd_test_%s_%d", hex.EncodeToString(b[:]), s.dbs.Add(1))
	ident := pgx.Identifier{name}.Sanitize()
	if err := s.admin(`CREATE DATABASE ` + ident); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.admin(`DROP DATABASE IF EXISTS ` + ident + ` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return DatabaseDSN(s.dsn, name)
}

// EnableAutovacuum turns autovacuum on in a throwaway server, which starts
// without it (tests want no background work); the benchmark, whose
// sections write for minutes, runs with it on as a real server does. A
// server named by SCHEDULERD_TEST_POSTGRES keeps its own settings.
func (s *Server) EnableAutovacuum() error {
	if s.external {
		return nil
	}
	if err := s.admin(`ALTER SYSTEM SET autovacuum = on`); err != nil {
		return err
	}
	return s.admin(`SELECT pg_reload_conf()`)
}

// admin runs one statement on the administrative connection.
func (s *Server) admin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// DatabaseDSN returns dsn with its database replaced by name; dsn is a URL
// or a list of key=value settings.
func DatabaseDSN(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + name
			q := u.Query()
			if q.Has("dbname") {
				q.Set("dbname", name)
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	// In key=value form the last setting of a key wins.
	return dsn + " dbname=" + name
}

// Restart restarts a throwaway server (pg_ctl restart -m fast): every
// connection breaks, and the data stays. For outage tests.
func (s *Server) Restart() error {
	if err := s.own(); err != nil {
		return err
	}
	return s.pgctl("restart", "-m", "fast", "-w", "-t", "30", "-l", s.log)
}

// StopServer stops a throwaway server (pg_ctl stop -m fast) and keeps its
// data, so that StartServer starts it again. For outage tests.
func (s *Server) StopServer() error {
	if err := s.own(); err != nil {
		return err
	}
	return s.pgctl("stop", "-m", "fast", "-w", "-t", "30")
}

// StartServer starts a server that StopServer stopped.
func (s *Server) StartServer() error {
	if err := s.own(); err != nil {
		return err
	}
	return s.pgctl("start", "-w", "-t", "30", "-l", s.log)
}

func (s *Server) own() error {
	switch {
	case s == nil:
		return errors.New("no PostgreSQL server")
	case s.external:
		return fmt.Errorf("the server of %s is not ours to stop or restart", EnvDSN)
	}
	return nil
}

// Main is for TestMain: it starts one server for the package, runs the
// tests, and stops the server; its result is the exit code:
//
//	var srv *pgtest.Server
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &srv)) }
//
// When no server can start, Main fails (exit code 1) if $CI is set: a
// missing PostgreSQL on CI is a failure, not a skip. Otherwise it prints why
// and runs the tests with a nil server, on which NewDatabase and Require
// skip the test with that reason.
func Main(m *testing.M, srv **Server) int {
	s, err := Start()
	if err != nil {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "pgtest: no PostgreSQL server, and $CI is set: %v\n", err)
			return 1
		}
		skipReason = err.Error()
		fmt.Fprintf(os.Stderr, "pgtest: no PostgreSQL server, tests that need one skip: %v\n", err)
		*srv = nil
		return m.Run()
	}
	*srv = s
	defer s.Stop()
	return m.Run()
}
