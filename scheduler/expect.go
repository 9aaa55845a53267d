package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// The cluster keeps each job's expect_success_within in the store
// (store.Expectations), not only in the configs: a node writes those of
// the jobs it declares with the key at its start and at each reload, and
// deletes those of the jobs it declares without it. A job that no config
// declares any more keeps its expectation: it is retired but still
// expected, and every node checks it as it checks its own jobs, until an
// operator forgets it (Forget). So a job that a reload removed still
// becomes overdue.

// Errors of Forget, for callers to branch on.
var (
	// ErrJobDeclared: this node declares the job; its expectation is its
	// config's.
	ErrJobDeclared = errors.New("job is declared")
	// ErrNotExpected: the cluster keeps no expectation of the job.
	ErrNotExpected = errors.New("no expectation of the job")
)

// retiredJob is an expectation that the cluster keeps of a job this node
// does not declare: a reload removed it here, or only another node's
// config has it.
type retiredJob struct {
	exp store.Expectation
	// succeeded, overdueAsked and overdue are as a jobState's.
	succeeded, overdueAsked int64
	overdue                 bool
}

// retiredSet is the retired jobs sorted by name. It is replaced whole,
// never changed in place but for the entries' states, under Scheduler.mu.
type retiredSet []*retiredJob

// job returns the retired job named name; nil if none.
func (rs retiredSet) job(name string) *retiredJob {
	i, ok := slices.BinarySearchFunc(rs, name, func(r *retiredJob, name string) int {
		return strings.Compare(r.exp.Job, name)
	})
	if !ok {
		return nil
	}
	return rs[i]
}

// without returns the set without the job named name.
func (rs retiredSet) without(name string) retiredSet {
	return slices.DeleteFunc(slices.Clone(rs), func(r *retiredJob) bool { return r.exp.Job == name })
}

// notifierNames are the names of d's notifiers, as an expectation keeps
// them.
func notifierNames(d *jobs.Definition) []string {
	names := make([]string, len(d.Notify))
	for i, t := range d.Notify {
		names[i] = t.Notifier
	}
	return names
}

// syncExpectations writes the expectations of the declared jobs where the
// cluster keeps them (only those that changed: a start that changes
// nothing writes nothing), deletes those of the jobs declared without
// expect_success_within, takes the time the cluster first expected each
// declared job, and makes the others, jobs this node does not declare,
// its retired jobs, with their last successes.
func (s *Scheduler) syncExpectations(ctx context.Context, now time.Time) error {
	rows, err := s.st.ExpectationsList(ctx, nil)
	if err != nil {
		return fmt.Errorf("read expectations: %w", err)
	}
	kept := make(map[string]*store.Expectation, len(rows))
	for _, e := range rows {
		kept[e.Job] = e
	}
	var p store.ExpectationsSyncParams
	for _, d := range s.Jobs() {
		e := kept[d.Name]
		switch {
		case d.ExpectSuccessWithin <= 0:
			if e != nil {
				p.Delete = append(p.Delete, d.Name)
			}
		case e == nil || e.Within != d.ExpectSuccessWithin || !slices.Equal(e.Notify, notifierNames(d)):
			p.Put = append(p.Put, store.Expectation{Job: d.Name, Within: d.ExpectSuccessWithin, Notify: notifierNames(d)})
		}
	}
	if len(p.Put) > 0 || len(p.Delete) > 0 {
		p.Now = s.storeNow(now)
		if rows, err = s.st.ExpectationsSync(ctx, p); err != nil {
			return fmt.Errorf("write expectations: %w", err)
		}
	}
	var (
		retired retiredSet
		names   []string
	)
	s.mu.Lock()
	for _, e := range rows {
		if j := s.declared.job(e.Job); j != nil {
			if j.def.ExpectSuccessWithin > 0 {
				j.expectSince = e.Since.UnixMicro()
			}
			continue
		}
		r := &retiredJob{exp: *e, succeeded: noTick, overdueAsked: noTick}
		if old := s.retired.job(e.Job); old != nil {
			r.succeeded, r.overdueAsked, r.overdue = old.succeeded, old.overdueAsked, old.overdue
		}
		retired = append(retired, r)
		names = append(names, e.Job)
	}
	s.retired = retired
	s.overdueChanged = true
	s.mu.Unlock()
	// Read after the set is in place, so that a result the feed brings
	// meanwhile is not lost: applyResults keeps the newer of both.
	return s.readResults(ctx, names)
}

// retiredNames returns the names of the retired jobs.
func (s *Scheduler) retiredNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, len(s.retired))
	for i, r := range s.retired {
		names[i] = r.exp.Job
	}
	return names
}

// rereadRetired reads the expectations of the retired jobs again, so that
// one that another node forgot is dropped here too (and its overdue
// series with it), and one whose window another node changed is checked
// by the new one.
func (s *Scheduler) rereadRetired(ctx context.Context) error {
	names := s.retiredNames()
	if len(names) == 0 {
		return nil
	}
	rows, err := s.st.ExpectationsList(ctx, names)
	if err != nil {
		return fmt.Errorf("read expectations: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	retired := make(retiredSet, 0, len(rows))
	for _, e := range rows {
		if r := s.retired.job(e.Job); r != nil {
			r.exp = *e
			retired = append(retired, r)
		}
	}
	s.retired = retired
	s.overdueChanged = true
	return nil
}

// targetsOf resolves the notifier names of an expectation with this
// node's notifiers (Config.Notifiers); a name that its config does not
// have is left out.
func (s *Scheduler) targetsOf(names []string) []jobs.NotifyTarget {
	out := []jobs.NotifyTarget{}
	for _, n := range names {
		if t, ok := s.notifiers[n]; ok {
			out = append(out, t)
		}
	}
	return out
}

// SetNotifiers replaces the notifiers by which the notifier names of
// retired jobs' expectations are resolved (Config.Notifiers), after a
// reload.
func (s *Scheduler) SetNotifiers(ts []jobs.NotifyTarget) {
	m := make(map[string]jobs.NotifyTarget, len(ts))
	for _, t := range ts {
		m[t.Notifier] = t
	}
	s.mu.Lock()
	s.notifiers = m
	s.mu.Unlock()
}

// RetiredJob is an expectation that the cluster keeps of a job this node
// does not declare.
type RetiredJob struct {
	Job    string
	Within time.Duration
	// Notify are the names of its notifiers, as the config that wrote the
	// expectation named them.
	Notify []string
	// Since is when the cluster first expected a success of it.
	Since time.Time
	// LastSuccess is its newest success, on any node; zero when none.
	LastSuccess time.Time
	Overdue     bool
}

// Retired returns the expectations of jobs this node does not declare,
// sorted by job.
func (s *Scheduler) Retired() []RetiredJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RetiredJob, 0, len(s.retired))
	for _, r := range s.retired {
		if s.declared.job(r.exp.Job) != nil {
			continue // a reload that failed put it back
		}
		out = append(out, RetiredJob{Job: r.exp.Job, Within: r.exp.Within, Notify: slices.Clone(r.exp.Notify),
			Since: r.exp.Since, LastSuccess: fromMicros(r.succeeded), Overdue: r.overdue})
	}
	return out
}

// Forget ends the expectation of a job that this node does not declare:
// the cluster stops expecting it, its overdue state ends, and no one is
// told. ErrJobDeclared when this node declares the job (its
// expect_success_within is its config's to remove), ErrNotExpected when
// the cluster keeps no expectation of it. A node that declares the job
// with the key writes its expectation again at its next start or reload.
// The log says who asked (actor, see TriggerParams.Actor).
func (s *Scheduler) Forget(ctx context.Context, job, actor string) error {
	if _, ok := s.Job(job); ok {
		return fmt.Errorf("%w: job %q is declared in this node's config: remove expect_success_within from its [[job]] instead", ErrJobDeclared, job)
	}
	err := s.st.ExpectationForget(ctx, job)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w %q: the cluster does not expect it", ErrNotExpected, job)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.retired = s.retired.without(job)
	s.overdueChanged = true
	s.mu.Unlock()
	s.log.InfoContext(ctx, "expectation forgotten: the job is no longer expected to succeed", "job", job, "actor", actor)
	return nil
}
