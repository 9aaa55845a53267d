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
