package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
		rows, err := c.query(ctx, sqlNodesWithJobs+` WHERE n.id = ?`+sqlNodesOrder, p.ID)
		if err != nil {
			return err
		}
		nodes, err := scanNodes(rows, at)
		if err != nil {
			return err
		}
		if len(nodes) > 0 {
			prev = nodes[0]
		}
		if stored := ""; prev != nil || p.Replace != "" {
			if prev != nil {
				stored = prev.Incarnation
			}
			if stored != p.Replace {
				return &store.NodeHeldError{ID: p.ID, Held: prev}
			}
		}
		_, err = c.exec(ctx, `INSERT INTO nodes (id, incarnation, host, pid, version, started_at, heartbeat_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET incarnation = excluded.incarnation, host = excluded.host,
				pid = excluded.pid, version = excluded.version, started_at = excluded.started_at,
				heartbeat_at = excluded.heartbeat_at`,
			p.ID, p.Incarnation, p.Host, p.PID, p.Version, at.UnixMicro(), at.UnixMicro())
		if err != nil {
			return err
		}
		return writeNodeJobs(ctx, c, p.ID, p.Jobs)
	})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return prev, err
		}
		return nil, err
	}
	return prev, nil
}

// nodeJobsPart bounds the JSON of one part of a node's job list
// (node_jobs), in bytes, so that its row fits in a page of the database
// (4 KiB): what SQLite allocates to write or read a part is as small.
const nodeJobsPart = 4000

// jobParts returns names as JSON arrays of at most nodeJobsPart bytes each
// (a name longer than that is a part of its own), in order; none for no
// names.
func jobParts(names []string) []string {
	var (
		parts []string
		b     []byte
	)
	for _, name := range names {
		q, _ := json.Marshal(name) // a string always marshals
		if len(b) > 0 && len(b)+len(q)+2 > nodeJobsPart {
			parts, b = append(parts, string(append(b, ']'))), b[:0]
		}
		if len(b) == 0 {
			b = append(b, '[')
		} else {
			b = append(b, ',')
		}
		b = append(b, q...)
	}
	if len(b) > 0 {
		parts = append(parts, string(append(b, ']')))
	}
	return parts
}

// writeNodeJobs replaces the job list of node id with names.
func writeNodeJobs(ctx context.Context, c conn, id string, names []string) error {
	if _, err := c.exec(ctx, `DELETE FROM node_jobs WHERE node_id = ?`, id); err != nil {
		return err
	}
	for i, part := range jobParts(names) {
		if _, err := c.exec(ctx, `INSERT INTO node_jobs (node_id, part, jobs_json) VALUES (?, ?, ?)`, id, i, part); err != nil {
			return err
		}
	}
	return nil
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
	query := sqlNodesWithJobs + sqlNodesOrder
	if !withJobs {
		query = `SELECT ` + nodeColumns + `, NULL FROM nodes n ORDER BY n.id`
	}
	rows, err := s.read().query(ctx, query)
	if err != nil {
		return nil, fail("list nodes", err)
	}
	nodes, err := scanNodes(rows, now(time.Time{}))
	if err != nil {
		return nil, fail("list nodes", err)
	}
	return nodes, nil
}
