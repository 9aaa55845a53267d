package store

import (
	"context"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// Backfills is the durable state of backfills (schedulerd backfill): the
// runs of a job's past ticks, made a few at a time so that at most
// MaxParallel of them are active at once, across restarts of any node.
// Each run is keyed by its job and tick as a schedule's run is (the
// occurrence), so a tick that has a run, the scheduler's or a backfill's,
// never gets another.
type Backfills interface {
	// BackfillCreate records a backfill of p.Job's ticks from p.Next to
	// p.To; it makes no run (BackfillAdvance does).
	BackfillCreate(ctx context.Context, p BackfillCreateParams) (*Backfill, error)
	// BackfillsActive returns the unfinished backfills of the named jobs,
	// oldest first.
	BackfillsActive(ctx context.Context, jobNames []string) ([]*Backfill, error)
	// BackfillAdvance makes the runs of the next ticks of a backfill, in
	// one transaction, by compare-and-set on its Next (see
	// BackfillAdvanceParams).
	BackfillAdvance(ctx context.Context, p BackfillAdvanceParams) (*BackfillAdvanceResult, error)
	// OccurrenceRuns returns, for each tick of job from from to to (both
	// included) that has an occurrence, the id of the run it was given
	// (which may since have been pruned), by the tick in unix
	// microseconds.
	OccurrenceRuns(ctx context.Context, job string, from, to time.Time) (map[int64]string, error)
}

// Backfill is a backfill of the ticks of Job from From to To, both
// included.
type Backfill struct {
	ID   string
	Job  string
	From time.Time
	To   time.Time
	// Next is the first tick not yet handled; zero once every tick is.
	Next time.Time
	// MaxParallel bounds the active (pending, running, retrying) backfill
	// runs of the job whose tick is within From..To; 0: no bound.
	MaxParallel int
	// Created counts the runs the backfill made, Skipped the ticks it
	// found with a run already.
	Created   int64
	Skipped   int64
	Actor     string
	Node      string
	CreatedAt time.Time
	UpdatedAt time.Time
	DoneAt    time.Time // zero while Next is not
}

// Done reports whether every tick of the backfill was handled.
func (b *Backfill) Done() bool { return b.Next.IsZero() }

// BackfillCreateParams describes a new backfill: its first tick is Next.
type BackfillCreateParams struct {
	Job         string
	From, To    time.Time
	Next        time.Time
	MaxParallel int
	Actor       string
	Node        string
	Now         time.Time
}

// BackfillAdvanceParams makes the runs of the next ticks of backfill ID.
type BackfillAdvanceParams struct {
	ID string
	// Expect is the backfill's Next as the caller read it: when the stored
	// one differs (another node advanced it), nothing is written and
	// BackfillAdvanceResult.Advanced is false.
	Expect time.Time
	// Runs are the runs of the consecutive ticks from Expect on, in order,
	// each a jobs.TriggerBackfill run of the backfill's job whose
	// ScheduledAt is its tick. The store makes them in order while the
	// backfill has room under MaxParallel, skipping the ticks whose
	// occurrence exists, and stops at the first tick it has no room for,
	// which becomes Next.
	Runs []RunInsertParams
	// After is the tick that follows the last of Runs, the backfill's Next
	// when every one of Runs was handled; zero when they end the range.
	After time.Time
	Now   time.Time
}

// BackfillAdvanceResult says what BackfillAdvance did.
type BackfillAdvanceResult struct {
	Advanced bool
	Created  []*jobs.Run
	// Skipped counts the ticks of this advance that had a run already.
	Skipped  int
	Backfill *Backfill // as stored after the advance
}

// AdvanceBackfill is the walk of BackfillAdvance that both stores share:
// it goes through p.Runs in order with room for slots more runs (below 0:
// no bound), skipping those whose tick is taken, making the others with
// insert (which returns nil when it found the tick taken after all, by a
// concurrent maker) until there is no room left. It returns the runs made,
// the ticks skipped and the backfill's next Next.
func AdvanceBackfill(p BackfillAdvanceParams, slots int, taken func(at time.Time) bool,
	insert func(RunInsertParams) (*jobs.Run, error)) (made []*jobs.Run, skipped int, next time.Time, err error) {
	for _, r := range p.Runs {
		if taken(r.ScheduledAt) {
			skipped++
			continue
		}
		if slots == 0 {
			return made, skipped, r.ScheduledAt, nil
		}
		run, err := insert(r)
		if err != nil {
			return nil, 0, time.Time{}, err
		}
		if run == nil {
			skipped++
			continue
		}
		made = append(made, run)
		slots--
	}
	return made, skipped, p.After, nil
}

// BackfillSlots is the room a backfill with maxParallel (0: no bound) has
// when active of its runs are active: below 0 for no bound.
func BackfillSlots(maxParallel, active int) int {
	if maxParallel <= 0 {
		return -1
	}
	return max(maxParallel-active, 0)
}
