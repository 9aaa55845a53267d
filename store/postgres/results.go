package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// The results of runs (store.JobResult) reach every node through
// LISTEN/NOTIFY. The transaction that ends runs completed or dead_letter
// records them in job_results and sends them on resultsChannel, in
// notifications that PostgreSQL delivers to every listening session once it
// commits; each node's listener (notify.go) publishes them to its
// store.ResultFeed. An idle cluster sends nothing and reads nothing. A
// listener that was not connected may have missed some: when it connects
// (again) it tells the feed (ResultFeed.Lost), and the engine reads the
// results of its jobs again.

// resultsChannel is the LISTEN/NOTIFY channel of results.
const resultsChannel = "schedulerd_results"

// maxResultsPayload bounds the payload of one notification; PostgreSQL's
// limit is 8000 bytes.
const maxResultsPayload = 7000

// lostPayload is the payload of a notification that stands for results
// too large for one: the listeners read them from job_results.
const lostPayload = "*"

// sqlUpsertResults records results (arrays of jobs, success and failure
// times, in the order of the jobs: rows are locked in that order), each
// time kept when it is newer than the stored one (GREATEST ignores NULL).
// sqlResultsCTE does the same for the runs a statement's CTE r returned.
const (
	sqlUpsertResults = `INSERT INTO job_results AS j (job, last_success_at, last_failure_at)
		SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[])
		ON CONFLICT (job) DO UPDATE SET ` + sqlResultsSet
	sqlResultsCTE = `INSERT INTO job_results AS j (job, last_success_at, last_failure_at)
		SELECT job, max(finished_at) FILTER (WHERE status = 'completed'), max(finished_at) FILTER (WHERE status = 'dead_letter')
		FROM r WHERE status IN ('completed', 'dead_letter') GROUP BY job ORDER BY job
		ON CONFLICT (job) DO UPDATE SET ` + sqlResultsSet
	sqlResultsSet = `last_success_at = GREATEST(j.last_success_at, excluded.last_success_at),
		last_failure_at = GREATEST(j.last_failure_at, excluded.last_failure_at)`
)

// queueResults queues sqlUpsertResults for the runs that changes ended
// completed or dead_letter, and keeps their results for the notification
// that the transaction sends when it commits.
func (ch *changes) queueResults(c *conn, b *pgx.Batch) {
	runs := make([]*jobs.Run, len(ch.runs))
	for i, u := range ch.runs {
		runs[i] = u.run
	}
	rs := store.ResultsOf(runs)
	if len(rs) == 0 {
		return
	}
	jobNames, success, failure := make(textArray, len(rs)), make(tsArray, len(rs)), make(tsArray, len(rs))
	for i, r := range rs {
		jobNames[i], success[i], failure[i] = text(r.Job), tsArg(r.LastSuccess), tsArg(r.LastFailure)
	}
	b.Queue(sqlUpsertResults, jobNames, success, failure)
	c.results = append(c.results, rs...)
}

// resultNote is one result in a notification: the job, and its times in
// Unix microseconds (0: none).
type resultNote struct {
	Job     string `json:"j"`
	Success int64  `json:"s,omitempty"`
	Failure int64  `json:"f,omitempty"`
}

// resultPayloads encodes results as the payloads of notifications, each
// at most maxResultsPayload bytes; a result that does not fit alone (a
// job name of thousands of bytes) is sent as lostPayload.
func resultPayloads(rs []store.JobResult) []string {
	var (
		out   []string
		batch []byte
	)
	flush := func() {
		if len(batch) > 0 {
			out = append(out, string(append(batch, ']')))
			batch = nil
		}
	}
	for _, r := range rs {
		b, err := json.Marshal(resultNote{Job: r.Job, Success: unixMicro(r.LastSuccess), Failure: unixMicro(r.LastFailure)})
		if err != nil || len(b)+2 > maxResultsPayload {
			flush()
			out = append(out, lostPayload)
			continue
		}
		if len(batch)+len(b)+2 > maxResultsPayload {
			flush()
		}
		if len(batch) == 0 {
			batch = append(batch, '[')
		} else {
			batch = append(batch, ',')
		}
		batch = append(batch, b...)
	}
	flush()
	return out
}

// readPayload decodes the payload of a notification of results; lost is
// set when the results must be read from the table instead.
func readPayload(payload string) (rs []store.JobResult, lost bool) {
	if payload == lostPayload {
		return nil, true
	}
	var notes []resultNote
	if err := json.Unmarshal([]byte(payload), &notes); err != nil {
		return nil, true
	}
	rs = make([]store.JobResult, len(notes))
	for i, n := range notes {
		rs[i] = store.JobResult{Job: n.Job, LastSuccess: fromUnixMicro(n.Success), LastFailure: fromUnixMicro(n.Failure)}
	}
	return rs, false
}

func unixMicro(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromUnixMicro(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// notifyCommit queues, as the transaction's last statement, the
// notifications it sends when it commits: a wakeup when c.wake was called,
// and its results.
func (c *conn) notifyCommit(ctx context.Context) error {
	var channels, payloads []string
	if c.notify {
		channels, payloads = append(channels, notifyChannel), append(payloads, "")
	}
	for _, p := range resultPayloads(c.results) {
		channels, payloads = append(channels, resultsChannel), append(payloads, p)
	}
	switch len(channels) {
	case 0:
		return nil
	case 1:
		_, err := c.exec(ctx, `SELECT pg_notify($1, $2)`, channels[0], payloads[0])
		return err
	}
	_, err := c.exec(ctx, `SELECT pg_notify(n.c, n.p) FROM unnest($1::text[], $2::text[]) AS n(c, p)`, channels, payloads)
	return err
}

// publishNotification hands a notification of results to the feed.
func (s *Store) publishNotification(n *pgconn.Notification) {
	rs, lost := readPayload(n.Payload)
	if lost {
		s.results.Lost()
		return
	}
	s.results.Publish(rs)
}

// JobsResults returns the last success and failure of each named job that
// has had one; see store.Store.
func (s *Store) JobsResults(ctx context.Context, jobNames []string) (map[string]store.JobResult, error) {
	out := map[string]store.JobResult{}
	if len(jobNames) == 0 {
		return out, nil
	}
	rows, err := s.read().query(ctx, `SELECT `+rowscan.JobResultColumns+` FROM job_results
		WHERE job = ANY($1::text[])`, jobNames)
	results, err := rowscan.All(rows, err, rowscan.JobResult[tstz])
	if err != nil {
		return nil, fail("job results", err)
	}
	for _, r := range results {
		out[r.Job] = r
	}
	return out, nil
}

// ResultFeed is told of the results that any node's transactions commit,
// by this store's listener; see store.Store.
func (s *Store) ResultFeed() *store.ResultFeed { return s.results }
