package store

import (
	"context"
	"encoding/json"
	"time"
)

// Expectations are the cluster's record of the jobs' expect_success_within
// (the dead man's switch), kept in the store and not only in the nodes'
// configs: a job that a reload removes from every config is still
// expected, and still becomes overdue, until an operator forgets it.
// Backends implement it next to Store.
type Expectations interface {
	// ExpectationsSync, in one transaction, writes the expectations of
	// p.Put (the jobs a node declares with expect_success_within: Within
	// and Notify as given; Since is now, by the store clock, for a new row
	// and kept for an existing one), deletes those of p.Delete (jobs the
	// node declares without the key: the operator ended them), and returns
	// every expectation, sorted by job.
	ExpectationsSync(ctx context.Context, p ExpectationsSyncParams) ([]*Expectation, error)
	// ExpectationsList returns the expectations of the named jobs that
	// have one, or every one when jobNames is nil, sorted by job.
	ExpectationsList(ctx context.Context, jobNames []string) ([]*Expectation, error)
	// ExpectationForget deletes the expectation of job and ends its
	// overdue state (and, unless the job is failing, forgets the
	// notifiers told of it), in one transaction; ErrNotFound when the job
	// has no expectation. It notifies no one.
	ExpectationForget(ctx context.Context, job string) error
}

// Expectation is a job's expect_success_within as the cluster keeps it.
type Expectation struct {
	Job    string
	Within time.Duration
	// Notify are the names of the job's notifiers, as the config that
	// wrote the row named them.
	Notify []string
	// Since is when the cluster first expected a success of the job: the
	// reference of a job that never succeeded.
	Since time.Time
}

// ExpectationsSyncParams are a node's expectations at its start or reload.
type ExpectationsSyncParams struct {
	Put    []Expectation // Since is ignored
	Delete []string
	Now    time.Time
}

// PutJSON is p.Put as the one argument both stores write it from: a JSON
// array of {"j": job, "w": Within in microseconds, "n": Notify, [] for
// none}.
func (p ExpectationsSyncParams) PutJSON() (string, error) {
	type row struct {
		Job    string   `json:"j"`
		Within int64    `json:"w"`
		Notify []string `json:"n"`
	}
	put := make([]row, len(p.Put))
	for i, e := range p.Put {
		put[i] = row{e.Job, e.Within.Microseconds(), e.Notify}
		if put[i].Notify == nil {
			put[i].Notify = []string{}
		}
	}
	arg, err := json.Marshal(put)
	return string(arg), err
}
