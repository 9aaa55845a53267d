package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

func jsonStrings(ss []string) string {
	if ss == nil {
		ss = []string{}
	}
	b, _ := json.Marshal(ss) // a []string always marshals
	return string(b)
}

// NodeRegister records a new incarnation of a node by compare-and-set on
// the stored incarnation (see store.Store) and returns the row it replaced,
// with its Age by the given time.
func (s *Store) NodeRegister(ctx context.Context, p store.NodeRegisterParams) (*store.Node, error) {
	if p.ID == "" || p.Incarnation == "" {
		return nil, errors.New("register node: id and incarnation must be set")
	}
	at := now(p.Now)
	var prev *store.Node
	err := s.write(ctx, "register node "+p.ID, func(c conn) (err error) {
		prev, err = scanNode(c.queryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE id = ?`, p.ID), at)
		if errors.Is(err, sql.ErrNoRows) {
			prev, err = nil, nil
		}
		if err != nil {
			return err
		}
		if stored := ""; prev != nil || p.Replace != "" {
			if prev != nil {
				stored = prev.Incarnation
			}
			if stored != p.Replace {
				return &store.NodeHeldError{ID: p.ID, Held: prev}
			}
		}
		_, err = c.exec(ctx, `INSERT INTO nodes (id, incarnation, host, pid, version, started_at, heartbeat_at, jobs_json)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET incarnation = excluded.incarnation, host = excluded.host,
				pid = excluded.pid, version = excluded.version, started_at = excluded.started_at,
				heartbeat_at = excluded.heartbeat_at, jobs_json = excluded.jobs_json`,
			p.ID, p.Incarnation, p.Host, p.PID, p.Version, at.UnixMicro(), at.UnixMicro(), jsonStrings(p.Jobs))
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return prev, err
		}
		return nil, err
	}
	return prev, nil
}

// NodeDelete removes a node's row if it still belongs to p.Incarnation.
func (s *Store) NodeDelete(ctx context.Context, p store.NodeDeleteParams) error {
	return s.write(ctx, "delete node "+p.ID, func(c conn) error {
		return fencedNodeWrite(ctx, c, p.ID, p.Incarnation, time.Time{},
			`DELETE FROM nodes WHERE id = ? AND incarnation = ?`, p.ID, p.Incarnation)
	})
}

// NodeMarkLost marks a silent node lost; see store.Store.
func (s *Store) NodeMarkLost(ctx context.Context, p store.NodeMarkLostParams) (string, error) {
	lost := store.LostIncarnation(p.Incarnation)
	err := s.write(ctx, "mark node lost "+p.ID, func(c conn) error {
		return fencedNodeWrite(ctx, c, p.ID, p.Incarnation, p.HeartbeatAt,
			`UPDATE nodes SET incarnation = ? WHERE id = ? AND incarnation = ? AND heartbeat_at = ?`,
			lost, p.ID, p.Incarnation, p.HeartbeatAt.UnixMicro())
	})
	if err != nil {
		return "", err
	}
	return lost, nil
}

// NodeHeartbeat refreshes the heartbeat of the node's incarnation.
func (s *Store) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	at := now(p.Now)
	return s.write(ctx, "node heartbeat "+p.ID, func(c conn) error {
		return fencedNodeWrite(ctx, c, p.ID, p.Incarnation, time.Time{},
			`UPDATE nodes SET heartbeat_at = ? WHERE id = ? AND incarnation = ?`, at.UnixMicro(), p.ID, p.Incarnation)
	})
}

// fencedNodeWrite runs a write of node nodeID's row that matches only while
// the row is incarnation's (and, when heartbeatAt is set, has that
// heartbeat), and explains a write that matched no row: ErrNotFound when
// the node is gone, ErrFenced when its row is another's.
func fencedNodeWrite(ctx context.Context, c conn, nodeID, incarnation string, heartbeatAt time.Time,
	query string, args ...any) error {
	res, err := c.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var other string
	var hb int64
	err = c.queryRow(ctx, `SELECT incarnation, heartbeat_at FROM nodes WHERE id = ?`, nodeID).Scan(&other, &hb)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("node %s: %w", nodeID, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	return &store.NodeFencedError{ID: nodeID, Incarnation: incarnation, HeartbeatAt: heartbeatAt,
		Found: other, FoundHeartbeatAt: time.UnixMicro(hb)}
}

// NodesList returns every registered node, by id.
func (s *Store) NodesList(ctx context.Context, withJobs bool) ([]*store.Node, error) {
	at := now(time.Time{})
	cols := nodeColumns
	if !withJobs {
		cols = strings.Replace(cols, "jobs_json", "'[]'", 1)
	}
	rows, err := s.read().query(ctx, `SELECT `+cols+` FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fail("list nodes", err)
	}
	defer rows.Close()
	var nodes []*store.Node
	for rows.Next() {
		n, err := scanNode(rows, at)
		if err != nil {
			return nil, fail("list nodes", err)
		}
		nodes = append(nodes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list nodes", err)
	}
	return nodes, nil
}
