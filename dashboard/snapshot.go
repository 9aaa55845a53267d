package dashboard

import (
	"context"
	"sync"
	"time"
)

// snapshots share the data of each page among its viewers, so that the
// store's work does not grow with them: the requests for a page (the
// overview, a job's runs, a run) that come while its data is read wait
// for that read, and those of the next ttl get its result without another.
// Each page's data is thus read at most once per ttl, however many
// browsers show it, and at most maxBuilds reads run at once. Snapshots
// older than ttl are dropped as new ones are made, and at most
// maxSnapshots are kept.
type snapshots struct {
	ttl    time.Duration
	builds chan struct{}

	mu sync.Mutex
	m  map[string]*snapshot
	// reads counts the snapshots read, for tests.
	reads int
}

// snapshot is the data of one page, read once for the requests that want
// it.
type snapshot struct {
	done chan struct{}
	// at is when the read ended, zero until then (under snapshots.mu).
	at  time.Time
	val any // set before done is closed
	err error
}

func newSnapshots(ttl time.Duration) *snapshots {
	return &snapshots{ttl: ttl, builds: make(chan struct{}, maxBuilds), m: map[string]*snapshot{}}
}

// get returns the data of key: that of a read younger than ttl, or of the
// read in flight, or of a new read by build. A request whose ctx ends
// first gets ctx's error; the read goes on for the others.
func (s *snapshots) get(ctx context.Context, key string, build func(context.Context) (any, error)) (any, error) {
	s.mu.Lock()
	sn := s.m[key]
	if sn == nil || (!sn.at.IsZero() && time.Since(sn.at) >= s.ttl) {
		s.sweep()
		sn = &snapshot{done: make(chan struct{})}
		if len(s.m) < maxSnapshots {
			s.m[key] = sn
		}
		s.reads++
		go s.build(sn, build)
	}
	s.mu.Unlock()
	select {
	case <-sn.done:
		return sn.val, sn.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// build reads one snapshot, within the bound of reads at once. Its
// context is its own: the request that started it may go away while
// others wait.
func (s *snapshots) build(sn *snapshot, build func(context.Context) (any, error)) {
	s.builds <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	sn.val, sn.err = build(ctx)
	cancel()
	<-s.builds
	s.mu.Lock()
	sn.at = time.Now()
	s.mu.Unlock()
	close(sn.done)
}

// sweep drops the snapshots older than ttl (under s.mu).
func (s *snapshots) sweep() {
	for k, sn := range s.m {
		if !sn.at.IsZero() && time.Since(sn.at) >= s.ttl {
			delete(s.m, k)
		}
	}
}

// forget drops every snapshot, also those being read, after an action
// changed what they show: the page the action leads to reads its data
// anew. The requests that wait for a read still get it.
func (s *snapshots) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
}
