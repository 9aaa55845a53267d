package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// FireRuns checks a fire's parameters and returns its runs with the job,
// trigger and node filled in. Both backends call it before they write a
// fire, so they refuse the same things.
func FireRuns(p FireParams) ([]RunInsertParams, error) {
	switch {
	case p.Job == "":
		return nil, errors.New("fire schedule: job name is empty")
	case p.Cursor.IsZero():
		return nil, fmt.Errorf("fire schedule %s: the new cursor is zero", p.Job)
	case !p.Expect.IsZero() && p.Cursor.Before(p.Expect):
		return nil, fmt.Errorf("fire schedule %s: the cursor would move back from %s to %s", p.Job,
			p.Expect.UTC().Format(time.RFC3339), p.Cursor.UTC().Format(time.RFC3339))
	}
	runs := make([]RunInsertParams, len(p.Runs))
	for i, r := range p.Runs {
		switch {
		case r.Job == "":
			r.Job = p.Job
		case r.Job != p.Job:
			return nil, fmt.Errorf("fire schedule %s: a run of job %s", p.Job, r.Job)
		}
		if r.Trigger == "" {
			r.Trigger = jobs.TriggerSchedule
		}
		if r.Node == "" {
			r.Node = p.Node
		}
		runs[i] = r
	}
	return runs, nil
}
