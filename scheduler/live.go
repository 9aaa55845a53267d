package scheduler

import (
	"context"
	"strconv"
	"sync"
)

// liveKeep bounds what a LiveOutput keeps of each end of the output: the
// command's own capture already keeps output_limit bytes of each end for
// the store, and followers read as it is written, so the copy for them
// stays small whatever output_limit is.
const liveKeep = 1 << 20

// LiveOutput is the output of an attempt running on this node as it is
// written, for followers (schedulerd logs -f, the dashboard's run page).
// It keeps the first bytes of the output, and in a ring the last bytes
// after them, each at most min(output_limit, liveKeep); a follower that
// falls behind the ring gets a marker line saying how many bytes it
// missed. Once the attempt has ended, its stored output is the whole
// kept output.
type LiveOutput struct {
	mu    sync.Mutex
	keep  int
	head  []byte
	ring  []byte // allocated on the first byte past the head
	total int64
	done  bool
	// changed is closed and replaced at each write and at the end.
	changed chan struct{}
}

func newLiveOutput(limit int) *LiveOutput {
	return &LiveOutput{keep: min(max(limit, 1), liveKeep), changed: make(chan struct{})}
}

// write records p (Spec.Live): it never keeps p.
func (l *LiveOutput) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.keep - len(l.head); room > 0 {
		n := min(room, len(p))
		l.head = append(l.head, p[:n]...)
		p = p[n:]
		l.total += int64(n)
	}
	if len(p) > 0 {
		if l.ring == nil {
			l.ring = make([]byte, l.keep)
		}
		if len(p) > l.keep {
			l.total += int64(len(p) - l.keep)
			p = p[len(p)-l.keep:]
		}
		// The byte at offset o past the head is at ring[o%keep].
		pos := int((l.total - int64(len(l.head))) % int64(l.keep))
		n := copy(l.ring[pos:], p)
		copy(l.ring, p[n:])
		l.total += int64(len(p))
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// end marks the output complete: the attempt has ended.
func (l *LiveOutput) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.done = true
		close(l.changed)
	}
}

// Next returns the output from offset from on, waiting until there is
// some, the attempt ends or ctx is done. next is the offset to ask from
// next time; done is set once the attempt has ended and everything kept
// has been returned. Bytes no longer kept are replaced by a line
// "[... N bytes not kept ...]".
func (l *LiveOutput) Next(ctx context.Context, from int64) (data []byte, next int64, done bool, err error) {
	for {
		l.mu.Lock()
		data, next = l.readLocked(from)
		ended, changed := l.done, l.changed
		finished := ended && next >= l.total
		l.mu.Unlock()
		if len(data) > 0 || ended {
			return data, next, finished, nil
		}
		select {
		case <-ctx.Done():
			return nil, from, false, ctx.Err()
		case <-changed:
		}
	}
}

// readLocked returns what is kept from offset from on; l.mu is held.
func (l *LiveOutput) readLocked(from int64) ([]byte, int64) {
	var out []byte
	head := int64(len(l.head))
	if from < head {
		out = append(out, l.head[from:]...)
		from = head
	}
	// The ring holds the bytes from base to total.
	base := max(head, l.total-int64(l.keep))
	if from < base {
		out = append(out, "\n[... "+strconv.FormatInt(base-from, 10)+" bytes not kept ...]\n"...)
		from = base
	}
	for from < l.total {
		i := int((from - head) % int64(l.keep))
		n := min(int64(l.keep-i), l.total-from)
		out = append(out, l.ring[i:i+int(n)]...)
		from += n
	}
	return out, from
}

// LiveOutput returns the output, as it is written, of the attempt of run
// id when it runs on this node; false when no attempt of the run runs
// here (it has ended, or runs on another node).
func (s *Scheduler) LiveOutput(runID string) (*LiveOutput, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.attempts.running[runID]
	if a == nil || a.live == nil {
		return nil, false
	}
	return a.live, true
}

// LiveAttempt is LiveOutput with the number of the attempt whose output
// it is: a follower that asks for one attempt of a run must not get the
// next one's.
func (s *Scheduler) LiveAttempt(runID string) (*LiveOutput, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.attempts.running[runID]
	if a == nil || a.live == nil {
		return nil, 0, false
	}
	return a.live, a.fence.Attempt, true
}
