package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Status lists as SQL literals. The claim and expiry queries spell the
// waiting statuses exactly as the partial indexes do, so that SQLite uses them.
const (
	sqlActive   = `('pending', 'running', 'retrying')`
	sqlWaiting  = `('pending', 'retrying')`
	sqlTerminal = `('completed', 'cancelled', 'dead_letter')`
	// sqlListedByStatus is the predicate of the runs_status_created index:
	// the statuses other than running (few, in runs_node_running) and
	// completed (most of the history, in runs_created).
	sqlListedByStatus = `status NOT IN ('running', 'completed')`
)

// sqlGetRun reads one run. The writer keeps the statements of its busy
// paths prepared (preparedQueries): this one, and some of each operation
// on runs, next to the operation.
const sqlGetRun = `SELECT ` + runColumns + ` FROM runs WHERE id = ?`

// batchSize bounds the rows one transaction of expiry or pruning handles, so
// that the writer is never held for long.
const batchSize = 1000

// getRun reads a run; ErrNotFound when there is none.
func getRun(ctx context.Context, c conn, id string) (*jobs.Run, error) {
	run, err := scanRun(c.queryRow(ctx, sqlGetRun, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return run, err
}
