package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// SkipOverlap records in res that overlap = skip skipped the fresh ticks
// of a fire, because a run of the job is still active, and returns the
// newest skipped tick: lastSkipped or a later one.
func SkipOverlap(res *FireResult, fresh []RunInsertParams, lastSkipped time.Time) time.Time {
	res.SkippedOverlap += len(fresh)
	for _, r := range fresh {
		if r.ScheduledAt.After(lastSkipped) {
			lastSkipped = r.ScheduledAt
		}
	}
	return lastSkipped
}

// OneTickAtATime applies overlap = skip and replace among the fresh ticks
// of one fire (several ticks due at once: late ticks within misfire_grace
// after a downtime, or caught up): each tick is judged as if the earlier
// ones had been fired before it, at their time. Under skip the oldest
// tick's run is pending when the later ticks come, so they are skipped;
// under replace each later tick replaces the run of the one before, which
// has not started, so only the newest tick gets a run and the older ones
// are skipped. It returns the ticks left and the newest skipped tick, and
// counts the skipped ones in res. Other policies keep every tick.
func OneTickAtATime(p FireParams, res *FireResult, fresh []RunInsertParams, lastSkipped time.Time) ([]RunInsertParams, time.Time) {
	if len(fresh) < 2 || (p.Overlap != jobs.OverlapSkip && p.Overlap != jobs.OverlapReplace) {
		return fresh, lastSkipped
	}
	keep := 0
	for i, r := range fresh {
		if p.Overlap == jobs.OverlapSkip && r.ScheduledAt.Before(fresh[keep].ScheduledAt) ||
			p.Overlap == jobs.OverlapReplace && r.ScheduledAt.After(fresh[keep].ScheduledAt) {
			keep = i
		}
	}
	var skipped []RunInsertParams
	for i, r := range fresh {
		if i != keep {
			skipped = append(skipped, r)
		}
	}
	return []RunInsertParams{fresh[keep]}, SkipOverlap(res, skipped, lastSkipped)
}

// SortByCreation orders runs as overlap = replace cancels them: oldest
// first, by creation time, then id.
func SortByCreation(runs []*jobs.Run) {
	slices.SortFunc(runs, func(a, b *jobs.Run) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
}

// Deferred reports whether a fire that won its compare-and-set waits for
// its tick (see FireParams.Overlap): it is ahead of time (every fresh run's
// tick is later than now), its job's policy looks at active runs, it has
// some, and it does not make the cursor.
func Deferred(p FireParams, fresh []RunInsertParams, active int, now time.Time) bool {
	if active == 0 || len(fresh) == 0 || p.Expect.IsZero() ||
		(p.Overlap != jobs.OverlapSkip && p.Overlap != jobs.OverlapReplace) {
		return false
	}
	for _, r := range fresh {
		if !r.ScheduledAt.After(now) {
			return false
		}
	}
	return true
}

// HasOccurrence reports whether the runs of trigger are identified by
// their occurrence (job, scheduled time): a schedule's ticks, backfilled
// or not, and one-off jobs.
func HasOccurrence(t jobs.Trigger) bool {
	return t == jobs.TriggerSchedule || t == jobs.TriggerOnce || t == jobs.TriggerBackfill
}

// OccurrenceKind is the kind an occurrence of a run of trigger is stored
// with: a backfilled tick is a schedule's tick (and pruned as one).
func OccurrenceKind(t jobs.Trigger) string {
	if t == jobs.TriggerBackfill {
		return string(jobs.TriggerSchedule)
	}
	return string(t)
}

// Occurrence is the key of a tick's run: its job and its scheduled time in
// unix microseconds, the precision both stores keep.
type Occurrence struct {
	Job string
	At  int64
}

// FireRounds cuts a batch of fires into rounds of distinct jobs, in order,
// and calls round with the bounds of each in ps: a job fired twice sees
// its first fire, as the second starts a new round.
func FireRounds(ps []FireParams, round func(from, to int) error) error {
	for from := 0; from < len(ps); {
		to, seen := from, map[string]bool{}
		for to < len(ps) && !seen[ps[to].Job] {
			seen[ps[to].Job] = true
			to++
		}
		if err := round(from, to); err != nil {
			return err
		}
		from = to
	}
	return nil
}

// FreshRuns returns the runs that a fire which won its compare-and-set
// makes, and the newest skipped tick: its runs less those of a tick whose
// occurrence has a run (taken) or comes twice, each a duplicate in res,
// then as OneTickAtATime leaves them.
func FreshRuns(p FireParams, res *FireResult, runs []RunInsertParams, taken map[Occurrence]bool) ([]RunInsertParams, time.Time) {
	var fresh []RunInsertParams
	seen := map[int64]bool{}
	for _, r := range runs {
		if HasOccurrence(r.Trigger) {
			key := r.ScheduledAt.UnixMicro()
			if taken[Occurrence{r.Job, key}] || seen[key] {
				res.Duplicates++
				continue
			}
			seen[key] = true
		}
		fresh = append(fresh, r)
	}
	return OneTickAtATime(p, res, fresh, p.LastSkipped)
}
