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
