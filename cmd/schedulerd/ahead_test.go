package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/store"
)

// untilBeforeSecond sleeps until d before the next whole second (one more
// second if that moment is too close) and returns that second.
func untilBeforeSecond(d time.Duration) time.Time {
	next := time.Now().Truncate(time.Second).Add(time.Second)
	if time.Until(next.Add(-d)) < 50*time.Millisecond {
		next = next.Add(time.Second)
	}
	time.Sleep(time.Until(next.Add(-d)))
	return next
}

// aimed is how long before a tick to send a command meant to take effect
// d before it, when the last such command took took to return: d plus
// took, short of a whole second (the job's period).
func aimed(d, took time.Duration) time.Duration {
	return min(d+took, 900*time.Millisecond)
}

// claimLead is the engine's default ClaimLead: a tick fired ahead is taken
// back until its run is claimed, this long before the tick.
const claimLead = 50 * time.Millisecond

// TestPauseAndStopInsideTheLead: a real daemon writes each tick of a job
// firing every second up to 250 ms ahead, and claims its run 50 ms ahead.
// A `schedulerd pause` made in between takes the tick back: no tick that
// falls while the job is paused has a run (a pause in the last 50 ms may
// leave that one tick its claimed run). A `schedulerd reload` there takes it back and
// fires it again, once. A SIGTERM in the same place takes it back too:
// after a restart the tick fires once, made by the new process. Every tick
// has at most one run, and the ticks outside the pauses and the stop all
// have one.
func TestPauseAndStopInsideTheLead(t *testing.T) {
	proctest.Long(t, "pauses, reloads and a restart aimed at the lead of ticks")
	e := newEnv(t)
	// Each process writes its tick and when it ran (after the shell's own
	// start, so a process started early by less than that goes unseen).
	starts := filepath.Join(e.dir, "starts")
	e.writeConfig(fmt.Sprintf(`
[[job]]
name = "tick"
schedule = "* * * * * *"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $(date +%%s.%%N)" >> %s'
`, starts))
	d := e.start(true)
	time.Sleep(1500 * time.Millisecond) // a few ticks fire as usual

	type pause struct {
		tick                time.Time // the tick whose lead the pause fell in
		before, after       time.Time // around the pause command
		resumeAt, resumedAt time.Time // around the resume command
	}
	// Pauses aimed at the lead of a tick, until three ended before their
	// tick's claim and one of those met a tick already fired ahead: on a
	// busy machine a command may land late, so the test goes on trying
	// (up to 20 times) rather than assume when it lands.
	// Each is aimed earlier by how long the one before took to return, so
	// that it returns 110 to 210 ms before the tick however slow the
	// machine makes the command.
	var pauses []pause
	inLead, withdrawnSeen := 0, false
	var took time.Duration
	for i := 0; (inLead < 3 || !withdrawnSeen) && i < 20; i++ {
		var p pause
		p.tick = untilBeforeSecond(aimed(time.Duration(110+20*(i%6))*time.Millisecond, took))
		p.before = time.Now()
		if out := e.ok("pause", "tick"); !strings.Contains(out, "paused") {
			t.Fatalf("pause: %s", out)
		}
		p.after = time.Now()
		took = p.after.Sub(p.before)
		time.Sleep(1300 * time.Millisecond)
		p.resumeAt = time.Now()
		e.ok("resume", "tick")
		p.resumedAt = time.Now()
		time.Sleep(1200 * time.Millisecond)
		pauses = append(pauses, p)
		if p.after.Before(p.tick.Add(-claimLead)) {
			inLead++
			withdrawnSeen = withdrawnSeen || firedBefore(d.logText(), p.tick)
		}
	}

	// Reloads in the lead of a tick: the tick is taken back and fired
	// again, once (checked with the ticks after the last resume). Tried
	// until three reloads took a tick back (up to 30 times), aimed from
	// 150 to 400 ms before the tick: the reload must land between the
	// tick's firing 250 ms ahead and its claim 50 ms ahead, and on a busy
	// machine the command takes longer to land than the window is wide.
	var reloadTicks []time.Time
	withdrawals := strings.Count(d.logText(), "ticks fired ahead withdrawn")
	reloadsInLead := 0
	took = 0
	for i := 0; reloadsInLead < 3 && i < 30; i++ {
		tk := untilBeforeSecond(aimed(time.Duration(150+50*(i%6))*time.Millisecond, took))
		began := time.Now()
		if out := e.ok("reload"); !strings.Contains(out, "reload applied") {
			t.Fatalf("reload: %s", out)
		}
		took = time.Since(began)
		reloadTicks = append(reloadTicks, tk)
		time.Sleep(500 * time.Millisecond)
		if n := strings.Count(d.logText(), "ticks fired ahead withdrawn"); n > withdrawals {
			withdrawals = n
			reloadsInLead++
		}
	}
	if reloadsInLead < 3 {
		t.Fatalf("only %d of %d reloads took back a tick fired ahead: the test did not exercise the lead", reloadsInLead, len(reloadTicks))
	}

	// A stop in the lead of a tick, then a restart two seconds later.
	stopTick := untilBeforeSecond(150 * time.Millisecond)
	stopAt := time.Now()
	d.stop()
	stopped := time.Now()
	firstLog := d.logText()
	time.Sleep(time.Until(stopTick.Add(2 * time.Second)))
	restartAt := time.Now()
	d = e.start(true)
	time.Sleep(1500 * time.Millisecond)
	d.stop()

	st := e.openStore()
	runs, err := st.RunsList(t.Context(), store.RunFilter{Job: "tick", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	// No process started before its tick, claimed ahead or not.
	data, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines {
		tickText, atText, _ := strings.Cut(line, " ")
		tk, err1 := time.Parse(time.RFC3339, tickText)
		at, err2 := strconv.ParseFloat(atText, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %q of the jobs' witness file", line)
		}
		if ran := time.Unix(0, int64(at*1e9)); ran.Before(tk) {
			t.Errorf("the process of tick %s ran at %s, before its tick", tk.Format(time.TimeOnly), ran.Format("15:04:05.000000"))
		}
	}
	if len(lines) < 10 {
		t.Fatalf("only %d processes wrote their start", len(lines))
	}
	perTick := map[time.Time]int{}
	created := map[time.Time]time.Time{}
	for _, r := range runs {
		perTick[r.ScheduledAt.UTC()]++
		created[r.ScheduledAt.UTC()] = r.CreatedAt
	}
	for tk, n := range perTick {
		if n > 1 {
			t.Errorf("tick %s has %d runs", tk.Format(time.TimeOnly), n)
		}
	}
	inLead = 0
	for i, p := range pauses {
		first := p.tick
		switch {
		case !p.after.Before(p.tick):
			continue // the pause ended after the tick: that tick may run
		case !p.after.Before(p.tick.Add(-claimLead)):
			first = p.tick.Add(time.Second) // that tick's run may be claimed
		default:
			inLead++
		}
		// Every tick from the one in whose lead the pause fell to the resume.
		for tk := first; !tk.After(p.resumeAt); tk = tk.Add(time.Second) {
			if n := perTick[tk.UTC()]; n != 0 {
				t.Errorf("pause %d (%s to %s): tick %s, while paused, has a run made at %s", i,
					p.after.Format("15:04:05.000"), p.resumeAt.Format("15:04:05.000"), tk.Format(time.TimeOnly),
					created[tk.UTC()].Format("15:04:05.000"))
			}
		}
	}
	if inLead < 3 {
		t.Fatalf("only %d of %d pauses ended before their tick: the test did not exercise the lead", inLead, len(pauses))
	}
	// The pauses met ticks already fired ahead, which they took back.
	withdrawn := 0
	for _, p := range pauses {
		if !p.after.Before(p.tick.Add(-claimLead)) || perTick[p.tick.UTC()] != 0 {
			continue
		}
		if firedBefore(firstLog, p.tick) {
			withdrawn++
		}
	}
	if withdrawn == 0 {
		t.Fatal("no pause met a tick fired ahead of it: the test did not exercise the withdrawal")
	}
	// The ticks between a resume and the next pause each ran once.
	for i, p := range pauses {
		end := stopAt
		if i+1 < len(pauses) {
			end = pauses[i+1].before
		}
		for tk := p.resumedAt.Truncate(time.Second).Add(time.Second); tk.Add(time.Second).Before(end); tk = tk.Add(time.Second) {
			if perTick[tk.UTC()] != 1 {
				t.Errorf("tick %s, after resume %d, has %d runs, want 1", tk.Format(time.TimeOnly), i, perTick[tk.UTC()])
			}
		}
	}
	if stopped.Before(stopTick.Add(-claimLead)) {
		// Taken back at the stop: made again by the restarted process.
		if perTick[stopTick.UTC()] != 1 || created[stopTick.UTC()].Before(restartAt) {
			t.Errorf("tick %s, in whose lead the daemon stopped (at %s): %d runs, made at %s; want one made after the restart at %s",
				stopTick.Format(time.TimeOnly), stopped.Format("15:04:05.000"), perTick[stopTick.UTC()],
				created[stopTick.UTC()].Format("15:04:05.000"), restartAt.Format("15:04:05.000"))
		}
	}
	for _, tk := range reloadTicks {
		if perTick[tk.UTC()] != 1 {
			t.Errorf("tick %s, in whose lead the config was reloaded, has %d runs, want 1", tk.Format(time.TimeOnly), perTick[tk.UTC()])
		}
	}
	// A stop in the lead of a tick already fired ahead takes it back.
	want := withdrawals
	if stopped.Before(stopTick.Add(-claimLead)) && firedBefore(firstLog, stopTick) {
		want++
	}
	if n := strings.Count(firstLog, "ticks fired ahead withdrawn"); n < want {
		t.Errorf("the log of the daemon reloaded and stopped in the lead shows %d withdrawals, want %d", n, want)
	}
}

// firedBefore reports whether the daemon's log shows tick fired (ahead of
// it, or at it).
func firedBefore(log string, tick time.Time) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"msg":"tick fired"`) && strings.Contains(line, `"tick":"`+tick.UTC().Format(time.RFC3339)+`"`) {
			return true
		}
	}
	return false
}
