package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/schedulerd/schedulerd/store"
)

// sqlFirstWaiting reads the job and not_before of the first $1 waiting runs
// of all jobs, in start order (runs_due).
const sqlFirstWaiting = `SELECT job, not_before FROM runs WHERE ` + sqlWaitingOfAll + `
	AND not_before > $2 ORDER BY not_before, created_at, id LIMIT $1`

// RunsNextDue returns the earliest not_before of the waiting runs of the
// named jobs; zero when there is none.
func (s *Store) RunsNextDue(ctx context.Context, jobNames []string, after time.Time) (time.Time, error) {
	if len(jobNames) == 0 {
		return time.Time{}, nil
	}
	from := pgtype.Timestamptz{Time: after.UTC().Truncate(time.Microsecond), Valid: true}
	if after.IsZero() {
		from = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	// The scheduling loop asks this every iteration. The first waiting runs
	// of all jobs, in the order of the runs_due index, nearly always hold
	// one of the node's jobs: the first of those is the answer. Else one
	// LIMIT 1 probe of the claim index per job (a min over all waiting runs
	// walked the whole backlog: most of the server's time in a burn-down).
	const scan = 256
	rows, err := s.read().query(ctx, sqlFirstWaiting, scan, from)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	named := store.NewNameIndex(jobNames)
	read := 0
	var first time.Time
	for rows.Next() {
		read++
		var job string
		var notBefore time.Time
		if err := rows.Scan(&job, &notBefore); err != nil {
			rows.Close()
			return time.Time{}, fail("next due run", err)
		}
		if named.Has(job) {
			first = notBefore.UTC()
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, fail("next due run", err)
	}
	if !first.IsZero() || read < scan {
		return first, nil
	}
	var next *time.Time
	err = s.read().queryRow(ctx, `SELECT min(x.not_before) FROM unnest($1::text[]) AS j(job)
		CROSS JOIN LATERAL (SELECT not_before FROM runs WHERE runs.job = j.job AND status IN `+sqlWaiting+`
			AND not_before > $2 ORDER BY not_before LIMIT 1) x`, jobNames, from).Scan(&next)
	if err != nil {
		return time.Time{}, fail("next due run", err)
	}
	return utc(next), nil
}
