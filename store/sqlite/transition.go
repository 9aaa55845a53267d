package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// sqlRunsByID reads the runs whose ids are in a JSON array (prepared).
const sqlRunsByID = `SELECT ` + runColumns + ` FROM runs WHERE id IN (SELECT value FROM json_each(?))`

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

// runTransitions reads the batch's runs in one statement, then takes each
// transition in turn: store.CheckTransition refuses it before it writes
// anything (the refusal is its result), or it is recorded in changes, and
// the run as it leaves it is what the next transition of that run sees.
// The changes are then written with a statement per table and per
// changeChunks rows. Any other error rolls the whole batch back.
func (s *Store) runTransitions(ctx context.Context, op string, ts []jobs.Transition) ([]store.TransitionResult, error) {
	results := make([]store.TransitionResult, len(ts))
	if len(ts) == 0 {
		return results, nil
	}
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.RunID
	}
	err := s.write(ctx, op, func(c conn) error {
		clear(results)
		runs, err := getRuns(ctx, c, ids)
		if err != nil {
			return err
		}
		var ch changes
		for i, t := range ts {
			cur := runs[t.RunID]
			if err := store.CheckTransition(cur, t); err != nil {
				results[i].Err = fmt.Errorf("run transition: %w", err)
				continue
			}
			run := ch.add(cur, t)
			runs[t.RunID], results[i].Run = run, run
		}
		if err := ch.write(ctx, c); err != nil {
			return err
		}
		if err := writeChains(ctx, c, ts, results); err != nil {
			return err
		}
		return writeNotifications(ctx, c, ts, results, now(time.Time{}))
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// getRuns reads the runs of ids that exist, by id.
func getRuns(ctx context.Context, c conn, ids []string) (map[string]*jobs.Run, error) {
	runs, err := scanRuns(c.query(ctx, sqlRunsByID, jsonStrings(ids)))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*jobs.Run, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
	}
	return byID, nil
}

// transition is the one code path that changes a run's status after its
// claim, for a caller that wants any refusal as its error.
func transition(ctx context.Context, c conn, t jobs.Transition) (*jobs.Run, error) {
	cur, err := getRun(ctx, c, t.RunID)
	if err != nil {
		return nil, err
	}
	if err := store.CheckTransition(cur, t); err != nil {
		return nil, err
	}
	var ch changes
	run := ch.add(cur, t)
	if err := ch.write(ctx, c); err != nil {
		return nil, err
	}
	res := []store.TransitionResult{{Run: run}}
	if err := writeChains(ctx, c, []jobs.Transition{t}, res); err != nil {
		return nil, err
	}
	return run, writeNotifications(ctx, c, []jobs.Transition{t}, res, now(time.Time{}))
}
