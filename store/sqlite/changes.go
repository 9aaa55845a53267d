package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/internal/rowscan"
)

// changes collects what a batch of transitions writes, decided in Go on
// the runs read in the transaction, so that it is written with a statement
// per table and per changeChunks rows rather than three statements per
// transition: the last state of each run that changed, the attempts that
// ended, and the events in order. A claim writes only the run
// (claimed_from), so an attempt ends with a row that also stands for its
// claim's event and its end's.
type changes struct {
	runs     []*jobs.Run
	index    map[string]int // position in runs by run id
	updated  []time.Time    // updated_at of each of runs
	attempts []attemptEnd
	events   []jobs.Event
}

// attemptEnd is how an attempt of run (the run as it was while running)
// ended.
type attemptEnd struct {
	run *jobs.Run
	at  time.Time
	t   jobs.Transition
}

// add records the transition t of cur (which store.CheckTransition let
// through) and returns the run as it is after it.
func (ch *changes) add(cur *jobs.Run, t jobs.Transition) *jobs.Run {
	at := now(t.Time)
	t = store.LateRetry(cur, t, at)
	run := store.NextRun(cur, t, at)
	if i, ok := ch.index[run.ID]; ok {
		ch.runs[i], ch.updated[i] = run, at
	} else {
		if ch.index == nil {
			ch.index = map[string]int{}
		}
		ch.index[run.ID] = len(ch.runs)
		ch.runs, ch.updated = append(ch.runs, run), append(ch.updated, at)
	}
	if cur.Status == jobs.StatusRunning {
		ch.attempts = append(ch.attempts, attemptEnd{run: cur, at: at, t: t})
		return run // the attempt's row stands for both events
	}
	ch.events = append(ch.events, jobs.Event{RunID: t.RunID, Time: at, Node: t.Node, Attempt: cur.Attempt,
		From: cur.Status, To: t.To, Reason: t.Reason, Message: t.Error, Actor: t.Actor})
	return run
}

// changeChunks are the row counts of the statements of changes: each
// statement is prepared once per count; a batch is written in statements
// of the largest count, and what remains in one statement of the smallest
// count that holds it, padded with rows of NULLs, which match no row.
var changeChunks = []int{1, 4, 16, 64}

// changeStatements are the statements of changes, by table and row count.
type changeStatements struct{ runs, attempts, events map[int]string }

var changeSQL = changeStatements{
	runs: chunkStatements(10, func(values string) string {
		return `UPDATE runs SET status = v.column2, reason = v.column3, error = v.column4,
		exit_code = v.column5, not_before = v.column6, finished_at = v.column7, updated_at = v.column8,
		cancel_requested = v.column9, claimed_from = v.column10
		FROM (VALUES ` + values + `) AS v WHERE runs.id = v.column1`
	}),
	// Each attempt that ended, whole, with the status its claim took the
	// run from and the node that ended it, from which RunEvents reads its
	// claim's and its end's events. Its row is new: a claim writes no
	// attempt row.
	attempts: chunkStatements(15, func(values string) string {
		return `INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status,
			exit_code, error, reason, output, output_bytes, truncated, claimed_from, end_node)
		SELECT column1, column2, column3, column4, column5, column6, column7, column8, column9, column10,
			column11, column12, column13, column14, column15
		FROM (VALUES ` + values + `) WHERE column1 IS NOT NULL`
	}),
	events: chunkStatements(9, func(values string) string {
		return `INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message, actor)
		SELECT column1, column2, column3, column4, column5, column6, column7, column8, column9
		FROM (VALUES ` + values + `) WHERE column1 IS NOT NULL`
	}),
}

// chunked statement families, for the writer to prepare.
var chunkFamilies []map[int]string

// chunkStatements returns the statements that build makes of VALUES of
// each row count of changeChunks, width parameters a row.
func chunkStatements(width int, build func(values string) string) map[int]string {
	m := map[int]string{}
	for _, n := range changeChunks {
		m[n] = build(valueRows(n, width))
	}
	chunkFamilies = append(chunkFamilies, m)
	return m
}

// changeQueries are the chunked statements, for the writer to prepare.
func changeQueries() []string {
	var qs []string
	for _, m := range chunkFamilies {
		for _, n := range changeChunks {
			qs = append(qs, m[n])
		}
	}
	return qs
}

// valueRows is rows rows of n parameters each.
func valueRows(rows, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ")
}

// write writes the changes.
func (ch *changes) write(ctx context.Context, c conn) error {
	// Events first: the table the others do not touch.
	err := chunked(ctx, c, changeSQL.events, 9, len(ch.events), func(i int) []any {
		e := ch.events[i]
		return []any{e.RunID, e.Time.UnixMicro(), e.Node, e.Attempt, nullString(string(e.From)), string(e.To),
			string(e.Reason), e.Message, e.Actor}
	}, nil)
	if err != nil {
		return err
	}
	updated := 0
	err = chunked(ctx, c, changeSQL.runs, 10, len(ch.runs), func(i int) []any {
		r := ch.runs[i]
		return []any{r.ID, string(r.Status), string(r.Reason), r.Error, intOrNull(r.ExitCode), r.NotBefore.UnixMicro(),
			dbTime(r.FinishedAt), ch.updated[i].UnixMicro(), r.CancelRequested, nullString(string(r.ClaimedFrom))}
	}, func(n int64) { updated += int(n) })
	if err != nil {
		return err
	}
	if updated != len(ch.runs) { // the runs were read in this transaction
		return fmt.Errorf("update runs: %d of %d rows found", updated, len(ch.runs))
	}
	if err := ch.writeResults(ctx, c); err != nil {
		return err
	}
	return chunked(ctx, c, changeSQL.attempts, 15, len(ch.attempts), func(i int) []any {
		a := ch.attempts[i]
		r := a.run
		return []any{r.ID, r.Attempt, r.Node, r.Incarnation, r.StartedAt.UnixMicro(), a.at.UnixMicro(), string(a.t.To),
			intOrNull(a.t.ExitCode), a.t.Error, string(a.t.Reason), []byte(a.t.Output), a.t.OutputBytes, a.t.Truncated,
			nullString(string(r.ClaimedFrom)), a.t.Node}
	}, nil)
}

// chunked writes n rows with the statements qs (by row count) of width
// parameters a row, row(i) giving the parameters of row i, and passes the
// rows each statement affected to affected when it is set.
func chunked(ctx context.Context, c conn, qs map[int]string, width, n int, row func(int) []any, affected func(int64)) error {
	return eachChunk(width, n, row, func(size int, args []any) error {
		res, err := c.exec(ctx, qs[size], args...)
		if err != nil {
			return err
		}
		if affected != nil {
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			affected(k)
		}
		return nil
	})
}

// chunkedQuery reads the rows that the statements qs (by row count) of
// width parameters a row return for n rows of parameters, row(i) giving
// those of row i; scan reads each result row.
func chunkedQuery(ctx context.Context, c conn, qs map[int]string, width, n int, row func(int) []any, scan func(rowscan.Scanner) error) error {
	return eachChunk(width, n, row, func(size int, args []any) error {
		rows, err := c.query(ctx, qs[size], args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// eachChunk cuts n rows of width parameters into chunks of the sizes of
// changeChunks: the largest while more remain, then the smallest that
// holds the rest, padded with NULLs. It calls do with each.
func eachChunk(width, n int, row func(int) []any, do func(size int, args []any) error) error {
	largest := changeChunks[len(changeChunks)-1]
	args := make([]any, 0, width*largest)
	for start := 0; start < n; {
		size := largest
		for _, k := range changeChunks {
			if k >= n-start {
				size = k
				break
			}
		}
		args = args[:0]
		end := min(start+size, n)
		for i := start; i < end; i++ {
			args = append(args, row(i)...)
		}
		for len(args) < width*size {
			args = append(args, nil)
		}
		if err := do(size, args); err != nil {
			return err
		}
		start = end
	}
	return nil
}
