package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// ExpectationsSync writes and deletes a node's expectations and returns
// all of them; see store.Expectations. The rows are written in the order
// of their jobs, so that two nodes syncing at once never wait for each
// other's rows in turn.
func (s *Store) ExpectationsSync(ctx context.Context, p store.ExpectationsSyncParams) ([]*store.Expectation, error) {
	put, err := p.PutJSON()
	if err != nil {
		return nil, err
	}
	var out []*store.Expectation
	err = s.write(ctx, "sync expectations", func(c *conn) error {
		if len(p.Delete) > 0 {
			if _, err := c.exec(ctx, `DELETE FROM job_expect WHERE job = ANY($1::text[])`, textsOf(p.Delete)); err != nil {
				return err
			}
		}
		if len(p.Put) > 0 {
			if _, err := c.exec(ctx, `INSERT INTO job_expect (job, within_us, notify, since)
				SELECT x.j, x.w, x.n, COALESCE($2::timestamptz, now()) FROM jsonb_to_recordset($1::jsonb) AS x(j text, w bigint, n jsonb)
				ORDER BY x.j
				ON CONFLICT (job) DO UPDATE SET within_us = excluded.within_us, notify = excluded.notify`,
				put, ts(p.Now)); err != nil {
				return err
			}
		}
		out, err = scanExpectations(c.query(ctx, `SELECT job, within_us, notify, since FROM job_expect ORDER BY job`))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ExpectationsList returns the expectations of the named jobs, or all
// of them when jobNames is nil.
func (s *Store) ExpectationsList(ctx context.Context, jobNames []string) ([]*store.Expectation, error) {
	q, args := `SELECT job, within_us, notify, since FROM job_expect ORDER BY job`, []any{}
	switch {
	case jobNames == nil:
	case len(jobNames) == 0:
		return nil, nil
	default:
		q = `SELECT job, within_us, notify, since FROM job_expect WHERE job = ANY($1::text[]) ORDER BY job`
		args = append(args, textsOf(jobNames))
	}
	out, err := scanExpectations(s.read().query(ctx, q, args...))
	if err != nil {
		return nil, fail("list expectations", err)
	}
	return out, nil
}

// ExpectationForget deletes a job's expectation and ends its overdue
// state; see store.Expectations.
func (s *Store) ExpectationForget(ctx context.Context, job string) error {
	return s.write(ctx, "forget expectation", func(c *conn) error {
		tag, err := c.exec(ctx, `DELETE FROM job_expect WHERE job = $1`, job)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("expectation of job %q: %w", job, store.ErrNotFound)
		}
		_, err = c.exec(ctx, `UPDATE job_notify SET overdue_since = NULL,
			told = CASE WHEN failing_since IS NULL THEN '{}'::jsonb ELSE told END WHERE job = $1`, job)
		return err
	})
}

// expected reports whether job has an expectation, in c's transaction.
func expected(ctx context.Context, c *conn, job string) (bool, error) {
	var one int
	err := c.queryRow(ctx, `SELECT 1 FROM job_expect WHERE job = $1`, job).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func scanExpectations(rows pgx.Rows, err error) ([]*store.Expectation, error) {
	return rowscan.All(rows, err, scanExpectation)
}

func scanExpectation(row rowscan.Scanner) (*store.Expectation, error) {
	var (
		e      store.Expectation
		within int64
		since  time.Time
	)
	if err := row.Scan(&e.Job, &within, &e.Notify, &since); err != nil {
		return nil, err
	}
	e.Within, e.Since = time.Duration(within)*time.Microsecond, since.UTC()
	return &e, nil
}
