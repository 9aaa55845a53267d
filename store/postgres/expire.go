package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// RunsExpire cancels (reason expired) the waiting runs past their not_after.
// An idle poll is one statement; expired runs are cancelled through the
// transition code path, in batches, skipping runs that another node is
// expiring or claiming at that moment.
func (s *Store) RunsExpire(ctx context.Context, p store.RunsExpireParams) ([]*jobs.Run, error) {
	node, now := p.Node, p.Now
	const expired = `status IN ` + sqlWaiting + ` AND not_after IS NOT NULL AND not_after <= COALESCE($1::timestamptz, now())`
	var one int
	err := s.read().queryRow(ctx, `SELECT 1 FROM runs WHERE `+expired+` LIMIT 1`, ts(now)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("expire runs", err)
	}
	var all []*jobs.Run
	for {
		var batch []*jobs.Run
		err := s.write(ctx, "expire runs", func(c *conn) error {
			batch = nil
			rows, err := c.query(ctx, `SELECT id || ' ' || job FROM runs WHERE `+expired+` ORDER BY not_after LIMIT $2
				FOR UPDATE SKIP LOCKED`, ts(now), batchSize)
			idJobs, err := collectStrings(rows, err)
			if err != nil {
				return err
			}
			for _, ij := range idJobs {
				id, job, _ := strings.Cut(ij, " ")
				t := jobs.Expire(id, node, now)
				t.Notify, t.Chain = p.Targets(job), p.ChainOf(job)
				run, err := transition(ctx, c, t)
				if err != nil {
					return err
				}
				batch = append(batch, run)
			}
			return nil
		})
		all = append(all, batch...)
		if err != nil {
			return all, err
		}
		if len(batch) < batchSize {
			return all, nil
		}
	}
}
