package scheduler

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/scheduler/schedulertest"
)

// The fake clock of the tests is a Clock.
var _ Clock = (*schedulertest.FakeClock)(nil)

func TestRealClockAfterFunc(t *testing.T) {
	var c RealClock
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	if stop := c.AfterFunc(time.Hour, func() { t.Error("called") }); !stop() {
		t.Fatal("stop of a pending call reported false")
	}
}

// TestNextRound: a periodic loop keeps its cadence, makes up a round that
// came late, and starts again from now when the clock was stepped by more
// than a round either way (a step back would stop the heartbeats until the
// clock came back; a step on would send a round after round at once).
func TestNextRound(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	every := 5 * time.Second
	for _, c := range []struct {
		name      string
		next, now time.Time
		want      time.Time
	}{
		{"on time", t0, t0, t0.Add(every)},
		{"late by less than a round", t0, t0.Add(3 * time.Second), t0.Add(every)},
		{"late by more than two rounds", t0, t0.Add(11 * time.Second), t0.Add(16 * time.Second)},
		{"clock stepped on an hour", t0, t0.Add(time.Hour), t0.Add(time.Hour + every)},
		{"clock stepped back an hour", t0, t0.Add(-time.Hour), t0.Add(-time.Hour + every)},
		{"clock stepped back by less than a round", t0, t0.Add(-2 * time.Second), t0.Add(3 * time.Second)},
	} {
		if got := nextRound(c.next, c.now, every); !got.Equal(c.want) {
			t.Errorf("%s: nextRound(%s, %s) = %s, want %s", c.name, c.next.Format(time.TimeOnly),
				c.now.Format(time.TimeOnly), got.Format(time.TimeOnly), c.want.Format(time.TimeOnly))
		}
	}
}
