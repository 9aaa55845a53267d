package store

import (
	"fmt"

	"github.com/schedulerd/schedulerd/jobs"
)

// ChainRuns returns the runs that the transition t, which left run as it
// is, makes of its chain (jobs.Transition.Chain): those of the list that
// the run's end calls for (jobs.Chain.ChainEnd), none when t did not end
// the run so. Each is due at the run's end (never before its job's
// NotBefore), expires at its job's NotAfter, carries the run's payload and
// is keyed by the run (ParentRunID) and its job, which the store holds
// unique: a backend writes them in the transaction that writes t, and a
// run whose end made them once can never make them again. A job whose
// NotAfter is not after that start gets no run.
func ChainRuns(t jobs.Transition, run *jobs.Run) []RunInsertParams {
	if run == nil || !run.Status.Terminal() {
		return nil
	}
	list := t.Chain.ChainEnd(run.Status, run.Reason)
	if len(list) == 0 {
		return nil
	}
	at := run.FinishedAt
	out := make([]RunInsertParams, 0, len(list))
	for _, c := range list {
		nb := at
		if c.NotBefore.After(nb) {
			nb = c.NotBefore
		}
		if !c.NotAfter.IsZero() && !c.NotAfter.After(nb) {
			continue
		}
		out = append(out, RunInsertParams{
			Job: c.Job, Trigger: jobs.TriggerChain, ScheduledAt: at, NotBefore: nb, NotAfter: c.NotAfter,
			Retry: c.Retry, NoRetryExitCodes: c.NoRetryExitCodes, ParentRunID: run.ID, Payload: run.Payload,
			Node: t.Node, Now: at,
		})
	}
	return out
}

// CheckChainParams checks that p is a run of a chain exactly when it
// names its parent run.
func CheckChainParams(p RunInsertParams) error {
	switch {
	case p.Trigger == jobs.TriggerChain && p.ParentRunID == "":
		return fmt.Errorf("a %s run needs its parent run", p.Trigger)
	case p.Trigger != jobs.TriggerChain && p.ParentRunID != "":
		return fmt.Errorf("a %s run has no parent run", p.Trigger)
	}
	return nil
}

// ChainDuplicate is the error of a run of a chain whose parent run made a
// run of its job already.
func ChainDuplicate(p RunInsertParams, other string) error {
	if other == "" {
		return fmt.Errorf("%w: run %s already made a run of job %s", ErrDuplicate, p.ParentRunID, p.Job)
	}
	return fmt.Errorf("%w: run %s already made run %s of job %s", ErrDuplicate, p.ParentRunID, other, p.Job)
}
