package scheduler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/schedulerd/schedulerd/jobs"
)

// jobSet is the declared jobs, each with its state (ticks.go). setJobs
// replaces the set whole; its slices and map are never changed in place,
// so a copy of one taken under Scheduler.mu stays valid without it.
type jobSet struct {
	// all is the jobs in declaration order, cron those with a schedule.
	all  []*jobState
	cron []*jobState
	// limits is each job's concurrency limit, as claims take it.
	limits map[string]int
	// names is the job names, sorted: what RunsNextDue reads fastest, and
	// how job finds a job, whose index in all is at the same place in
	// byName (a map, or pointers, would cost more memory per job; a node
	// may declare 100,000).
	names  []string
	byName []int32
}

// newJobSet validates defs and returns their set.
func newJobSet(defs []*jobs.Definition) (jobSet, error) {
	all := make([]*jobState, len(defs))
	limits := make(map[string]int, len(defs))
	ncron := 0
	for _, d := range defs {
		if d.Schedule != nil {
			ncron++
		}
	}
	cron := make([]*jobState, 0, ncron)
	states := make([]jobState, len(defs)) // one allocation, not one per job
	for i, d := range defs {
		if err := d.Validate(); err != nil {
			return jobSet{}, fmt.Errorf("job %q: %w", d.Name, err)
		}
		if _, dup := limits[d.Name]; dup {
			return jobSet{}, fmt.Errorf("job %q: declared twice", d.Name)
		}
		states[i] = newJobState(d)
		all[i] = &states[i]
		limits[d.Name] = d.ConcurrencyLimit()
		if d.Schedule != nil {
			cron = append(cron, all[i])
		}
	}
	byName := make([]int32, len(all))
	for i := range byName {
		byName[i] = int32(i)
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(all[a].def.Name, all[b].def.Name) })
	names := make([]string, len(byName))
	for i, at := range byName {
		names[i] = all[at].def.Name
	}
	return jobSet{all: all, cron: cron, limits: limits, names: names, byName: byName}, nil
}

// job returns the state of a declared job; nil if none.
func (js *jobSet) job(name string) *jobState {
	i, ok := slices.BinarySearch(js.names, name)
	if !ok {
		return nil
	}
	return js.all[js.byName[i]]
}
