package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a primary and a standby that streams the primary's WAL and that
// the primary waits for at every commit (synchronous_standby_names = '*',
// synchronous_commit = on): two throwaway servers, each in its own
// directory with its own watchdog, as Start makes one. It is for runs that
// fail the primary over: Failover stops the primary and promotes the
// standby, and Rebuild makes the old primary the new primary's standby, so
// that the next failover finds one. SCHEDULERD_TEST_POSTGRES does not
// apply: a pair is always made here.
type Pair struct {
	mu               sync.Mutex
	primary, standby *Server
}

// pairSettings are the replication settings of both servers of a pair.
// fsync stays off: the servers are stopped and killed, never the machine,
// and the operating system keeps what was written. A primary starts
// without a synchronous standby and is given it (syncStandby) once its
// standby streams.
var pairSettings = []string{
	"wal_level = replica",
	"max_wal_senders = 10",
	"wal_keep_size = '1GB'",
	"hot_standby = on",
	"synchronous_commit = on",
	"synchronous_standby_names = ''",
	"wal_retrieve_retry_interval = '1s'",
	"wal_receiver_timeout = '10s'",
	"wal_sender_timeout = '10s'",
	// A pair runs for long, with writes: as a real server does.
	"autovacuum = on",
}

// StartPair starts a primary and a standby of it, and returns once the
// standby streams and the primary waits for it at each commit.
func StartPair() (*Pair, error) {
	primary, err := newServer(slices.Clone(pairSettings))
	if err != nil {
		return nil, err
	}
	p := &Pair{primary: primary}
	if err := primary.start(); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start the primary: %w", err)
	}
	if p.standby, err = newServer(nil); err != nil {
		p.Stop()
		return nil, err
	}
	if err := p.standby.follow(primary); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start the standby: %w", err)
	}
	if err := primary.syncStandby(); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// Primary returns the server that takes writes.
func (p *Pair) Primary() *Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

// Standby returns the other server: a standby of the primary, or the old
// primary, stopped, between Failover and Rebuild.
func (p *Pair) Standby() *Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.standby
}

// RestartPrimary restarts the primary: with immediate as a crash does
// (pg_ctl stop -m immediate, then start: the server recovers from its WAL),
// else with pg_ctl restart -m fast. Every connection to it breaks; the
// standby connects again by itself.
func (p *Pair) RestartPrimary(immediate bool) error {
	s := p.Primary()
	if !immediate {
		return s.pgctl("restart", "-m", "fast", "-w", "-t", "60", "-l", s.log)
	}
	if err := s.pgctl("stop", "-m", "immediate", "-w", "-t", "30"); err != nil {
		return err
	}
	return s.pgctl("start", "-w", "-t", "60", "-l", s.log)
}

// Failover stops the primary at once (pg_ctl stop -m immediate, as a crash
// would) and promotes the standby, which then takes writes without waiting
// for a standby until Rebuild gives it one. The old primary stays down:
// Standby returns it.
func (p *Pair) Failover() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.primary.pgctl("stop", "-m", "immediate", "-w", "-t", "30"); err != nil {
		return fmt.Errorf("stop the primary: %w", err)
	}
	if err := p.standby.pgctl("promote", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("promote the standby: %w", err)
	}
	if err := p.standby.admin(`ALTER SYSTEM SET synchronous_standby_names = ''`); err != nil {
		return fmt.Errorf("the new primary: %w", err)
	}
	if err := p.standby.admin(`SELECT pg_reload_conf()`); err != nil {
		return fmt.Errorf("the new primary: %w", err)
	}
	p.primary, p.standby = p.standby, p.primary
	return nil
}

// Rebuild makes the server that Failover stopped a standby of the primary
// again: it is stopped if it runs, made anew from a base backup of the
// primary (pg_basebackup), started on a new port, and made the primary's
// synchronous standby once it streams.
func (p *Pair) Rebuild() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.standby.pgctl("stop", "-m", "immediate", "-w", "-t", "30")
	if err := p.standby.follow(p.primary); err != nil {
		return fmt.Errorf("rebuild the standby: %w", err)
	}
	return p.primary.syncStandby()
}

// Stop stops both servers and removes their directories.
func (p *Pair) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.primary.Stop()
	p.standby.Stop()
}

// follow makes s a standby of primary from a base backup of it (whatever
// s's data directory held goes) and starts it.
func (s *Server) follow(primary *Server) error {
	if err := os.RemoveAll(s.data); err != nil {
		return err
	}
	out, err := s.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", s.data, "-X", "stream", "-c", "fast", "--no-sync")
	if err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, tail(out))
	}
	// The backup holds the primary's postgresql.auto.conf, which listen
	// writes over with this server's own settings.
	s.settings = append(slices.Clone(pairSettings), fmt.Sprintf(
		"primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=standby'", primary.port))
	signal := filepath.Join(s.data, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return err
	}
	if err := s.chown(signal); err != nil {
		return err
	}
	return s.listen()
}

// syncStandby makes the primary s wait for its standby at each commit, once
// the standby streams, and returns when the standby is its synchronous one.
func (s *Server) syncStandby() error {
	if err := s.waitQuery(`SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`); err != nil {
		return fmt.Errorf("wait for the standby to stream: %w", err)
	}
	if err := s.admin(`ALTER SYSTEM SET synchronous_standby_names = '*'`); err != nil {
		return err
	}
	if err := s.admin(`SELECT pg_reload_conf()`); err != nil {
		return err
	}
	if err := s.waitQuery(`SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`); err != nil {
		return fmt.Errorf("wait for the standby to be synchronous: %w", err)
	}
	return nil
}

// waitQuery polls a count on the server until it is at least 1, for up to
// a minute.
func (s *Server) waitQuery(sql string) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		n, err := s.count(sql)
		if err == nil && n > 0 {
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	if last == nil {
		last = errors.New("none after a minute")
	}
	return last
}

func (s *Server) count(sql string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// Addr is the server's host:port on 127.0.0.1; empty for the server of
// SCHEDULERD_TEST_POSTGRES.
func (s *Server) Addr() string {
	if s.port == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(s.port)
}
