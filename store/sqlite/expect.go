package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// ExpectationsSync writes and deletes a node's expectations and returns
// all of them; see store.Expectations.
func (s *Store) ExpectationsSync(ctx context.Context, p store.ExpectationsSyncParams) ([]*store.Expectation, error) {
	at := now(p.Now)
	put, err := p.PutJSON()
	if err != nil {
		return nil, err
	}
	var out []*store.Expectation
	err = s.write(ctx, "sync expectations", func(c conn) error {
		if len(p.Delete) > 0 {
			if _, err := c.exec(ctx, `DELETE FROM job_expect WHERE job IN (SELECT value FROM json_each(?))`, jsonStrings(p.Delete)); err != nil {
				return err
			}
		}
		if len(p.Put) > 0 {
			if _, err := c.exec(ctx, `INSERT INTO job_expect (job, within_us, notify, since)
				SELECT value ->> 'j', value ->> 'w', value -> 'n', ? FROM json_each(?) WHERE true
				ON CONFLICT (job) DO UPDATE SET within_us = excluded.within_us, notify = excluded.notify`,
				at.UnixMicro(), put); err != nil {
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
		q = `SELECT job, within_us, notify, since FROM job_expect WHERE job IN (SELECT value FROM json_each(?)) ORDER BY job`
		args = append(args, jsonStrings(jobNames))
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
	return s.write(ctx, "forget expectation", func(c conn) error {
		res, err := c.exec(ctx, `DELETE FROM job_expect WHERE job = ?`, job)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("expectation of job %q: %w", job, store.ErrNotFound)
		}
		_, err = c.exec(ctx, `UPDATE job_notify SET overdue_since = NULL,
			told = CASE WHEN failing_since IS NULL THEN '{}' ELSE told END WHERE job = ?`, job)
		return err
	})
}

// expected reports whether job has an expectation, in c's transaction.
func expected(ctx context.Context, c conn, job string) (bool, error) {
	var one int
	err := c.queryRow(ctx, `SELECT 1 FROM job_expect WHERE job = ?`, job).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func scanExpectations(rows *sql.Rows, err error) ([]*store.Expectation, error) {
	r, err := rowscan.SQL(rows, err)
	return rowscan.All(r, err, scanExpectation)
}

func scanExpectation(row rowscan.Scanner) (*store.Expectation, error) {
	var (
		e      store.Expectation
		within int64
		notify string
		since  sql.NullInt64
	)
	if err := row.Scan(&e.Job, &within, &notify, &since); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(notify), &e.Notify); err != nil {
		return nil, fmt.Errorf("expectation of job %s: notify: %w", e.Job, err)
	}
	e.Within, e.Since = time.Duration(within)*time.Microsecond, goTime(since)
	return &e, nil
}
