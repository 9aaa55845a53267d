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
	// all is the jobs in declaration order, byName the same sorted by
	// name (a map would cost more memory per job; a node may declare
	// 100,000), cron those with a schedule.
	all    []*jobState
	byName []*jobState
	cron   []*jobState
	// limits is each job's concurrency limit, as claims take it.
	limits map[string]int
	// names is the job names, sorted: what RunsNextDue reads fastest.
	names []string
}

// newJobSet validates defs and returns their set.
func newJobSet(defs []*jobs.Definition) (jobSet, error) {
	all := make([]*jobState, len(defs))
	limits := make(map[string]int, len(defs))
	var cron []*jobState
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
	byName := slices.Clone(all)
	slices.SortFunc(byName, func(a, b *jobState) int { return strings.Compare(a.def.Name, b.def.Name) })
	names := make([]string, len(byName))
	for i, j := range byName {
		names[i] = j.def.Name
	}
	return jobSet{all: all, byName: byName, cron: slices.Clip(cron), limits: limits, names: names}, nil
}

// job returns the state of a declared job; nil if none.
func (js *jobSet) job(name string) *jobState {
	i, ok := slices.BinarySearchFunc(js.byName, name, func(j *jobState, name string) int {
		return strings.Compare(j.def.Name, name)
	})
	if !ok {
		return nil
	}
	return js.byName[i]
}
