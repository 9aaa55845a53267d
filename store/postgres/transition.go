package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// RunTransition applies a change of status; see store.Store. It is a batch
// of one.
func (s *Store) RunTransition(ctx context.Context, t jobs.Transition) (*jobs.Run, error) {
	res, err := s.runTransitions(ctx, "run transition", []jobs.Transition{t})
	if err != nil {
		return nil, err
	}
	return res[0].Run, res[0].Err
}

// RunTransitionMany applies many transitions in one transaction, in order;
// see store.Store.
func (s *Store) RunTransitionMany(ctx context.Context, ts []jobs.Transition) ([]store.TransitionResult, error) {
	return s.runTransitions(ctx, "run transitions", ts)
}

func (s *Store) runTransitions(ctx context.Context, op string, ts []jobs.Transition) ([]store.TransitionResult, error) {
	var results []store.TransitionResult
	if len(ts) == 0 {
		return []store.TransitionResult{}, nil
	}
	err := s.write(ctx, op, func(c *conn) (err error) {
		results, err = transitions(ctx, c, ts)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		if r.Err != nil {
			results[i].Err = fmt.Errorf("run transition: %w", r.Err)
		}
	}
	return results, nil
}

// transitions is the one code path that changes a run's status after its
// claim. The ends of attempts into a terminal status are written at once,
// without reading their runs (endAttempts); every other transition, and
// those of them whose fence or claim the statement did not find, go the
// locked way (lockedTransitions), in the order of ts.
func transitions(ctx context.Context, c *conn, ts []jobs.Transition) ([]store.TransitionResult, error) {
	results, err := runTransitionsOnly(ctx, c, ts)
	if err != nil {
		return nil, err
	}
	if err := writeChains(ctx, c, ts, results); err != nil {
		return nil, err
	}
	return results, writeNotifications(ctx, c, ts, results)
}

// runTransitionsOnly writes the transitions' changes of runs; see
// transitions.
func runTransitionsOnly(ctx context.Context, c *conn, ts []jobs.Transition) ([]store.TransitionResult, error) {
	idx := endsAtOnce(ts)
	if len(idx) == 0 {
		return lockedTransitions(ctx, c, ts)
	}
	ended, err := endAttempts(ctx, c, ts, idx)
	if err != nil {
		return nil, err
	}
	results := make([]store.TransitionResult, len(ts))
	if len(ended) == len(ts) {
		for i, t := range ts {
			results[i].Run = ended[t.RunID]
		}
		return results, nil
	}
	var (
		rest   []jobs.Transition
		restAt []int
	)
	for i, t := range ts {
		if r := ended[t.RunID]; r != nil {
			results[i].Run = r
			continue
		}
		rest, restAt = append(rest, t), append(restAt, i)
	}
	res, err := lockedTransitions(ctx, c, rest)
	if err != nil {
		return nil, err
	}
	for k, i := range restAt {
		results[i] = res[k]
	}
	return results, nil
}

// lockedTransitions locks the runs of ts and reads them in one statement,
// in the order of their ids so that concurrent batches never deadlock;
// decides each transition in turn in Go, each on the run as the ones
// before it left it (a refusal is that transition's result, and writes
// nothing); then writes all the changes in one round trip. A completion
// racing a recovery of the same attempt waits for the row lock, then finds
// the fence broken.
func lockedTransitions(ctx context.Context, c *conn, ts []jobs.Transition) ([]store.TransitionResult, error) {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.RunID
	}
	runs, now, err := lockRuns(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	results := make([]store.TransitionResult, len(ts))
	ch := newChanges(len(ts))
	for i, t := range ts {
		results[i].Run, results[i].Err = ch.transition(runs, t, now)
	}
	var b pgx.Batch
	ch.queue(c, &b)
	if err := c.send(ctx, &b); err != nil {
		return nil, err
	}
	return results, nil
}

// transition applies one transition, for a caller that wants a refusal as
// its error.
func transition(ctx context.Context, c *conn, t jobs.Transition) (*jobs.Run, error) {
	res, err := transitions(ctx, c, []jobs.Transition{t})
	if err != nil {
		return nil, err
	}
	return res[0].Run, res[0].Err
}

// sqlLockRuns reads runs under their row locks, in the order of their ids,
// with the database clock; sqlLockRun reads one, with a scalar parameter
// (a simpler plan than one over an array).
const (
	sqlLockRuns = `SELECT ` + runColumns + `, now() FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`
	sqlLockRun  = `SELECT ` + runColumns + `, now() FROM runs WHERE id = $1 FOR UPDATE`
)

// lockRuns reads the runs of ids that exist, by id, under their row
// locks, and the database clock (zero when there is none).
func lockRuns(ctx context.Context, c *conn, ids []string) (map[string]*jobs.Run, time.Time, error) {
	q, arg := sqlLockRuns, any(textsOf(ids))
	if len(ids) > 0 && !slices.ContainsFunc(ids, func(id string) bool { return id != ids[0] }) {
		q, arg = sqlLockRun, ids[0]
	}
	runs, now, err := scanRunsNow(c.query(ctx, q, arg))
	if err != nil {
		return nil, time.Time{}, err
	}
	byID := make(map[string]*jobs.Run, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
	}
	return byID, now, nil
}
