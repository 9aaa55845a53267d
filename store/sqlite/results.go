package sqlite

import (
	"context"
	"encoding/json"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// sqlUpsertResults records the results of a batch of transitions (a JSON
// array of [job, success, failure], times in microseconds or null), each
// time kept when it is newer than the stored one. max() of a NULL is NULL,
// hence the coalesce.
const sqlUpsertResults = `INSERT INTO job_results (job, last_success_at, last_failure_at)
	SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?) WHERE true
	ON CONFLICT (job) DO UPDATE SET
		last_success_at = coalesce(max(last_success_at, excluded.last_success_at), last_success_at, excluded.last_success_at),
		last_failure_at = coalesce(max(last_failure_at, excluded.last_failure_at), last_failure_at, excluded.last_failure_at)`

// writeResults records the results of the runs that changes ended
// completed or dead_letter, and keeps them for the feed, which is told
// once the transaction commits (Store.write).
func (ch *changes) writeResults(ctx context.Context, c conn) error {
	rs := store.ResultsOf(ch.runs)
	if len(rs) == 0 {
		return nil
	}
	rows := make([][3]any, len(rs))
	for i, r := range rs {
		rows[i] = [3]any{r.Job, dbTime(r.LastSuccess), dbTime(r.LastFailure)}
	}
	arg, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	if _, err := c.exec(ctx, sqlUpsertResults, string(arg)); err != nil {
		return err
	}
	if c.ended != nil {
		*c.ended = append(*c.ended, rs...)
	}
	return nil
}

// JobsResults returns the last success and failure of each named job that
// has had one; see store.Store.
func (s *Store) JobsResults(ctx context.Context, jobNames []string) (map[string]store.JobResult, error) {
	out := map[string]store.JobResult{}
	if len(jobNames) == 0 {
		return out, nil
	}
	rows, err := rowscan.SQL(s.read().query(ctx, `SELECT `+rowscan.JobResultColumns+` FROM job_results
		WHERE job IN (SELECT value FROM json_each(?))`, jsonStrings(jobNames)))
	results, err := rowscan.All(rows, err, rowscan.JobResult[micros])
	if err != nil {
		return nil, fail("job results", err)
	}
	for _, r := range results {
		out[r.Job] = r
	}
	return out, nil
}

// ResultFeed is told of the results of each transaction as it commits:
// this process is the only writer.
func (s *Store) ResultFeed() *store.ResultFeed { return s.results }
