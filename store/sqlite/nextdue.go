package sqlite

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// RunsNextDue returns the earliest not_before of the waiting runs of the
// named jobs; zero when there is none.
func (s *Store) RunsNextDue(ctx context.Context, jobNames []string, after time.Time) (time.Time, error) {
	if len(jobNames) == 0 {
		return time.Time{}, nil
	}
	from := int64(math.MinInt64)
	if !after.IsZero() {
		from = after.UnixMicro()
	}
	// The scheduling loop asks this every iteration. The first waiting runs
	// of all jobs, in the order of the runs_due index, nearly always hold
	// one of the node's jobs: the first of those is the answer. Else one
	// LIMIT 1 probe of the claim index per job (a MIN over all waiting runs
	// walked the whole backlog: most of the CPU of a burn-down).
	const scan = 256
	rows, err := s.read().query(ctx, `SELECT job, not_before FROM runs INDEXED BY runs_due
		WHERE status IN `+sqlWaiting+` AND not_before > ? ORDER BY not_before, created_at, id LIMIT ?`, from, scan)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	named := store.NewNameIndex(jobNames)
	read := 0
	for rows.Next() {
		read++
		var job string
		var notBefore int64
		if err := rows.Scan(&job, &notBefore); err != nil {
			rows.Close()
			return time.Time{}, fail("next due run", err)
		}
		if named.Has(job) {
			rows.Close()
			return time.UnixMicro(notBefore).UTC(), nil
		}
	}
	if err := rows.Close(); err != nil {
		return time.Time{}, fail("next due run", err)
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, fail("next due run", err)
	}
	if read < scan {
		return time.Time{}, nil // no waiting run of these jobs
	}
	var next sql.NullInt64
	err = s.read().queryRow(ctx, `SELECT MIN((SELECT not_before FROM runs INDEXED BY runs_claim
			WHERE job = j.value AND status IN `+sqlWaiting+` AND not_before > ? ORDER BY not_before LIMIT 1))
		FROM json_each(?) j`, from, jsonStrings(jobNames)).Scan(&next)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	return goTime(next), nil
}
