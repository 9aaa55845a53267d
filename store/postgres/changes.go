package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// changes collects what a batch of transitions (and of cancel requests)
// writes, decided in Go under the row locks of the runs, so that it is sent
// at once with a statement per table: the last state of each run that
// changed, the attempts that ended, and the events in order. A claim
// writes only the run (claimed_from), so an attempt ends with a row that
// also stands for its claim's event and its end's.
type changes struct {
	runs     []runChange
	index    map[string]int // position in runs by run id
	attempts []attemptEnd
	events   []jobs.Event
	// leaving: a run left running, so a slot of its job is free or a retry
	// waits for its time.
	leaving bool
}

// newChanges returns changes sized for n transitions.
func newChanges(n int) changes {
	return changes{runs: make([]runChange, 0, n), index: make(map[string]int, n), attempts: make([]attemptEnd, 0, n)}
}

// runChange is the state a run is written with.
type runChange struct {
	run       *jobs.Run
	updatedAt time.Time
}

// attemptEnd is how an attempt of run (the run as it was while running)
// ended.
type attemptEnd struct {
	run *jobs.Run
	at  time.Time
	t   jobs.Transition
}

// transition checks t against the run as runs holds it (the run as read
// under its lock, changed by the transitions before t in the batch), and
// when t may change it, records the change and puts the new run in runs.
// Its error is a refusal: nothing is recorded. now is the database clock.
func (ch *changes) transition(runs map[string]*jobs.Run, t jobs.Transition, now time.Time) (*jobs.Run, error) {
	cur := runs[t.RunID]
	if err := store.CheckTransition(cur, t); err != nil {
		return nil, err
	}
	at := now
	if !t.Time.IsZero() {
		at = t.Time.UTC().Truncate(time.Microsecond)
	}
	t = store.LateRetry(cur, t, at)
	next := nextRun(cur, t, at)
	// The runs_window constraint, checked here so that a retry that would
	// break it is refused instead of aborting the transaction.
	if err := jobs.ValidateWindow(next.NotBefore, next.NotAfter); err != nil {
		return nil, fmt.Errorf("run window: %w", err)
	}
	ch.setRun(next, at)
	runs[t.RunID] = next
	if cur.Status == jobs.StatusRunning {
		ch.attempts = append(ch.attempts, attemptEnd{run: cur, at: at, t: t})
		ch.leaving = true
		return next, nil // the attempt's row stands for both events
	}
	ch.events = append(ch.events, jobs.Event{RunID: cur.ID, Time: at, Node: t.Node, Attempt: cur.Attempt,
		From: cur.Status, To: t.To, Reason: t.Reason, Message: cleanText(t.Error), Actor: cleanText(t.Actor)})
	return next, nil
}

// requestCancel records that the owner of the running run cur is asked to
// stop it, and returns the run as it is then.
func (ch *changes) requestCancel(cur *jobs.Run, at time.Time) *jobs.Run {
	next := *cur
	next.CancelRequested = true
	ch.setRun(&next, at)
	return &next
}

func (ch *changes) setRun(run *jobs.Run, at time.Time) {
	if i, ok := ch.index[run.ID]; ok {
		ch.runs[i] = runChange{run: run, updatedAt: at}
		return
	}
	if ch.index == nil {
		ch.index = map[string]int{}
	}
	ch.index[run.ID] = len(ch.runs)
	ch.runs = append(ch.runs, runChange{run: run, updatedAt: at})
}

// The statements of changes. Each takes its rows as arrays, one per column.
//
// sqlEndAttempts writes each attempt that ended whole, with the status its
// claim took the run from and the node that ended it, from which RunEvents
// reads its claim's and its end's events. Its rows are new: a claim writes
// no attempt row, so a plain insert does, without the check of the primary
// key for an existing row and the speculative insertion of ON CONFLICT
// (perf showed that check among the server's samples in the burn-down).
const (
	sqlUpdateRuns = `UPDATE runs SET status = u.status, reason = u.reason, error = u.error,
			exit_code = u.exit_code, not_before = u.not_before, finished_at = u.finished_at,
			updated_at = u.updated_at, cancel_requested = u.cancel_requested, claimed_from = u.claimed_from
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int4[], $6::timestamptz[],
			$7::timestamptz[], $8::timestamptz[], $9::bool[], $10::text[])
			AS u(id, status, reason, error, exit_code, not_before, finished_at, updated_at, cancel_requested, claimed_from)
		WHERE runs.id = u.id`
	sqlEndAttempts = `INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status,
			exit_code, error, reason, output, output_bytes, truncated, claimed_from, end_node)
		SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[],
			$7::text[], $8::int4[], $9::text[], $10::text[], $11::bytea[], $12::int8[], $13::bool[], $14::text[],
			$15::text[])`
	sqlInsertEvents = `INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message, actor)
		SELECT run_id, time, node, attempt, from_status, to_status, reason, message, actor
		FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::int4[], $5::text[], $6::text[], $7::text[], $8::text[],
			$9::text[])
			WITH ORDINALITY AS e(run_id, time, node, attempt, from_status, to_status, reason, message, actor, ord)
		ORDER BY ord`
)

// sqlChangeRun writes one transition of one run: the same writes as
// sqlUpdateRuns, sqlEndAttempts (when $10) and sqlInsertEvents (when $25),
// in one statement with scalar parameters: one plan of primary-key
// lookups, where the three statements over arrays are planned each. No
// transition leads to running, so claimed_from is NULL after it.
const sqlChangeRun = `WITH r AS (
		UPDATE runs SET status = $2, reason = $3, error = $4, exit_code = $5, not_before = $6,
			finished_at = $7, updated_at = $8, cancel_requested = $9, claimed_from = NULL
		WHERE id = $1 RETURNING id
	), a AS (
		INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status,
			exit_code, error, reason, output, output_bytes, truncated, claimed_from, end_node)
		SELECT $1, $11::int4, $12::text, $13::text, $14::timestamptz, $15::timestamptz, $16::text,
			$17::int4, $18::text, $19::text, $20::bytea, $21::int8, $22::boolean, $23::text, $24::text
		WHERE $10::boolean
	), e AS (
		INSERT INTO events (run_id, time, node, attempt, from_status, to_status, reason, message, actor)
		SELECT $1, $26::timestamptz, $27::text, $28::int4, $29::text, $30::text, $31::text, $32::text, $33::text
		WHERE $25::boolean
	)
	SELECT count(*) FROM r`

// queue queues the statements that write the changes, and asks for a
// wakeup when a run left running and for a notification of the results.
func (ch *changes) queue(c *conn, b *pgx.Batch) {
	if ch.leaving {
		c.wake()
	}
	ch.queueResults(c, b)
	if len(ch.runs) == 1 && len(ch.attempts) <= 1 && len(ch.events) <= 1 && len(ch.attempts)+len(ch.events) > 0 {
		ch.queueOne(b)
		return
	}
	if n := len(ch.runs); n > 0 {
		var (
			ids, statuses, reasons, errs     = make(textArray, n), make(textArray, n), make(textArray, n), make(textArray, n)
			exitCodes                        = make(int4Array, n)
			notBefore, finishedAt, updatedAt = make(tsArray, n), make(tsArray, n), make(tsArray, n)
			cancelRequested                  = make(boolArray, n)
			claimedFrom                      = make(nullArray, n)
		)
		for i, u := range ch.runs {
			r := u.run
			ids[i], statuses[i], reasons[i] = text(r.ID), text(r.Status), text(r.Reason)
			errs[i], exitCodes[i] = text(r.Error), int4Arg(r.ExitCode)
			notBefore[i], finishedAt[i] = tsArg(r.NotBefore), tsArg(r.FinishedAt)
			updatedAt[i], cancelRequested[i] = tsArg(u.updatedAt), boolOf(r.CancelRequested)
			claimedFrom[i] = textArg(string(r.ClaimedFrom))
		}
		b.Queue(sqlUpdateRuns, ids, statuses, reasons, errs, exitCodes, notBefore, finishedAt, updatedAt,
			cancelRequested, claimedFrom).Exec(func(tag pgconn.CommandTag) error {
			// The runs are locked: each of them is there.
			if tag.RowsAffected() != int64(n) {
				return fmt.Errorf("update runs: %d of %d rows found", tag.RowsAffected(), n)
			}
			return nil
		})
	}
	queueAttempts(b, ch.attempts)
	if n := len(ch.events); n > 0 {
		var (
			runIDs, nodes, from, to, reasons, messages = make(textArray, n), make(textArray, n), make(textArray, n),
				make(textArray, n), make(textArray, n), make(textArray, n)
			actors   = make(textArray, n)
			times    = make(tsArray, n)
			attempts = make(int4Array, n)
		)
		for i, e := range ch.events {
			runIDs[i], times[i], nodes[i] = text(e.RunID), tsArg(e.Time), text(e.Node)
			attempts[i], from[i], to[i] = int4Of(e.Attempt), text(e.From), text(e.To)
			reasons[i], messages[i], actors[i] = text(e.Reason), text(e.Message), text(e.Actor)
		}
		b.Queue(sqlInsertEvents, runIDs, times, nodes, attempts, from, to, reasons, messages, actors)
	}
}

// queueAttempts queues sqlEndAttempts for the attempts as.
func queueAttempts(b *pgx.Batch, as []attemptEnd) {
	n := len(as)
	if n == 0 {
		return
	}
	var (
		runIDs, nodes, incarnations = make(textArray, n), make(textArray, n), make(textArray, n)
		numbers                     = make(int4Array, n)
		startedAt, finishedAt       = make(tsArray, n), make(tsArray, n)
		claimedFrom, endNodes       = make(nullArray, n), make(nullArray, n)
		o                           = newOutcomes(n)
	)
	for i, a := range as {
		r := a.run
		runIDs[i], numbers[i], nodes[i] = text(r.ID), int4Of(r.Attempt), text(r.Node)
		incarnations[i], startedAt[i], finishedAt[i] = text(r.Incarnation), tsArg(r.StartedAt), tsArg(a.at)
		o.set(i, a.t)
		claimedFrom[i], endNodes[i] = a.derived()
	}
	b.Queue(sqlEndAttempts, runIDs, numbers, nodes, incarnations, startedAt, finishedAt, o.statuses, o.exitCodes, o.errs,
		o.reasons, o.outputs, o.outputBytes, o.truncated, claimedFrom, endNodes)
}

// outcomes are the columns of attempts' ends that their transitions give
// (status, reason, error, exit code, output), as statement arguments.
type outcomes struct {
	statuses, reasons, errs textArray
	exitCodes               int4Array
	outputs                 byteArray
	outputBytes             int8Array
	truncated               boolArray
}

func newOutcomes(n int) outcomes {
	return outcomes{
		statuses: make(textArray, n), reasons: make(textArray, n), errs: make(textArray, n),
		exitCodes: make(int4Array, n), outputs: make(byteArray, n), outputBytes: make(int8Array, n),
		truncated: make(boolArray, n),
	}
}

// set puts the outcome of t at i.
func (o outcomes) set(i int, t jobs.Transition) {
	o.statuses[i], o.reasons[i], o.errs[i] = text(t.To), text(t.Reason), text(cleanText(t.Error))
	o.exitCodes[i], o.outputs[i] = int4Arg(t.ExitCode), bytea(t.Output)
	o.outputBytes[i], o.truncated[i] = pgtype.Int8{Int64: t.OutputBytes, Valid: true}, boolOf(t.Truncated)
}

// derived is what an attempt's row holds for RunEvents to read its claim's
// and its end's events from: the status its claim took the run from and
// the node that ended it.
func (a attemptEnd) derived() (claimedFrom, endNode pgtype.Text) {
	return textArg(string(a.run.ClaimedFrom)), pgtype.Text{String: a.t.Node, Valid: true}
}

// queueOne queues sqlChangeRun for changes of one run: at most one attempt
// and at most one event.
func (ch *changes) queueOne(b *pgx.Batch) {
	u := ch.runs[0]
	r := u.run
	a := attemptEnd{run: &jobs.Run{}}
	if len(ch.attempts) == 1 {
		a = ch.attempts[0]
	}
	var e jobs.Event
	if len(ch.events) == 1 {
		e = ch.events[0]
	}
	from, by := a.derived()
	b.Queue(sqlChangeRun, r.ID, string(r.Status), string(r.Reason), r.Error, int4Arg(r.ExitCode), tsArg(r.NotBefore),
		tsArg(r.FinishedAt), tsArg(u.updatedAt), r.CancelRequested,
		len(ch.attempts) == 1, int32(a.run.Attempt), a.run.Node, a.run.Incarnation, tsArg(a.run.StartedAt),
		tsArg(a.at), string(a.t.To), int4Arg(a.t.ExitCode), cleanText(a.t.Error), string(a.t.Reason),
		bytesOf(a.t.Output), a.t.OutputBytes, a.t.Truncated, from, by,
		len(ch.events) == 1, tsArg(e.Time), e.Node, int32(e.Attempt), string(e.From), string(e.To),
		string(e.Reason), e.Message, e.Actor,
	).QueryRow(func(row pgx.Row) error {
		var n int
		if err := row.Scan(&n); err != nil {
			return err
		}
		if n != 1 { // the run is locked: it is there
			return fmt.Errorf("update run %s: not found", r.ID)
		}
		return nil
	})
}

// nextRun is store.NextRun as PostgreSQL stores the result: text without
// NUL bytes, the exit code as an integer (int4).
func nextRun(cur *jobs.Run, t jobs.Transition, at time.Time) *jobs.Run {
	next := store.NextRun(cur, t, at)
	next.Error = cleanText(next.Error)
	if next.ExitCode != nil {
		*next.ExitCode = int(int32(*next.ExitCode))
	}
	return next
}

// int4Arg is an exit code as an element of an int4[] argument, NULL for nil.
func int4Arg(p *int) pgtype.Int4 {
	if p == nil {
		return pgtype.Int4{}
	}
	return pgtype.Int4{Int32: int32(*p), Valid: true}
}
