package postgres

import (
	"context"
	"time"
)

// RunsPrune deletes the runs that finished before the given time, with
// their events and attempts, in batches; see
// store.Store. It also deletes the occurrences of schedule ticks that are
// older than both the prune horizon and the job's cursor and whose run is
// gone: the cursor already keeps those ticks from firing again. Occurrences
// of one-off jobs, and of jobs without a cursor, stay forever.
func (s *Store) RunsPrune(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	c := s.read()
	total := 0
	for {
		// The runs with their events and attempts, in one statement.
		var n int
		err := c.queryRow(ctx, `WITH r AS (
				DELETE FROM runs WHERE id IN (
					SELECT id FROM runs WHERE finished_at IS NOT NULL AND finished_at < $1 AND status IN `+sqlTerminal+`
					ORDER BY finished_at LIMIT $2)
				RETURNING id
			), e AS (
				DELETE FROM events WHERE run_id IN (SELECT id FROM r)
			), a AS (
				DELETE FROM attempts WHERE run_id IN (SELECT id FROM r)
			)
			SELECT count(*) FROM r`, ts(before), batchSize).Scan(&n)
		if err != nil {
			return total, fail("prune runs", err)
		}
		total += n
		if n < batchSize {
			break
		}
	}
	for {
		tag, err := c.exec(ctx, `DELETE FROM occurrences WHERE (job, scheduled_at) IN (
			SELECT o.job, o.scheduled_at FROM occurrences o JOIN cursors c ON c.job = o.job
			WHERE o.scheduled_at < $1 AND o.scheduled_at < c.last AND o.kind = 'schedule'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = o.run_id)
			LIMIT $2)`, ts(before), batchSize)
		if err != nil {
			return total, fail("prune occurrences", err)
		}
		if tag.RowsAffected() < batchSize {
			break
		}
	}
	if total > 0 {
		s.logger.DebugContext(ctx, "pruned runs", "count", total, "before", before)
	}
	return total, nil
}
