package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Backfill limits.
const (
	// MaxBackfillTicks is the most ticks a backfill makes without
	// BackfillParams.Yes.
	MaxBackfillTicks = 10000
	// BackfillTickLimit is the most ticks a backfill makes at all: a
	// longer range is to be split.
	BackfillTickLimit = 1000000
	// MaxBackfillParallel bounds BackfillParams.MaxParallel.
	MaxBackfillParallel = 10000
	// backfillBatch is how many ticks one advance of a backfill is given.
	backfillBatch = 500
	// backfillAdvances bounds the advances of a backfill in one call of
	// advanceBackfill (one loop iteration, or the request that starts it):
	// a range of many ticks that have runs already is walked a few
	// transactions at a time.
	backfillAdvances = 8
	// backfillReread is how often at least the loop reads the unfinished
	// backfills, to learn of those another node started.
	backfillReread = 10 * time.Second
)

var (
	// ErrNoSchedule: a backfill of a job without a schedule.
	ErrNoSchedule = errors.New("job has no schedule")
	// ErrBadBackfill: a backfill whose range or options are refused.
	ErrBadBackfill = errors.New("bad backfill")
)

// BackfillParams are the options of a backfill.
type BackfillParams struct {
	// From and To bound the ticks, both included: an RFC 3339 time, or a
	// date (2026-11-01) in the job's time zone, which is the start of that
	// day for From and its end for To.
	From, To string
	// DryRun lists the ticks and makes nothing.
	DryRun bool
	// MaxParallel bounds the backfill's runs active at once; 0: 1.
	MaxParallel int
	// Yes allows more than MaxBackfillTicks ticks.
	Yes bool
	// Actor is who asks (see TriggerParams.Actor).
	Actor string
}

// BackfillTick is a tick of a backfill and the run it had already, if any.
type BackfillTick struct {
	At    time.Time
	RunID string // "" when the tick had no run
}

// BackfillResult says what a backfill found and did.
type BackfillResult struct {
	Job string
	// From and To are the range as resolved, both included; Zone the
	// time zone dates were read in.
	From, To time.Time
	Zone     string
	// Ticks counts the ticks in the range, Taken those that had a run.
	Ticks, Taken int
	// List is every tick, for a dry run (the first MaxBackfillTicks).
	List   []BackfillTick
	DryRun bool
	// Backfill is the backfill made, after its first runs; nil for a dry
	// run or a range without a tick that lacks a run.
	Backfill *store.Backfill
}

// Backfill makes runs of the ticks of job's schedule from p.From to p.To
// that have none (see store.Backfills), at most p.MaxParallel active at
// once; the scheduling loop of any node that declares the job makes the
// rest as they end.
func (s *Scheduler) Backfill(ctx context.Context, job string, p BackfillParams) (*BackfillResult, error) {
	d, ok := s.Job(job)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q", ErrUnknownJob, job)
	case d.Schedule == nil:
		return nil, fmt.Errorf("%w: job %q is a %s job; only a job with a schedule has ticks to backfill", ErrNoSchedule, job, d.Kind())
	case p.MaxParallel < 0 || p.MaxParallel > MaxBackfillParallel:
		return nil, fmt.Errorf("%w: max parallel must be from 1 to %d, not %d", ErrBadBackfill, MaxBackfillParallel, p.MaxParallel)
	}
	if p.MaxParallel == 0 {
		p.MaxParallel = 1
	}
	loc := time.UTC
	if l, ok := d.Schedule.(interface{ Location() *time.Location }); ok && l.Location() != nil {
		loc = l.Location()
	}
	from, err := ParseBackfillTime(p.From, loc, false)
	if err != nil {
		return nil, fmt.Errorf("%w: from: %w", ErrBadBackfill, err)
	}
	to, err := ParseBackfillTime(p.To, loc, true)
	if err != nil {
		return nil, fmt.Errorf("%w: to: %w", ErrBadBackfill, err)
	}
	now := s.clock.Now()
	switch {
	case from.After(to):
		return nil, fmt.Errorf("%w: from %s is after to %s", ErrBadBackfill, from.Format(time.RFC3339), to.Format(time.RFC3339))
	case to.After(now):
		return nil, fmt.Errorf("%w: to %s is in the future (now %s): a backfill makes runs of past ticks only",
			ErrBadBackfill, to.Format(time.RFC3339), now.In(loc).Format(time.RFC3339))
	case !d.NotAfter.IsZero() && !d.NotAfter.After(now):
		return nil, fmt.Errorf("%w: job %q ended at its not_after %s", ErrBadBackfill, job, d.NotAfter.Format(time.RFC3339))
	}
	limit := MaxBackfillTicks
	if p.Yes {
		limit = BackfillTickLimit
	}
	ticks, more := backfillTicks(d, from, to, limit)
	if more {
		if !p.Yes {
			return nil, fmt.Errorf("%w: job %q has more than %d ticks from %s to %s: add --yes (\"yes\": true) to backfill them all",
				ErrBadBackfill, job, MaxBackfillTicks, from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		return nil, fmt.Errorf("%w: job %q has more than %d ticks from %s to %s: split the range",
			ErrBadBackfill, job, BackfillTickLimit, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	res := &BackfillResult{Job: job, From: from, To: to, Zone: loc.String(), Ticks: len(ticks), DryRun: p.DryRun}
	if len(ticks) == 0 {
		return res, nil
	}
	runs, err := s.st.OccurrenceRuns(ctx, job, ticks[0], ticks[len(ticks)-1])
	if err != nil {
		return nil, err
	}
	first := time.Time{}
	for _, at := range ticks {
		id := runs[at.UnixMicro()]
		if id != "" {
			res.Taken++
		} else if first.IsZero() {
			first = at
		}
		if p.DryRun && len(res.List) < MaxBackfillTicks {
			res.List = append(res.List, BackfillTick{At: at, RunID: id})
		}
	}
	if p.DryRun || first.IsZero() {
		return res, nil
	}
	b, err := s.st.BackfillCreate(ctx, store.BackfillCreateParams{Job: job, From: from, To: to, Next: first,
		MaxParallel: p.MaxParallel, Actor: p.Actor, Node: s.cfg.NodeID, Now: s.storeNow(now)})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "backfill started", "job", job, "backfill", b.ID, "from", from, "to", to,
		"ticks", len(ticks), "taken", res.Taken, "max_parallel", b.MaxParallel, "actor", p.Actor)
	if b, err = s.advanceBackfill(ctx, b); err != nil {
		return nil, err
	}
	res.Backfill = b
	s.loop.backfillsNew.Store(true)
	s.Wake()
	return res, nil
}

// ParseBackfillTime reads a bound of a backfill's range: an RFC 3339 time,
// or a date in loc, the start of that day, or with end its last
// microsecond.
func ParseBackfillTime(v string, loc *time.Location, end bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, errors.New("want an RFC 3339 time or a date (2026-11-01), got nothing")
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.In(loc), nil
	}
	d, err := time.ParseInLocation(time.DateOnly, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time (2026-11-01T02:00:00Z) or a date (2026-11-01), got %q", clipText(v))
	}
	if end {
		y, m, day := d.Date()
		return time.Date(y, m, day+1, 0, 0, 0, 0, loc).Add(-time.Microsecond), nil
	}
	return d, nil
}

func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// backfillTicks returns the ticks of d's schedule from from to to, both
// included, that are part of its life (InLife), and whether there are
// more than limit of them (then the first limit).
func backfillTicks(d *jobs.Definition, from, to time.Time, limit int) ([]time.Time, bool) {
	var out []time.Time
	for t := d.Schedule.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = d.Schedule.Next(t) {
		if !d.InLife(t) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, t)
	}
	return out, false
}

// advanceBackfill makes the runs of b's next ticks while it has room, and
// returns it as it then is. It does nothing for a job this node does not
// declare with a schedule, nor after another node advanced b first.
func (s *Scheduler) advanceBackfill(ctx context.Context, b *store.Backfill) (*store.Backfill, error) {
	d, ok := s.Job(b.Job)
	if !ok || d.Schedule == nil {
		return b, nil
	}
	for advances := 0; !b.Done(); advances++ {
		if advances == backfillAdvances {
			// Ticks that had runs already take a turn each too: the
			// loop goes on with the rest at its next iteration.
			s.Wake()
			break
		}
		now := s.clock.Now()
		ended := !d.NotAfter.IsZero() && !d.NotAfter.After(now) // its runs could never start
		var runs []store.RunInsertParams
		t := b.Next
		for ; !t.IsZero() && !t.After(b.To) && len(runs) < backfillBatch; t = d.Schedule.Next(t) {
			if !ended && d.InLife(t) {
				runs = append(runs, store.RunInsertParams{Job: b.Job, Trigger: jobs.TriggerBackfill, ScheduledAt: t,
					NotBefore: now, NotAfter: d.NotAfter, Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes,
					Node: s.cfg.NodeID, Actor: b.Actor, Now: s.storeNow(now)})
			}
		}
		if t.After(b.To) {
			t = time.Time{}
		}
		res, err := s.st.BackfillAdvance(ctx, store.BackfillAdvanceParams{ID: b.ID, Expect: b.Next, Runs: runs, After: t,
			Now: s.storeNow(now)})
		if err != nil {
			return b, err
		}
		for _, r := range res.Created {
			s.logRun(ctx, r, "", "backfill run made", "backfill", b.ID, "tick", r.ScheduledAt, "actor", r.Actor)
		}
		moved := !res.Backfill.Next.Equal(b.Next)
		b = res.Backfill
		if b.Done() {
			s.log.InfoContext(ctx, "backfill done", "job", b.Job, "backfill", b.ID, "created", b.Created, "skipped", b.Skipped)
		}
		if !res.Advanced || !moved {
			break
		}
	}
	return b, nil
}

// topUpBackfills makes the next runs of the unfinished backfills of the
// declared jobs as earlier ones end. It reads them every poll interval
// or every backfillReread if that is longer (another node may have
// started one), at once after this node started one, and advances those
// it knows of at every iteration.
func (s *Scheduler) topUpBackfills(it *iteration) {
	if s.loop.backfillsNew.Swap(false) || it.now.Sub(s.loop.backfillsReadAt) >= max(s.cfg.PollInterval, backfillReread) {
		s.loop.backfillsReadAt = it.now
		s.mu.Lock()
		names := s.declared.names // replaced, never changed, by setJobs
		s.mu.Unlock()
		bs, err := s.st.BackfillsActive(it.ctx, names)
		if err != nil {
			s.loopError(it, "read backfills", err)
			return
		}
		s.loop.backfills = bs
	}
	kept := s.loop.backfills[:0]
	for _, b := range s.loop.backfills {
		b, err := s.advanceBackfill(it.ctx, b)
		if err != nil {
			s.loopError(it, "advance backfill", err)
		}
		if !b.Done() {
			kept = append(kept, b)
		}
	}
	clear(s.loop.backfills[len(kept):])
	s.loop.backfills = kept
}
