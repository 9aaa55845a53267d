package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// sqlRunEvents and sqlRunAttempts read a run's events and attempts, and
// while it runs, the claim's event and the attempt that its run's row
// stands for until the attempt ends (claimed_from), in one snapshot.
//
// The claim's and the end's events of an attempt are read from its row of
// attempts (claimed_from, end_node). They go in the order they
// happened among the rows of events by attempt number: a claim starts
// attempt n, no event is written while an attempt runs (each change of a
// running run ends its attempt), and each event written between the end of
// attempt n and the claim of n+1 carries attempt n. So by attempt, and in
// an attempt the claim, the end, then the rows of events in their order.
const (
	sqlRunEvents = `SELECT ` + rowscan.EventColumns + ` FROM (
			SELECT attempt AS n, 2 AS k, id AS seq, ` + rowscan.EventColumns + ` FROM events WHERE run_id = $1
			UNION ALL
			SELECT number, v.* FROM attempts CROSS JOIN LATERAL (VALUES
				(0, 0::bigint, run_id, started_at, node, number, claimed_from, 'running', 'claimed', '', ''),
				(1, 0, run_id, finished_at, end_node, number, 'running', status, reason, error,
					CASE WHEN reason = 'cancelled' THEN (SELECT cancelled_by FROM runs WHERE id = $1) ELSE '' END)) v
			WHERE run_id = $1
			UNION ALL
			SELECT attempt, 0, 0, id, started_at, node, attempt, claimed_from, 'running', 'claimed', '', '' FROM runs
			WHERE id = $1 AND status = 'running') e
		ORDER BY n, k, seq`
	sqlRunAttempts = `SELECT ` + rowscan.AttemptColumns + ` FROM (
			SELECT ` + rowscan.AttemptColumns + ` FROM attempts WHERE run_id = $1
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', ''::bytea, 0, false
			FROM runs WHERE id = $1 AND status = 'running') a
		ORDER BY number`
)

// RunEvents returns a run's history, oldest first.
func (s *Store) RunEvents(ctx context.Context, id string) ([]*jobs.Event, error) {
	c := s.read()
	rows, err := c.query(ctx, sqlRunEvents, id)
	if err != nil {
		return nil, fail("run events", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobs.Event, error) { return rowscan.Event[tstz](row) })
	if err != nil {
		return nil, fail("run events", err)
	}
	if len(events) == 0 { // every run has its creation event
		if _, err := getRun(ctx, c, id, false); err != nil {
			return nil, fail("run events", err)
		}
	}
	return events, nil
}

// RunAttempts returns a run's attempts, oldest first, with their output.
func (s *Store) RunAttempts(ctx context.Context, id string) ([]*jobs.Attempt, error) {
	c := s.read()
	rows, err := c.query(ctx, sqlRunAttempts, id)
	if err != nil {
		return nil, fail("run attempts", err)
	}
	attempts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobs.Attempt, error) { return rowscan.Attempt[tstz](row) })
	if err != nil {
		return nil, fail("run attempts", err)
	}
	if len(attempts) == 0 {
		if _, err := getRun(ctx, c, id, false); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	return attempts, nil
}

// sqlRunAttemptsClipped reads attempts as sqlRunAttempts does, of one
// number ($2, 0 for all), the newest $4 (NULL for all), each output
// stored of more than 2*$3 bytes ($3 > 0) as its first and its last $3
// bytes, with the length stored: the rows rowscan.ClippedAttempt reads.
const sqlRunAttemptsClipped = `SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
		error, reason, head, output_bytes, truncated, tail, stored FROM (
			SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason,
				CASE WHEN $3 = 0 OR octet_length(output) <= 2 * $3 THEN output ELSE substring(output FROM 1 FOR $3) END AS head,
				output_bytes, truncated,
				CASE WHEN $3 = 0 OR octet_length(output) <= 2 * $3 THEN ''::bytea
					ELSE substring(output FROM octet_length(output) - $3 + 1) END AS tail,
				octet_length(output)::bigint AS stored
			FROM attempts WHERE run_id = $1 AND ($2 = 0 OR number = $2)
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', ''::bytea, 0, false, ''::bytea, 0
			FROM runs WHERE id = $1 AND status = 'running' AND ($2 = 0 OR attempt = $2)) a
		ORDER BY number DESC LIMIT $4`

// RunAttemptsClipped returns attempts of a run with a bounded part of
// their output, oldest first.
func (s *Store) RunAttemptsClipped(ctx context.Context, p store.AttemptsParams) ([]*store.ClippedAttempt, error) {
	c := s.read()
	var limit *int64
	if p.Newest > 0 {
		n := int64(p.Newest)
		limit = &n
	}
	rows, err := c.query(ctx, sqlRunAttemptsClipped, p.RunID, int32(p.Number), int32(max(p.Keep, 0)), limit)
	out, err := rowscan.All(rows, err, rowscan.ClippedAttempt[tstz])
	if err != nil {
		return nil, fail("run attempts", err)
	}
	if len(out) == 0 {
		if _, err := getRun(ctx, c, p.RunID, false); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	slices.Reverse(out)
	return out, nil
}
