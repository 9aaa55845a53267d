package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/store"
)

// NodeRegister records a new incarnation of a node by compare-and-set on
// the stored incarnation (see store.Store), under the node row's lock, and
// returns the row it replaced, with its Age by p.Now or else by the
// database clock.
func (s *Store) NodeRegister(ctx context.Context, p store.NodeRegisterParams) (*store.Node, error) {
	if p.ID == "" || p.Incarnation == "" {
		return nil, errors.New("register node: id and incarnation must be set")
	}
	jobNames := p.Jobs
	if jobNames == nil {
		jobNames = []string{}
	}
	var prev *store.Node
	err := s.write(ctx, "register node "+p.ID, func(c *conn) (err error) {
		read := func(lock string) (*store.Node, error) {
			n, err := scanNode(c.queryRow(ctx, `SELECT `+nodeColumns+`, COALESCE($2::timestamptz, now())
				FROM nodes WHERE id = $1`+lock, p.ID, ts(p.Now)))
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, nil
			}
			return n, err
		}
		if prev, err = read(` FOR UPDATE`); err != nil {
			return err
		}
		if prev == nil && p.Replace == "" {
			// A concurrent registration of the same id waits for ours,
			// then inserts nothing.
			tag, err := c.exec(ctx, `INSERT INTO nodes (id, incarnation, host, pid, version, started_at, heartbeat_at, jobs)
				VALUES ($1, $2, $3, $4, $5, COALESCE($6::timestamptz, now()), COALESCE($6::timestamptz, now()), $7)
				ON CONFLICT (id) DO NOTHING`,
				p.ID, p.Incarnation, p.Host, p.PID, p.Version, ts(p.Now), jobNames)
			if err == nil {
				err = releaseArgs(ctx, c, 7)
			}
			if err != nil || tag.RowsAffected() == 1 {
				return err
			}
			if prev, err = read(``); err != nil {
				return err
			}
			return &store.NodeHeldError{ID: p.ID, Held: prev}
		}
		if prev == nil || prev.Incarnation != p.Replace {
			return &store.NodeHeldError{ID: p.ID, Held: prev}
		}
		_, err = c.exec(ctx, `UPDATE nodes SET incarnation = $2, host = $3, pid = $4, version = $5,
				started_at = COALESCE($6::timestamptz, now()), heartbeat_at = COALESCE($6::timestamptz, now()), jobs = $7
			WHERE id = $1`,
			p.ID, p.Incarnation, p.Host, p.PID, p.Version, ts(p.Now), jobNames)
		if err != nil {
			return err
		}
		return releaseArgs(ctx, c, 7)
	})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return prev, err
		}
		return nil, err
	}
	return prev, nil
}

// releaseArgs makes the connection let go of the n arguments of its last
// statement. pgx keeps a reference to the encoded bytes of each argument,
// all in one buffer, until a later statement of the connection puts an
// argument in its place; a node's job list of 100,000 names makes that
// buffer megabytes, which an idle connection of the pool held long after
// the start.
func releaseArgs(ctx context.Context, c *conn, n int) error {
	sql, args := []string{}, make([]any, n)
	for i := range args {
		sql, args[i] = append(sql, fmt.Sprintf("$%d::int", i+1)), 0
	}
	_, err := c.exec(ctx, "SELECT "+strings.Join(sql, ", "), args...)
	return err
}

// NodeDelete removes a node's row if it still belongs to p.Incarnation.
func (s *Store) NodeDelete(ctx context.Context, p store.NodeDeleteParams) error {
	c := s.read()
	tag, err := c.exec(ctx, `DELETE FROM nodes WHERE id = $1 AND incarnation = $2`, p.ID, p.Incarnation)
	if err != nil {
		return fail("delete node "+p.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return nodeMismatch(ctx, c, "delete node", p.ID, p.Incarnation, time.Time{})
}

// nodeMismatch explains why a write fenced by (nodeID, incarnation), and
// by heartbeatAt when it is set, found no row: the node is gone, or its
// row is not that one.
func nodeMismatch(ctx context.Context, c *conn, op, nodeID, incarnation string, heartbeatAt time.Time) error {
	var other string
	var hb time.Time
	err := c.queryRow(ctx, `SELECT incarnation, heartbeat_at FROM nodes WHERE id = $1`, nodeID).Scan(&other, &hb)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: node %s: %w", op, nodeID, store.ErrNotFound)
	}
	if err != nil {
		return fail(op, err)
	}
	return fmt.Errorf("%s: %w", op, &store.NodeFencedError{ID: nodeID, Incarnation: incarnation, HeartbeatAt: heartbeatAt,
		Found: other, FoundHeartbeatAt: hb})
}

// NodeMarkLost marks a silent node lost; see store.Store.
func (s *Store) NodeMarkLost(ctx context.Context, p store.NodeMarkLostParams) (string, error) {
	lost := store.LostIncarnation(p.Incarnation)
	c := s.read()
	tag, err := c.exec(ctx, `UPDATE nodes SET incarnation = $3 WHERE id = $1 AND incarnation = $2 AND heartbeat_at = $4`,
		p.ID, p.Incarnation, lost, p.HeartbeatAt)
	if err != nil {
		return "", fail("mark node lost "+p.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return lost, nil
	}
	return "", nodeMismatch(ctx, c, "mark node lost", p.ID, p.Incarnation, p.HeartbeatAt)
}

// NodeHeartbeat refreshes the heartbeat of the node's incarnation. It runs
// on the heartbeat pool, never waiting behind the main pool's claims.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	c := &conn{q: s.heartbeat, n: &s.statements}
	tag, err := c.exec(ctx, `UPDATE nodes SET heartbeat_at = COALESCE($3::timestamptz, now())
		WHERE id = $1 AND incarnation = $2`, p.ID, p.Incarnation, ts(p.Now))
	if err != nil {
		return fail("node heartbeat "+p.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return nodeMismatch(ctx, c, "node heartbeat", p.ID, p.Incarnation, time.Time{})
}

// NodesList returns every registered node, by id, with its Age by the
// database clock.
func (s *Store) NodesList(ctx context.Context, withJobs bool) ([]*store.Node, error) {
	cols := nodeColumns
	if !withJobs {
		cols = strings.Replace(cols, "jobs", "'{}'::text[]", 1)
	}
	rows, err := s.read().query(ctx, `SELECT `+cols+`, now() FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fail("list nodes", err)
	}
	nodes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Node, error) { return scanNode(row) })
	if err != nil {
		return nil, fail("list nodes", err)
	}
	return nodes, nil
}
