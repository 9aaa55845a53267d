package jobs

import (
	"fmt"
	"testing"
	"time"
)

// fixedEvery is a schedule firing every d from the zero of Unix time.
type fixedEvery time.Duration

func (e fixedEvery) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d)
}
func (e fixedEvery) String() string { return fmt.Sprintf("@every %s", time.Duration(e)) }

// TestJitterDelayValues pins the delay function as docs/configuration.md
// documents it: the values were computed apart from this code (Python's
// hashlib), so a change of the function, which would move every jittered
// tick of a cluster in the middle of an upgrade, fails here.
func TestJitterDelayValues(t *testing.T) {
	at := func(day, hour, minute, second int) time.Time {
		return time.Date(2026, 3, day, hour, minute, second, 0, time.UTC)
	}
	for _, c := range []struct {
		job   string
		tick  time.Time
		bound time.Duration
		want  time.Duration
	}{
		{"backup", at(2, 3, 0, 0), 5 * time.Minute, 227525 * time.Millisecond},
		{"backup", at(3, 3, 0, 0), 5 * time.Minute, 269482 * time.Millisecond},
		{"report", at(2, 3, 0, 0), 5 * time.Minute, 233879 * time.Millisecond},
		{"backup", at(2, 3, 0, 0), time.Hour, 2730302 * time.Millisecond},
		{"every-10s", at(2, 12, 0, 10), 5 * time.Second, 555 * time.Millisecond},
		// The zone of the tick plays no part: only the instant.
		{"backup", at(2, 3, 0, 0).In(time.FixedZone("UTC+1", 3600)), 5 * time.Minute, 227525 * time.Millisecond},
		// No bound, or one under a millisecond: no delay.
		{"backup", at(2, 3, 0, 0), 0, 0},
		{"backup", at(2, 3, 0, 0), -time.Minute, 0},
		{"backup", at(2, 3, 0, 0), 999 * time.Microsecond, 0},
	} {
		if got := JitterDelay(c.job, c.tick, c.bound); got != c.want {
			t.Errorf("JitterDelay(%q, %s, %s) = %s, want %s", c.job, c.tick.Format(time.RFC3339), c.bound, got, c.want)
		}
	}
}

// TestJitterDelaySpread: the delays of many ticks fall in [0, bound), in
// whole milliseconds, spread over the whole range; they differ from job to
// job and from tick to tick, and do not change from call to call.
func TestJitterDelaySpread(t *testing.T) {
	const (
		ticks   = 10000
		bound   = 10 * time.Second
		buckets = 10
	)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var count [buckets]int
	var sum time.Duration
	sameAsOther, sameAsNext := 0, 0
	for i := range ticks {
		tick := start.Add(time.Duration(i) * time.Minute)
		d := JitterDelay("backup", tick, bound)
		if d < 0 || d >= bound || d%time.Millisecond != 0 {
			t.Fatalf("tick %s: delay %s, want whole milliseconds in [0, %s)", tick, d, bound)
		}
		if again := JitterDelay("backup", tick, bound); again != d {
			t.Fatalf("tick %s: delay %s, then %s", tick, d, again)
		}
		count[d*buckets/bound]++
		sum += d
		if JitterDelay("backup-2", tick, bound) == d {
			sameAsOther++
		}
		if JitterDelay("backup", tick.Add(time.Minute), bound) == d {
			sameAsNext++
		}
	}
	// Each tenth of the range gets about 1,000 of 10,000 ticks: binomial,
	// with a standard deviation of 30, so 800 is more than six of them
	// away, and a uniform function fails this once in billions of runs.
	for i, n := range count {
		if n < 800 || n > 1200 {
			t.Errorf("delays in [%s, %s): %d of %d, want about %d", bound*time.Duration(i)/buckets,
				bound*time.Duration(i+1)/buckets, n, ticks, ticks/buckets)
		}
	}
	if mean := sum / ticks; mean < 4500*time.Millisecond || mean > 5500*time.Millisecond {
		t.Errorf("mean delay %s, want about %s", mean, bound/2)
	}
	// 10,000 values each: two functions that agreed by chance would agree
	// about once (1 in 10,000 per tick).
	if sameAsOther > 10 || sameAsNext > 10 {
		t.Errorf("delays equal to another job's at the same tick %d times, to the next tick's %d times, of %d", sameAsOther, sameAsNext, ticks)
	}
}

// TestTickStart: a cron job's run starts at its tick plus the delay,
// which is bounded by jitter and by the time to the next tick; a job
// without jitter or without a schedule starts at the tick.
func TestTickStart(t *testing.T) {
	tick := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		every  time.Duration // 0: no schedule
		jitter time.Duration
		bound  time.Duration // the bound of the delay; 0: the start is the tick
	}{
		{"no jitter", time.Hour, 0, 0},
		{"no schedule", 0, 5 * time.Minute, 0},
		{"jitter under the interval", time.Hour, 5 * time.Minute, 5 * time.Minute},
		{"jitter of the interval", time.Hour, time.Hour, time.Hour},
		{"jitter over the interval", time.Minute, time.Hour, time.Minute},
	} {
		for _, job := range []string{"a", "b", "backup", "report", "every-10s"} {
			d := &Definition{Name: job, Jitter: c.jitter}
			if c.every > 0 {
				d.Schedule = fixedEvery(c.every)
			}
			got := d.TickStart(tick)
			want := tick.Add(JitterDelay(job, tick, c.bound))
			if !got.Equal(want) {
				t.Errorf("%s, job %s: start %s, want %s", c.name, job, got, want)
			}
			if c.bound > 0 && (got.Before(tick) || !got.Before(tick.Add(c.bound))) {
				t.Errorf("%s, job %s: start %s not in [tick, tick+%s)", c.name, job, got, c.bound)
			}
		}
	}
}

// TestJitterWindowAndLife: a cron run's not_before is its start, its
// start_deadline still counts from the tick, other runs get no delay, and
// a tick whose run could not start before the job's not_after is not part
// of the job's life.
func TestJitterWindowAndLife(t *testing.T) {
	tick := time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC)
	d := &Definition{Name: "backup", Command: []string{"x"}, Schedule: fixedEvery(24 * time.Hour),
		Jitter: 5 * time.Minute, StartDeadline: 30 * time.Minute}
	start := tick.Add(227525 * time.Millisecond) // TestJitterDelayValues
	nb, na := d.Window(TriggerSchedule, tick)
	if !nb.Equal(start) || !na.Equal(tick.Add(30*time.Minute)) {
		t.Errorf("cron window %s..%s, want %s..%s", nb, na, start, tick.Add(30*time.Minute))
	}
	for _, trig := range []Trigger{TriggerManual, TriggerRerun, TriggerOnce} {
		if nb, _ := d.Window(trig, tick); !nb.Equal(tick) {
			t.Errorf("%s window starts at %s, want %s: jitter is for cron ticks", trig, nb, tick)
		}
	}

	for _, c := range []struct {
		notAfter time.Time
		in       bool
	}{
		{time.Time{}, true},
		{tick.Add(time.Hour), true},
		{start.Add(time.Millisecond), true},
		{start, false}, // the run could not start: not_after must be after not_before
		{tick.Add(time.Minute), false},
		{tick, false},
	} {
		d.NotAfter = c.notAfter
		if got := d.InLife(tick); got != c.in {
			t.Errorf("not_after %s: InLife = %v, want %v", c.notAfter, got, c.in)
		}
	}
	// Without jitter, a tick at not_after is not part of the life either:
	// its run's window would be empty.
	d.Jitter, d.NotAfter = 0, tick
	if d.InLife(tick) || !d.InLife(tick.Add(-time.Second)) {
		t.Errorf("without jitter: InLife at not_after %v, a second before %v; want false, true", d.InLife(tick), d.InLife(tick.Add(-time.Second)))
	}
	d.NotBefore, d.NotAfter = tick.Add(time.Second), time.Time{}
	if d.InLife(tick) {
		t.Errorf("a tick before not_before is in the job's life")
	}
}

func TestValidateJitter(t *testing.T) {
	base := func() *Definition {
		return &Definition{Name: "j", Command: []string{"x"}, Schedule: fixedEvery(time.Hour), Retry: DefaultRetry}
	}
	for _, c := range []struct {
		name             string
		jitter, deadline time.Duration
		schedule         bool
		want             string
	}{
		{"no jitter", 0, time.Minute, true, ""},
		{"jitter only", time.Hour, 0, true, ""},
		{"jitter under start_deadline", time.Minute, time.Minute + time.Millisecond, true, ""},
		{"negative", -time.Second, 0, true, "jitter: must not be negative"},
		{"equal to start_deadline", time.Minute, time.Minute, true, "jitter: must be shorter than start_deadline (1m0s), which counts from the tick"},
		{"over start_deadline", time.Hour, time.Minute, true, "jitter: must be shorter than start_deadline (1m0s), which counts from the tick"},
		{"over start_deadline without schedule", time.Hour, time.Minute, false, ""},
	} {
		d := base()
		d.Jitter, d.StartDeadline = c.jitter, c.deadline
		if !c.schedule {
			d.Schedule = nil
		}
		err := d.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
