package postgres

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// runColumns is the one column list of a run; scanRun reads it.
const runColumns = `id, job, status, attempt, max_attempts, trigger_kind, scheduled_at, not_before,
	not_after, created_at, started_at, finished_at, node, incarnation, exit_code, error, reason,
	dedup_id, rerun_of, payload, retry, cancel_requested, progress, progress_message, claimed_from,
	actor, cancelled_by, parent_run_id`

// qualified prefixes each column of a column list with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, col := range cols {
		cols[i] = table + "." + strings.TrimSpace(col)
	}
	return strings.Join(cols, ", ")
}

// runScanner reads rows of runColumns (and any columns after them) with
// few allocations: one run and its id per row, as the hot paths (a claim,
// the locked read of a batch of completions) read up to thousands of rows
// at a time. The few distinct values of the short text columns (job,
// status, trigger, node, incarnation, reason, retry policy, claimed_from)
// are read without a copy and kept once per scanner (see names), and
// nullable columns are read into pgtype values, not pointers that pgx
// would allocate. A scanner is used by one goroutine.
type runScanner struct {
	r                                             jobs.Run
	status, trigger, reason, retry, claimedFrom   string
	scheduledAt, notBefore, createdAt             time.Time
	notAfter, startedAt, finishedAt               pgtype.Timestamptz
	exitCode                                      pgtype.Int4
	dedupID, rerunOf, parent                      pgtype.Text
	payload                                       []byte
	names                                         map[string]string
	job, stat, trig, node, inc, reas, retr, claim nameScan
	dest                                          []any
}

// maxNames bounds the distinct names a scanner keeps.
const maxNames = 256

// nameScan reads a text column into dst through its scanner's names.
type nameScan struct {
	s   *runScanner
	dst *string
}

// ScanBytes is pgtype.BytesScanner: b is the driver's buffer, valid only
// during the call; NULL reads as "".
func (n *nameScan) ScanBytes(b []byte) error {
	*n.dst = n.s.name(b)
	return nil
}

// name returns b as a string, the same string for the same bytes.
func (s *runScanner) name(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if v, ok := s.names[string(b)]; ok {
		return v
	}
	v := string(b)
	if s.names == nil {
		s.names = make(map[string]string, 8)
	}
	if len(s.names) < maxNames {
		s.names[v] = v
	}
	return v
}

// newRunScanner returns a scanner of runColumns followed by the columns
// extra (destinations as for Scan, written by each scan).
func newRunScanner(extra ...any) *runScanner {
	s := &runScanner{}
	for _, n := range []struct {
		ns  *nameScan
		dst *string
	}{{&s.job, &s.r.Job}, {&s.stat, &s.status}, {&s.trig, &s.trigger}, {&s.node, &s.r.Node},
		{&s.inc, &s.r.Incarnation}, {&s.reas, &s.reason}, {&s.retr, &s.retry}, {&s.claim, &s.claimedFrom}} {
		*n.ns = nameScan{s: s, dst: n.dst}
	}
	s.dest = append([]any{&s.r.ID, &s.job, &s.stat, &s.r.Attempt, &s.r.MaxAttempts, &s.trig, &s.scheduledAt,
		&s.notBefore, &s.notAfter, &s.createdAt, &s.startedAt, &s.finishedAt, &s.node, &s.inc, &s.exitCode,
		&s.r.Error, &s.reas, &s.dedupID, &s.rerunOf, &s.payload, &s.retr, &s.r.CancelRequested, &s.r.Progress,
		&s.r.ProgressMessage, &s.claim, &s.r.Actor, &s.r.CancelledBy, &s.parent}, extra...)
	return s
}

// scan reads one row into a new run.
func (s *runScanner) scan(row rowscan.Scanner) (*jobs.Run, error) {
	s.r = jobs.Run{}
	if err := row.Scan(s.dest...); err != nil {
		return nil, err
	}
	r := s.r
	r.Status, r.Trigger, r.Reason = jobs.Status(s.status), jobs.Trigger(s.trigger), jobs.Reason(s.reason)
	r.ScheduledAt, r.NotBefore, r.CreatedAt = s.scheduledAt.UTC(), s.notBefore.UTC(), s.createdAt.UTC()
	r.NotAfter, r.StartedAt, r.FinishedAt = utcOf(s.notAfter), utcOf(s.startedAt), utcOf(s.finishedAt)
	if s.exitCode.Valid {
		c := int(s.exitCode.Int32)
		r.ExitCode = &c
	}
	r.DedupID, r.RerunOf, r.ParentRunID = s.dedupID.String, s.rerunOf.String, s.parent.String
	if r.Status == jobs.StatusRunning {
		// claimed_from says something only while the run runs: a run
		// ended by sqlEndTerminal keeps it.
		r.ClaimedFrom = jobs.Status(s.claimedFrom)
	}
	r.Payload = string(s.payload)
	var err error
	if r.Retry, r.NoRetryExitCodes, err = store.DecodeRetry(s.retry); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &r, nil
}

// utc converts a nullable time to a time in UTC, zero for NULL.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// tstz is a timestamptz column as rowscan reads it (rowscan.Time).
type tstz struct{ pgtype.Timestamptz }

// UTC returns the time read, in UTC; zero for NULL.
func (t *tstz) UTC() time.Time { return utcOf(t.Timestamptz) }

// utcOf is utc of a timestamptz read as a pgtype value.
func utcOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// scanRun reads one row of runColumns.
func scanRun(row pgx.Row) (*jobs.Run, error) {
	return newRunScanner().scan(row)
}

// scanRuns reads every row of rows and closes them.
func scanRuns(rows pgx.Rows, err error) ([]*jobs.Run, error) {
	return rowscan.All(rows, err, newRunScanner().scan)
}

// scanRunsNow reads rows of runColumns followed by the database clock, and
// closes them.
func scanRunsNow(rows pgx.Rows, err error) ([]*jobs.Run, time.Time, error) {
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var (
		runs []*jobs.Run
		now  time.Time
	)
	sc := newRunScanner(&now)
	for rows.Next() {
		run, err := sc.scan(rows)
		if err != nil {
			return nil, time.Time{}, err
		}
		runs = append(runs, run)
	}
	return runs, now.UTC(), rows.Err()
}

// collectStrings reads every row of one text column and closes them.
func collectStrings(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// nodeColumns is the one column list of a node; scanNode reads it and,
// after it, the time to measure the node's age from.
const nodeColumns = `id, incarnation, host, pid, version, started_at, heartbeat_at, jobs`

func scanNode(row pgx.Row) (*store.Node, error) {
	var (
		n                       store.Node
		started, heartbeat, now time.Time
	)
	if err := row.Scan(&n.ID, &n.Incarnation, &n.Host, &n.PID, &n.Version, &started, &heartbeat, &n.Jobs, &now); err != nil {
		return nil, err
	}
	n.StartedAt, n.HeartbeatAt = started.UTC(), heartbeat.UTC()
	if len(n.Jobs) == 0 {
		n.Jobs = nil
	}
	n.Age = now.Sub(heartbeat)
	return &n, nil
}
