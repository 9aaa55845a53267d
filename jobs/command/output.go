package command

import (
	"io"
	"strconv"
	"strings"
	"sync"
)

// readBufSize is the size of the fixed read buffer each run drains its output
// pipe with.
const readBufSize = 32 << 10

// readBufs recycles read buffers between runs.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// Output is a bounded capture of a job's standard output and standard error,
// which share one pipe and so arrive interleaved as one stream.
type Output struct {
	// Head holds the first OutputLimit bytes.
	Head []byte
	// Tail holds the last OutputLimit bytes after the head; it is empty
	// when everything fit in Head.
	Tail []byte
	// Total is the number of bytes the process wrote.
	Total int64
	// Truncated reports that bytes were dropped between Head and Tail.
	Truncated bool
}

// String returns Head, then, when bytes were dropped, a marker line
// "\n[... N bytes truncated ...]\n", then Tail.
func (o Output) String() string {
	var b strings.Builder
	b.Grow(len(o.Head) + len(o.Tail) + 48)
	b.Write(o.Head)
	if o.Truncated {
		dropped := o.Total - int64(len(o.Head)) - int64(len(o.Tail))
		b.WriteString("\n[... ")
		b.WriteString(strconv.FormatInt(dropped, 10))
		b.WriteString(" bytes truncated ...]\n")
	}
	b.Write(o.Tail)
	return b.String()
}

// capture keeps the first limit bytes written to it and, in a ring buffer,
// the last limit bytes after those, and counts everything.
type capture struct {
	limit int
	head  []byte
	ring  []byte // allocated on the first byte past the head
	pos   int    // next write position in ring
	full  bool   // ring has wrapped at least once
	total int64
	live  func(p []byte) // Spec.Live
}

func newCapture(limit int) *capture {
	return &capture{limit: limit}
}

// write records p. It never retains p.
func (c *capture) write(p []byte) {
	c.total += int64(len(p))
	if room := c.limit - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	if c.ring == nil {
		c.ring = make([]byte, c.limit)
	}
	if len(p) >= c.limit {
		copy(c.ring, p[len(p)-c.limit:])
		c.pos, c.full = 0, true
		return
	}
	end := c.pos + len(p)
	n := copy(c.ring[c.pos:], p)
	copy(c.ring, p[n:])
	if end >= c.limit {
		end -= c.limit
		c.full = true
	}
	c.pos = end
}

// readFrom drains r into c until r returns an error (io.EOF when every
// writer has closed the pipe), using one fixed-size buffer.
func (c *capture) readFrom(r io.Reader) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.write(buf[:n])
			if c.live != nil {
				c.live(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// output returns the captured bytes; c must no longer be written to.
func (c *capture) output() Output {
	o := Output{Head: c.head, Total: c.total}
	switch {
	case c.full:
		o.Tail = make([]byte, c.limit)
		n := copy(o.Tail, c.ring[c.pos:])
		copy(o.Tail[n:], c.ring[:c.pos])
	case c.pos > 0:
		o.Tail = c.ring[:c.pos:c.pos]
	}
	o.Truncated = o.Total > int64(len(o.Head))+int64(len(o.Tail))
	return o
}
