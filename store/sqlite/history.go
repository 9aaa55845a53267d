package sqlite

import (
	"context"
	"slices"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// sqlRunEvents and sqlRunAttempts read a run's events and attempts, and
// while it runs, the claim's event and the attempt that its run's row
// stands for until the attempt ends (claimed_from), in one snapshot. An
// attempt row stands for two events, read from that row (claimed_from,
// end_node): its claim's and its end's. They go in the order they
// happened among the rows of events by attempt number: a claim starts
// attempt n, no event is written while an attempt runs (each change of a
// running run ends its attempt), and each event written between the end of
// attempt n and the claim of n+1 carries attempt n. So by attempt, and in
// an attempt the claim, the end, then the rows of events in their order.
const (
	sqlRunEvents = `SELECT ` + rowscan.EventColumns + ` FROM (
			SELECT attempt AS n, 2 AS k, id AS seq, ` + rowscan.EventColumns + ` FROM events WHERE run_id = ?1
			UNION ALL
			SELECT number, 0, 0, run_id, started_at, node, number, claimed_from, 'running', 'claimed', '', ''
			FROM attempts WHERE run_id = ?1
			UNION ALL
			SELECT number, 1, 0, run_id, finished_at, end_node, number, 'running', status, reason, error,
				CASE WHEN reason = 'cancelled' THEN (SELECT cancelled_by FROM runs WHERE id = ?1) ELSE '' END
			FROM attempts WHERE run_id = ?1
			UNION ALL
			SELECT attempt, 0, 0, id, started_at, node, attempt, claimed_from, 'running', 'claimed', '', '' FROM runs
			WHERE id = ?1 AND status = 'running')
		ORDER BY n, k, seq`
	sqlRunAttempts = `SELECT ` + rowscan.AttemptColumns + ` FROM (
			SELECT ` + rowscan.AttemptColumns + ` FROM attempts WHERE run_id = ?1
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', x'', 0, 0
			FROM runs WHERE id = ?1 AND status = 'running')
		ORDER BY number`
)

// RunEvents returns a run's history, oldest first.
func (s *Store) RunEvents(ctx context.Context, id string) ([]*jobs.Event, error) {
	c := s.read()
	rows, err := rowscan.SQL(c.query(ctx, sqlRunEvents, id))
	events, err := rowscan.All(rows, err, rowscan.Event[micros])
	if err != nil {
		return nil, fail("run events", err)
	}
	if len(events) == 0 { // every run has its creation event
		if _, err := getRun(ctx, c, id); err != nil {
			return nil, fail("run events", err)
		}
	}
	return events, nil
}

// RunAttempts returns a run's attempts, oldest first, with their output.
func (s *Store) RunAttempts(ctx context.Context, id string) ([]*jobs.Attempt, error) {
	c := s.read()
	rows, err := rowscan.SQL(c.query(ctx, sqlRunAttempts, id))
	attempts, err := rowscan.All(rows, err, rowscan.Attempt[micros])
	if err != nil {
		return nil, fail("run attempts", err)
	}
	if len(attempts) == 0 {
		if _, err := getRun(ctx, c, id); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	return attempts, nil
}

// sqlRunAttemptsClipped reads attempts as sqlRunAttempts does, of one
// number (?2, 0 for all), the newest ?4 (-1 for all), each output stored
// of more than 2*?3 bytes (?3 > 0) as its first and its last ?3 bytes,
// with the length stored: the rows rowscan.ClippedAttempt reads. A
// blob's length is in its record: it is not read for it.
const sqlRunAttemptsClipped = `SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code,
		error, reason, head, output_bytes, truncated, tail, stored FROM (
			SELECT run_id, number, node, incarnation, started_at, finished_at, status, exit_code, error, reason,
				CASE WHEN ?3 = 0 OR length(output) <= 2 * ?3 THEN output ELSE substr(output, 1, ?3) END AS head,
				output_bytes, truncated,
				CASE WHEN ?3 = 0 OR length(output) <= 2 * ?3 THEN x'' ELSE substr(output, -?3) END AS tail,
				length(output) AS stored
			FROM attempts WHERE run_id = ?1 AND (?2 = 0 OR number = ?2)
			UNION ALL
			SELECT id, attempt, node, incarnation, started_at, NULL, 'running', NULL, '', '', x'', 0, 0, x'', 0
			FROM runs WHERE id = ?1 AND status = 'running' AND (?2 = 0 OR attempt = ?2))
		ORDER BY number DESC LIMIT ?4`

// RunAttemptsClipped returns attempts of a run with a bounded part of
// their output, oldest first.
func (s *Store) RunAttemptsClipped(ctx context.Context, p store.AttemptsParams) ([]*store.ClippedAttempt, error) {
	c := s.read()
	limit := -1
	if p.Newest > 0 {
		limit = p.Newest
	}
	rows, err := rowscan.SQL(c.query(ctx, sqlRunAttemptsClipped, p.RunID, p.Number, max(p.Keep, 0), limit))
	out, err := rowscan.All(rows, err, rowscan.ClippedAttempt[micros])
	if err != nil {
		return nil, fail("run attempts", err)
	}
	if len(out) == 0 {
		if _, err := getRun(ctx, c, p.RunID); err != nil {
			return nil, fail("run attempts", err)
		}
	}
	slices.Reverse(out)
	return out, nil
}
