package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// activitySampler is a sampling profiler of the PostgreSQL server: it reads
// pg_stat_activity every period and counts, per statement, how often a
// backend of the database was running it. A statement's share of the
// samples is its share of the server's busy time (CPU, I/O and lock waits
// alike). It costs one small query per period.
type activitySampler struct {
	b       *backend
	period  time.Duration
	mu      sync.Mutex
	counts  map[string]int
	samples int
	// waits: each statement's key starts with what its backend waited
	// for when sampled ("CPU" when nothing).
	waits bool
	stop  context.CancelFunc
	done  chan struct{}
}

// startSampler starts sampling the database of b.
func startSampler(ctx context.Context, b *backend, period time.Duration) *activitySampler {
	return newSampler(ctx, b, period, false)
}

// startWaitSampler is startSampler with the waits in the keys.
func startWaitSampler(ctx context.Context, b *backend, period time.Duration) *activitySampler {
	return newSampler(ctx, b, period, true)
}

func newSampler(ctx context.Context, b *backend, period time.Duration, waits bool) *activitySampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &activitySampler{b: b, period: period, counts: map[string]int{}, waits: waits, stop: cancel, done: make(chan struct{})}
	go s.loop(ctx)
	return s
}

func (s *activitySampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var queries []string
		q := `SELECT query, coalesce(wait_event_type || ':' || wait_event, 'CPU'), '' FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`
		if s.waits {
			// A backend waiting for a lock: whom for, what that one runs.
			q = `SELECT a.query, coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU'),
				CASE WHEN a.wait_event_type = 'Lock' THEN coalesce((SELECT b.state || ': ' || b.query
					FROM pg_stat_activity b WHERE b.pid = (pg_blocking_pids(a.pid))[1]), '') ELSE '' END
				FROM pg_stat_activity a
				WHERE a.datname = current_database() AND a.state = 'active' AND a.pid <> pg_backend_pid()`
		}
		err := s.b.db.rows(ctx, q, nil, func(c []any) error {
			if q, ok := c[0].(string); ok {
				k := statementKey(q)
				if w, _ := c[1].(string); s.waits {
					k = "[" + w + "] " + k
				}
				if by, _ := c[2].(string); by != "" {
					k += " <- held by " + statementKey(by)
				}
				queries = append(queries, k)
			}
			return nil
		})
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.samples++
		for _, q := range queries {
			s.counts[q]++
		}
		s.mu.Unlock()
	}
}

// statementKey shortens a statement to a recognizable key: its first 80
// characters, whitespace collapsed.
func statementKey(q string) string {
	k := strings.Join(strings.Fields(q), " ")
	if len(k) > 80 {
		k = k[:80] + "..."
	}
	return k
}

// report stops the sampler and returns the top statements by share of the
// samples in which a backend was busy.
func (s *activitySampler) report(top int) []string {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	type kv struct {
		k string
		n int
	}
	var all []kv
	busy := 0
	for k, n := range s.counts {
		all = append(all, kv{k, n})
		busy += n
	}
	slices.SortFunc(all, func(a, b kv) int { return b.n - a.n })
	out := []string{fmt.Sprintf("server samples: %d (every %s), %d busy backend-samples", s.samples, s.period, busy)}
	for i, x := range all {
		if i == top {
			break
		}
		out = append(out, fmt.Sprintf("%5.1f%%  %s", 100*float64(x.n)/float64(max(busy, 1)), x.k))
	}
	return out
}
