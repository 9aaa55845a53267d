package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// RunsExpire cancels (reason expired) the waiting runs past their not_after.
func (s *Store) RunsExpire(ctx context.Context, p store.RunsExpireParams) ([]*jobs.Run, error) {
	node, at := p.Node, now(p.Now)
	const expired = `status IN ` + sqlWaiting + ` AND not_after IS NOT NULL AND not_after <= ?`
	var one int
	err := s.read().queryRow(ctx, `SELECT 1 FROM runs INDEXED BY runs_expire WHERE `+expired+` LIMIT 1`, at.UnixMicro()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("expire runs", err)
	}
	var all []*jobs.Run
	for {
		var batch []*jobs.Run
		err := s.write(ctx, "expire runs", func(c conn) error {
			batch = nil
			idJobs, err := queryStrings(ctx, c, `SELECT id || ' ' || job FROM runs INDEXED BY runs_expire WHERE `+expired+` ORDER BY not_after LIMIT ?`,
				at.UnixMicro(), batchSize)
			if err != nil {
				return err
			}
			for _, ij := range idJobs {
				id, job, _ := strings.Cut(ij, " ")
				t := jobs.Expire(id, node, at)
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
