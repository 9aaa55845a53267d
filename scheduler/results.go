package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// readResults reads the results of the named jobs from the store into
// their states, syncBatch jobs at a time.
func (s *Scheduler) readResults(ctx context.Context, names []string) error {
	var rs []store.JobResult
	for start := 0; start < len(names); start += syncBatch {
		byJob, err := s.st.JobsResults(ctx, names[start:min(start+syncBatch, len(names))])
		if err != nil {
			return fmt.Errorf("read job results: %w", err)
		}
		rs = rs[:0]
		for _, r := range byJob {
			rs = append(rs, r)
		}
		s.applyResults(rs)
	}
	return nil
}

// resultsLoop records the results of runs that end on any node, as the
// store's feed tells of them, in the declared jobs' states. When the feed
// may have missed some (its listener reconnected), it reads the results
// of every declared job again, and tries again a second later if that
// read fails.
func (s *Scheduler) resultsLoop() {
	defer s.life.loops.Done()
	ctx := s.life.loopCtx
	feed := s.st.ResultFeed()
	for {
		select {
		case <-ctx.Done():
			return
		case <-feed.Changed():
		}
		if err := s.takeResults(ctx, feed); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.noteStoreError(err)
			s.log.ErrorContext(ctx, "read the results of jobs again", "error", err)
			feed.Lost() // read them at the next turn, in a second
			t := s.clock.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
			continue
		}
		s.testSignals.resultsApplied()
	}
}

// takeResults records what the feed brought, and reads the results of
// every declared and retired job again when it may have missed some.
func (s *Scheduler) takeResults(ctx context.Context, feed *store.ResultFeed) error {
	rs, missed := feed.Take()
	s.applyResults(rs)
	if !missed {
		return nil
	}
	return s.readResults(ctx, append(s.jobNames(), s.retiredNames()...))
}
