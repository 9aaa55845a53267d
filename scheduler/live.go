package scheduler

import (
	"context"
	"strconv"
	"sync"
)

// LiveOutput is the output of an attempt running on this node as it is
// written, for followers (schedulerd logs -f, the dashboard's run page).
// It is bounded as the stored output is: the first limit bytes, and the
// last limit bytes after them; a follower that falls behind the kept tail
// gets a marker line saying how many bytes it missed.
type LiveOutput struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // the last bytes after the head, at most 2*limit while kept
	base  int64  // offset of tail[0] in the whole output
	total int64
	done  bool
	// changed is closed and replaced at each write and at the end.
	changed chan struct{}
}

func newLiveOutput(limit int) *LiveOutput {
	return &LiveOutput{limit: max(limit, 1), changed: make(chan struct{})}
}

// write records p (Spec.Live): it never keeps p.
func (l *LiveOutput) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.limit - len(l.head); room > 0 {
		n := min(room, len(p))
		l.head = append(l.head, p[:n]...)
		p = p[n:]
		l.total += int64(n)
		l.base = l.total
	}
	if len(p) > 0 {
		l.tail = append(l.tail, p...)
		l.total += int64(len(p))
		// Keep the last limit bytes; cut when twice that, so that the
		// copy costs once per limit bytes written.
		if over := len(l.tail) - l.limit; over > 0 && len(l.tail) >= 2*l.limit {
			l.tail = append(l.tail[:0], l.tail[over:]...)
			l.base += int64(over)
		}
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
	if from < int64(len(l.head)) {
		out = append(out, l.head[from:]...)
		from = int64(len(l.head))
	}
	if from < l.base {
		out = append(out, "\n[... "+strconv.FormatInt(l.base-from, 10)+" bytes not kept ...]\n"...)
		from = l.base
	}
	if i := from - l.base; i < int64(len(l.tail)) {
		out = append(out, l.tail[i:]...)
		from = l.total
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
