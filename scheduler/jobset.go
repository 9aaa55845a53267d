package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// jobSet is the declared jobs, each with its state (ticks.go). setJobs
// replaces the set whole; its slices are never changed in place, so a
// copy of one taken under Scheduler.mu stays valid without it.
type jobSet struct {
	// all is the jobs in declaration order, cron those with a schedule.
	all  []*jobState
	cron []*jobState
	// names is the job names, sorted: what RunsNextDue reads fastest, and
	// how job finds a job, whose index in all is at the same place in
	// byName, and claims its limit (a map, or pointers, would cost more
	// memory per job; a node may declare 100,000).
	names  []string
	byName []int32
	limits store.JobLimits
}

// newJobSet validates defs and returns their set.
func newJobSet(defs []*jobs.Definition) (jobSet, error) {
	all := make([]*jobState, len(defs))
	byName := make([]int32, len(defs))
	ncron := 0
	for i, d := range defs {
		byName[i] = int32(i)
		if d.Schedule != nil {
			ncron++
		}
	}
	// In declaration order among equal names: each but the first is a
	// job declared twice.
	slices.SortStableFunc(byName, func(a, b int32) int { return strings.Compare(defs[a].Name, defs[b].Name) })
	twice := map[int32]bool{}
	for i := 1; i < len(byName); i++ {
		if defs[byName[i]].Name == defs[byName[i-1]].Name {
			twice[byName[i]] = true
		}
	}
	cron := make([]*jobState, 0, ncron)
	states := make([]jobState, len(defs)) // one allocation, not one per job
	for i, d := range defs {
		if err := d.Validate(); err != nil {
			return jobSet{}, fmt.Errorf("job %q: %w", d.Name, err)
		}
		if twice[int32(i)] {
			return jobSet{}, fmt.Errorf("job %q: declared twice", d.Name)
		}
		states[i] = newJobState(d)
		all[i] = &states[i]
		if d.Schedule != nil {
			cron = append(cron, all[i])
		}
	}
	names := make([]string, len(byName))
	limits := make([]int32, len(byName))
	for i, at := range byName {
		d := all[at].def
		names[i], limits[i] = d.Name, int32(min(d.ConcurrencyLimit(), math.MaxInt32))
	}
	return jobSet{all: all, cron: cron, names: names, byName: byName, limits: store.JobLimitsOf(names, limits)}, nil
}

// job returns the state of a declared job; nil if none.
func (js *jobSet) job(name string) *jobState {
	i, ok := slices.BinarySearch(js.names, name)
	if !ok {
		return nil
	}
	return js.all[js.byName[i]]
}
