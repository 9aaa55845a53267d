package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Status lists as SQL literals. The statements spell them exactly as the
// partial indexes do, so that the planner uses those.
const (
	sqlActive   = `('pending', 'running', 'retrying')`
	sqlWaiting  = `('pending', 'retrying')`
	sqlTerminal = `('completed', 'cancelled', 'dead_letter')`
)

// batchSize bounds the rows one statement of expiry or pruning handles, so
// that no transaction holds many locks for long.
const batchSize = 1000

// getRun reads a run; lock takes its row lock until the transaction ends.
func getRun(ctx context.Context, c *conn, id string, lock bool) (*jobs.Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs WHERE id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	run, err := scanRun(c.queryRow(ctx, q, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return run, err
}
