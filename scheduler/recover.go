package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// recoverOwn resolves, through the retry flow, the attempts that an earlier
// process of this node left running: that process is gone (the store lock or
// the node registry says so), so they were interrupted.
func (s *Scheduler) recoverOwn(ctx context.Context, now time.Time) error {
	runs, err := s.st.RunsRunning(ctx, s.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("list interrupted runs: %w", err)
	}
	runs = slices.DeleteFunc(runs, func(r *jobs.Run) bool { return r.Incarnation == s.Incarnation() })
	res := jobs.Result{Err: errors.New("the node's previous process ended while the attempt ran")}
	_, err = s.failAttempts(ctx, runs, res, jobs.ReasonInterrupted, now)
	if err != nil {
		return fmt.Errorf("resolve interrupted runs: %w", err)
	}
	// So do the deliveries it had leased: they are due again at once.
	n, err := s.st.NotificationsRelease(ctx, store.NotificationsReleaseParams{Node: s.cfg.NodeID, Incarnation: s.Incarnation()})
	if err != nil {
		return fmt.Errorf("release interrupted notifications: %w", err)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "notifications of the previous process are due again", "count", n)
	}
	return nil
}

// recoverBatch bounds the attempts one recovery transaction ends.
const recoverBatch = 500

// failAttempts ends the running attempts of runs that no process runs any
// more (this node's previous process's, or a silent node's) through the
// retry flow with res and reason, recoverBatch per transaction: a node
// that ran 2,000 attempts is recovered in four writes, not 2,000. Each
// transition is fenced by the dead attempt, as s.transition's: a run that
// another node recovered meanwhile is left to it. It returns how many
// attempts it ended, and the first failure: of a batch (whose transitions
// wrote nothing), or of a run.
func (s *Scheduler) failAttempts(ctx context.Context, runs []*jobs.Run, res jobs.Result, reason jobs.Reason, now time.Time) (ended int, err error) {
	for part := range slices.Chunk(runs, recoverBatch) {
		ts := make([]jobs.Transition, len(part))
		for i, r := range part {
			f := jobs.Fence{RunID: r.ID, Attempt: r.Attempt, Incarnation: r.Incarnation}
			ts[i] = jobs.FailAttempt(r, f, s.cfg.NodeID, res, reason, now, s.cfg.Rand)
			ts[i].Time = s.storeNow(ts[i].Time)
			ts[i].Notify, ts[i].Chain = s.notifyTargets(r.Job), s.chainOf(r.Job)
		}
		results, berr := s.st.RunTransitionMany(ctx, ts)
		if berr != nil {
			return ended, berr
		}
		s.notifyWake()
		s.chainWake(ts...)
		failed := make([]*jobs.Run, 0, len(results))
		for i, rr := range results {
			r := part[i]
			switch {
			case rr.Err == nil:
				ended++
				failed = append(failed, rr.Run)
				s.logRun(ctx, rr.Run, r.Status, "")
			case errors.Is(rr.Err, store.ErrFenced):
				s.logFenced(ctx, r, ts[i])
			case err == nil:
				err = fmt.Errorf("run %s: %w", r.ID, rr.Err)
			}
		}
		s.noteRunsEnded(failed...)
	}
	return ended, err
}
