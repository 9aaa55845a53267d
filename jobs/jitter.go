package jobs

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"time"
)

// JitterDelay is the delay of the start of a cron job's tick at tick, drawn
// from [0, bound) as a pure function of the job's name and the tick, so
// that every node, every restart and every version computes the same one:
// the first 8 bytes of the SHA-256 of the name, a 0 byte and the tick as 8
// bytes of big-endian Unix microseconds, read as a big-endian unsigned
// integer u, give floor(u × b / 2^64) milliseconds, b being bound in whole
// milliseconds. A bound under a millisecond gives 0.
func JitterDelay(job string, tick time.Time, bound time.Duration) time.Duration {
	ms := uint64(bound / time.Millisecond)
	if bound <= 0 || ms == 0 {
		return 0
	}
	buf := make([]byte, 0, len(job)+9)
	buf = append(buf, job...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(tick.UnixMicro()))
	sum := sha256.Sum256(buf)
	delay, _ := bits.Mul64(binary.BigEndian.Uint64(sum[:8]), ms)
	return time.Duration(delay) * time.Millisecond
}

// TickStart returns when the run of the job's tick at t may start: t
// delayed by JitterDelay within Jitter, and never as late as the job's next
// tick (the bound is the shorter of Jitter and the time to the next tick),
// so that the runs of a job's ticks start in the order of their ticks. It
// is t for a job without jitter or without a schedule.
func (d *Definition) TickStart(t time.Time) time.Time {
	if d.Jitter <= 0 || d.Schedule == nil {
		return t
	}
	bound := d.Jitter
	if next := d.Schedule.Next(t); !next.IsZero() && next.Sub(t) < bound {
		bound = next.Sub(t)
	}
	return t.Add(JitterDelay(d.Name, t, bound))
}
