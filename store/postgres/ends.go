package postgres

import (
	"cmp"
	"context"
	"slices"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// An attempt that ends its run (completed, cancelled, dead_letter) is
// written without reading its run first. Its transition and its fence say
// all that the run and the attempt's row are written with: the run's new
// status, reason, error, exit code, finish time; the attempt's number,
// node, incarnation, start and the status its claim took the run from are
// the run's own, which the statement reads as it updates the row. The
// fence is the statement's condition, checked on the row as it is once
// locked (READ COMMITTED checks a row that changed meanwhile again), so a
// stale attempt changes nothing; the transitions whose rows the statement
// did not change go the locked way (lockRuns, changes), which gives each
// its error, or writes those that are not this statement's to write.
//
// In a 1-node burn-down the locked read was a notable share of the
// server's busy time, and reading its rows, deciding each run in Go and
// sending 25 arrays a large share of this process's CPU per completed run.
//
// The status is checked through COALESCE with the empty string, which no
// index's condition has (as sqlPickedDue): as status = 'running', the
// planner read every running run through runs_running, with the dead
// entries of the runs completed since the last vacuum (many times the live
// ones), and hashed them against the batch, instead of a primary-key probe
// per run.
//
// Only the ends into a terminal status go this way. The run keeps
// claimed_from, which the statement returns for the attempt's row and
// which nothing reads once the run has left running (readers ask for a
// running run's; the scanner reports it only while the run is running).
// A retry's end goes the locked way, which moves the run's not_before and
// refuses a retry that its window does not allow (changes.transition).
var sqlEndTerminal = `WITH x AS (
		SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::text[],
			$7::int4[], $8::timestamptz[], $9::bytea[], $10::int8[], $11::bool[], $12::text[])
			AS x(id, attempt, incarnation, status, reason, error, exit_code, at, output, output_bytes,
				truncated, end_node)
		ORDER BY id
	), r AS (
		UPDATE runs SET status = x.status, reason = x.reason, error = x.error, exit_code = x.exit_code,
			finished_at = COALESCE(x.at, now()), updated_at = COALESCE(x.at, now()), cancel_requested = false
		FROM x
		WHERE runs.id = x.id AND COALESCE(runs.status, '') = 'running' AND runs.attempt = x.attempt
			AND runs.incarnation = x.incarnation
		RETURNING ` + qualifiedRunColumns + `
	), a AS (
		INSERT INTO attempts (run_id, number, node, incarnation, started_at, finished_at, status,
			exit_code, error, reason, output, output_bytes, truncated, claimed_from, end_node)
		SELECT r.id, r.attempt, r.node, r.incarnation, r.started_at, r.finished_at, r.status,
			r.exit_code, r.error, r.reason, x.output, x.output_bytes, x.truncated, r.claimed_from, x.end_node
		FROM r JOIN x ON x.id = r.id
	), j AS (
		` + sqlResultsCTE + `
	)
	SELECT * FROM r`

// qualifiedRunColumns is runColumns of the table runs, for a statement
// whose other tables have columns of the same names.
var qualifiedRunColumns = qualified("runs", runColumns)

// endsAtOnce returns the positions in ts of the transitions that end an
// attempt in a terminal status (see sqlEndTerminal), in the order of their
// run ids; none when a run has more than one transition in ts, which then
// apply in order, each on the run as the one before left it.
func endsAtOnce(ts []jobs.Transition) []int {
	byID := make([]int, len(ts))
	for i := range byID {
		byID[i] = i
	}
	slices.SortFunc(byID, func(a, b int) int { return cmp.Compare(ts[a].RunID, ts[b].RunID) })
	var idx []int
	for k, i := range byID {
		if k > 0 && ts[i].RunID == ts[byID[k-1]].RunID {
			return nil
		}
		if endsAtOnceAlone(ts[i]) {
			idx = append(idx, i)
		}
	}
	return idx
}

// endsAtOnceAlone reports whether t ends an attempt in a terminal status:
// a fenced transition out of running, which the state machine and t.From
// allow.
func endsAtOnceAlone(t jobs.Transition) bool {
	f := t.Fence
	return f != nil && (f.RunID == "" || f.RunID == t.RunID) && t.To.Terminal() &&
		(len(t.From) == 0 || slices.Contains(t.From, jobs.StatusRunning)) &&
		jobs.ValidateTransition(jobs.StatusRunning, t.To) == nil
}

// endAttempts writes sqlEndTerminal for the transitions of ts at idx and
// returns the runs it ended, as stored, by id.
func endAttempts(ctx context.Context, c *conn, ts []jobs.Transition, idx []int) (map[string]*jobs.Run, error) {
	n := len(idx)
	var (
		ids, incarnations, endNodes = make(textArray, n), make(textArray, n), make(textArray, n)
		attempts                    = make(int4Array, n)
		at                          = make(tsArray, n)
		o                           = newOutcomes(n)
	)
	for k, i := range idx {
		t := ts[i]
		ids[k], attempts[k], incarnations[k] = text(t.RunID), int4Of(t.Fence.Attempt), text(t.Fence.Incarnation)
		at[k], endNodes[k] = tsArg(t.Time), text(t.Node)
		o.set(k, t)
	}
	rows, err := c.query(ctx, sqlEndTerminal, ids, attempts, incarnations, o.statuses, o.reasons, o.errs, o.exitCodes,
		at, o.outputs, o.outputBytes, o.truncated, endNodes)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ended := make(map[string]*jobs.Run, n)
	sc := newRunScanner()
	for rows.Next() {
		run, err := sc.scan(rows)
		if err != nil {
			return nil, err
		}
		ended[run.ID] = run
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(ended) > 0 {
		c.wake() // runs left running
		runs := make([]*jobs.Run, 0, len(ended))
		for _, r := range ended {
			runs = append(runs, r)
		}
		c.results = append(c.results, store.ResultsOf(runs)...)
	}
	return ended, nil
}
