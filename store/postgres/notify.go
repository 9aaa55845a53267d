package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Listener timing: reconnects back off from listenRetryMin to listenRetryMax;
// an idle connection is pinged every listenPing, so that a connection that
// died silently is noticed.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
	listenPing     = 30 * time.Second
)

// Wakeups returns a channel that receives a value, coalesced, after any
// process made runs or made them due in this database (store.Notifier).
func (s *Store) Wakeups() <-chan struct{} { return s.wakeups }

// wake sends a wakeup unless one is waiting already.
func (s *Store) wake() {
	select {
	case s.wakeups <- struct{}{}:
	default:
	}
}

// listen keeps a dedicated connection (not one of the pools') listening on
// the wakeup channel until ctx ends, and reconnects with backoff when it
// drops. After a reconnection it sends one wakeup, since notifications sent
// while it was away are lost.
func (s *Store) listen(ctx context.Context) {
	defer close(s.listenDone)
	delay := listenRetryMin
	everConnected, failing := false, false
	for {
		conn, err := s.listenConnect(ctx)
		if err == nil {
			if everConnected {
				s.wake()
				s.logger.InfoContext(ctx, "listening for wakeups again")
			}
			if !everConnected {
				close(s.listening)
			}
			everConnected, failing, delay = true, false, listenRetryMin
			err = s.listenLoop(ctx, conn)
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		if !failing {
			s.logger.WarnContext(ctx, "listen for wakeups: no connection, retrying", "error", err)
			failing = true
		} else {
			s.logger.DebugContext(ctx, "listen for wakeups: reconnect failed", "error", err, "retry_in", delay)
		}
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, listenRetryMax)
	}
}

// listenConnect opens the listening connection.
func (s *Store) listenConnect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.listenCfg)
	if err != nil {
		return nil, err
	}
	if err := s.checkWritable(ctx, conn); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	s.statements.Add(1)
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel+`; LISTEN `+resultsChannel); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	// Results committed while nobody listened were not heard of.
	s.results.Lost()
	return conn, nil
}

// listenLoop turns notifications into wakeups until the connection fails or
// ctx ends.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn) error {
	for {
		wait, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err == nil && n.Channel == resultsChannel:
			s.publishNotification(n)
		case err == nil:
			s.wake()
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			// Idle: make sure the connection still works.
			s.statements.Add(1)
			if err := conn.Ping(ctx); err != nil {
				return err
			}
		default:
			return err
		}
	}
}
