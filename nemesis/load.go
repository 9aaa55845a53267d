package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

// load sends triggers through the nodes' sockets, one loop per node, and
// records each with its answer: some with a dedup id from a small pool (so
// that some are refused as duplicates), some with a not_before or a
// not_after, to the jobs that run only when triggered.
type load struct {
	mu       sync.Mutex
	triggers []Trigger
}

func (l *load) run(ctx context.Context, nodes []*node, seed int64) {
	var wg sync.WaitGroup
	for i, n := range nodes {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(1000+i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				pause := time.Duration(500+rng.IntN(1500)) * time.Millisecond
				select {
				case <-ctx.Done():
					return
				case <-time.After(pause):
				}
				l.trigger(n, rng)
			}
		}()
	}
	wg.Wait()
}

func (l *load) trigger(n *node, rng *rand.Rand) {
	j := triggerJobs[rng.IntN(len(triggerJobs))]
	var req control.TriggerRequest
	if rng.IntN(10) < 4 {
		req.DedupID = fmt.Sprintf("dedup-%d", rng.IntN(8))
	}
	// Windows in whole milliseconds: the store keeps microseconds.
	now := time.Now().Truncate(time.Millisecond)
	if rng.IntN(10) < 3 {
		nb := now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		req.NotBefore = &nb
	}
	if rng.IntN(10) < 3 {
		from := now
		if req.NotBefore != nil {
			from = *req.NotBefore
		}
		na := from.Add(time.Duration(500+rng.IntN(20000)) * time.Millisecond)
		req.NotAfter = &na
	}
	if rng.IntN(4) == 0 {
		req.Payload = fmt.Sprintf("payload-%d", rng.IntN(1000))
	}
	t := Trigger{Job: j.name, Node: n.id, DedupID: req.DedupID, NotBefore: req.NotBefore, NotAfter: req.NotAfter, Sent: time.Now()}
	// Not the load's context: a request under way when the load stops
	// gets its answer, and is recorded.
	run, err := n.api().Trigger(context.Background(), j.name, req)
	t.Answered = time.Now()
	switch {
	case err == nil:
		t.Outcome, t.RunID = outcomeOK, run.ID
	case errors.Is(err, control.ErrDuplicate):
		t.Outcome, t.Error = outcomeDuplicate, err.Error()
	default:
		t.Outcome, t.Error = outcomeError, err.Error()
	}
	l.mu.Lock()
	l.triggers = append(l.triggers, t)
	l.mu.Unlock()
}

// sent returns the triggers so far.
func (l *load) sent() []Trigger {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Trigger(nil), l.triggers...)
}
