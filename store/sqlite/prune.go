package sqlite

import (
	"context"
	"time"
)

// RunsPrune deletes the runs that finished before the given time, with
// their events and attempts, in batches; see store.Store. It also deletes
// the occurrences of schedule ticks that are older than both the prune
// horizon and the job's cursor and whose run is gone: the cursor already
// keeps those ticks from firing again. Occurrences of one-off jobs, and of
// jobs without a cursor, stay forever.
func (s *Store) RunsPrune(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	b := before.UnixMicro()
	const batch = `SELECT id FROM runs INDEXED BY runs_finished WHERE finished_at IS NOT NULL AND finished_at < ?
		AND status IN ` + sqlTerminal + ` ORDER BY finished_at LIMIT ?`
	total := 0
	for {
		var n int64
		err := s.write(ctx, "prune runs", func(c conn) error {
			ids, err := queryStrings(ctx, c, batch, b, batchSize)
			if err != nil || len(ids) == 0 {
				return err
			}
			for _, table := range []string{"events", "attempts"} {
				if _, err := c.exec(ctx, `DELETE FROM `+table+` WHERE run_id IN (`+placeholders(len(ids))+`)`, anys(ids)...); err != nil {
					return err
				}
			}
			res, err := c.exec(ctx, `DELETE FROM runs WHERE id IN (`+placeholders(len(ids))+`)`, anys(ids)...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil {
			return total, err
		}
		if n < batchSize {
			break
		}
	}
	for {
		var n int64
		err := s.write(ctx, "prune occurrences", func(c conn) error {
			res, err := c.exec(ctx, `DELETE FROM occurrences WHERE rowid IN (
				SELECT o.rowid FROM cursors c CROSS JOIN occurrences o ON o.job = c.job
				WHERE o.scheduled_at < ? AND o.scheduled_at < c.last AND o.kind = 'schedule'
				AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = o.run_id)
				LIMIT ?)`, b, batchSize)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		if n < batchSize {
			break
		}
	}
	if total > 0 {
		s.logger.DebugContext(ctx, "pruned runs", "count", total, "before", before)
	}
	return total, nil
}
