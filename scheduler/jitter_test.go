package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
)

// TestJitterDelaysTheStart: a tick of a job with jitter fires at its time,
// one run keyed by the tick, whose attempt starts at the tick plus the
// job's delay for it (jobs.Definition.TickStart): not a moment before,
// and then by the loop's own timer. A tick fired ahead (within FireLead)
// is not claimed ahead of its delayed start; a restart while the run waits
// for its delay leaves it waiting and fires nothing again.
func TestJitterDelaysTheStart(t *testing.T) {
	mk := func(h *harness) []*jobs.Definition {
		return []*jobs.Definition{job("spread", h.succeed, func(d *jobs.Definition) {
			d.Schedule = mustSchedule(t, "*/10 * * * * *")
			d.Jitter = 8 * time.Second
		})}
	}
	h := newHarness(t, mk)
	d, _ := h.s.Job("spread")
	ticks := []time.Time{t0.Add(10 * time.Second), t0.Add(20 * time.Second), t0.Add(30 * time.Second)}
	starts := make([]time.Time, len(ticks))
	for i, tick := range ticks {
		starts[i] = d.TickStart(tick)
		if delay := starts[i].Sub(tick); delay <= 0 || delay >= d.Jitter {
			t.Fatalf("tick %s: delay %s, want one in (0, %s) for this test", tick, delay, d.Jitter)
		}
	}

	for i, tick := range ticks {
		start := starts[i]
		switch i {
		case 1:
			// Fired ahead, then past the claim lead: the run waits for
			// its delay, not for its tick.
			h.advanceTo(tick.Add(-200 * time.Millisecond))
			h.advanceTo(tick.Add(-40 * time.Millisecond))
			h.advanceTo(tick)
		default:
			h.advanceTo(tick)
		}
		runs := h.runs("spread")
		if len(runs) != i+1 {
			t.Fatalf("tick %d: %d runs, want %d", i, len(runs), i+1)
		}
		r := runs[i]
		if !r.ScheduledAt.Equal(tick) || !r.NotBefore.Equal(start) || r.Status != jobs.StatusPending {
			t.Fatalf("tick %d: run scheduled %s, not_before %s, %s; want %s, %s, pending", i, r.ScheduledAt, r.NotBefore, r.Status, tick, start)
		}
		if i == 2 {
			// A restart while the run waits for its delay.
			h.stop()
			h.start(mk(h))
			if n := len(h.runs("spread")); n != i+1 {
				t.Fatalf("after a restart in the delay: %d runs, want %d", n, i+1)
			}
		}
		h.advanceTo(start.Add(-time.Millisecond))
		if got := h.run(r.ID).Status; got != jobs.StatusPending || len(h.calls.ch) != 0 {
			t.Fatalf("tick %d: run %s a millisecond before its start", i, got)
		}
		// The loop wakes by itself at the start: no Wake.
		h.clock.Set(start)
		info := h.handled(1)[0]
		h.attemptsDone(1)
		if !info.ScheduledAt.Equal(tick) || info.RunID != r.ID {
			t.Fatalf("tick %d: handler ran run %s of %s, want %s of %s", i, info.RunID, info.ScheduledAt, r.ID, tick)
		}
		if got := h.run(r.ID); !got.StartedAt.Equal(start) {
			t.Fatalf("tick %d: started at %s, want %s", i, got.StartedAt, start)
		}
	}

	_, at := h.calls.snapshot()
	if !slices.EqualFunc(at, starts, time.Time.Equal) {
		t.Errorf("handlers ran at %v, want %v", at, starts)
	}
	runs := h.runs("spread")
	if got := ticksOf(runs); !slices.EqualFunc(got, ticks, time.Time.Equal) {
		t.Errorf("runs for ticks %v, want %v", got, ticks)
	}
	for _, r := range runs {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Errorf("run of %s: %s, attempt %d; want completed, 1", r.ScheduledAt, r.Status, r.Attempt)
		}
	}
}

// TestJitterRespectsNotAfter: a tick whose delayed start would not come
// before the job's not_after is not part of its life: it makes no run,
// and does not keep the ticks before it (or other jobs) from firing.
// Before, a tick at not_after itself made the fire fail again and again,
// since its run's window was empty.
func TestJitterRespectsNotAfter(t *testing.T) {
	var d *jobs.Definition
	h := newHarness(t, func(h *harness) []*jobs.Definition {
		d = job("bounded", h.succeed, func(d *jobs.Definition) {
			d.Schedule = mustSchedule(t, "* * * * *")
			d.Jitter = 50 * time.Second
		})
		// not_after falls in the delay of the tick at 2m: between its tick
		// and its start.
		tick := t0.Add(2 * time.Minute)
		d.NotAfter = tick.Add(d.TickStart(tick).Sub(tick) / 2)
		plain := job("plain", h.succeed, func(p *jobs.Definition) {
			p.Schedule = mustSchedule(t, "* * * * *")
			p.NotAfter = t0.Add(3 * time.Minute) // a tick at not_after itself
		})
		return []*jobs.Definition{d, plain}
	})
	if start := d.TickStart(t0.Add(2 * time.Minute)); !start.After(d.NotAfter) || d.NotAfter.Sub(t0.Add(2*time.Minute)) <= 0 {
		t.Fatalf("not_after %s is not between the tick at 2m and its start %s", d.NotAfter, start)
	}
	for m := 1; m <= 4; m++ {
		tick := t0.Add(time.Duration(m) * time.Minute)
		h.advanceTo(tick)
		h.advanceTo(d.TickStart(tick))
	}
	if got := ticksOf(h.runs("bounded")); len(got) != 1 || !got[0].Equal(t0.Add(time.Minute)) {
		t.Errorf("bounded: runs for ticks %v, want only %s", got, t0.Add(time.Minute))
	}
	want := []time.Time{t0.Add(time.Minute), t0.Add(2 * time.Minute)}
	if got := ticksOf(h.runs("plain")); !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("plain: runs for ticks %v, want %v", got, want)
	}
	if err := h.s.lastStoreErr.Load(); err != nil {
		t.Errorf("store error: %s", *err)
	}
}
