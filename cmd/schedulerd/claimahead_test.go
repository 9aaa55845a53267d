package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// logFollower reads the lines a daemon appends to its log after the
// follower was made.
type logFollower struct {
	path    string
	off     int64
	partial string
}

func followLog(t *testing.T, d *proc) *logFollower {
	t.Helper()
	fi, err := os.Stat(d.log)
	if err != nil {
		t.Fatal(err)
	}
	return &logFollower{path: d.log, off: fi.Size()}
}

// lines returns the whole lines written since the last call.
func (f *logFollower) lines() []string {
	file, err := os.Open(f.path)
	if err != nil {
		return nil
	}
	defer file.Close()
	b, err := io.ReadAll(io.NewSectionReader(file, f.off, 1<<30))
	if err != nil || len(b) == 0 {
		return nil
	}
	f.off += int64(len(b))
	text := f.partial + string(b)
	cut := strings.LastIndexByte(text, '\n')
	f.partial = text[cut+1:]
	if cut < 0 {
		return nil
	}
	return strings.Split(text[:cut], "\n")
}

// claimAhead is a run claimed ahead of its tick by node, and the signal
// sent to that node in between.
type claimAhead struct {
	node, run string
	tick      time.Time
	sent      time.Time
}

// signalAtClaimAhead follows the logs of the daemons procs (by node id)
// until one of them claims the run of a tick ahead of it ("attempt
// claimed; it starts at its tick", up to 50 ms before the tick), and sends
// sig to that daemon at once. A claim seen too late to signal 5 ms before
// its tick is skipped for the next one.
func signalAtClaimAhead(t *testing.T, procs map[string]*proc, sig syscall.Signal) claimAhead {
	t.Helper()
	followers := map[string]*logFollower{}
	for id, d := range procs {
		followers[id] = followLog(t, d)
	}
	tickOf := map[string]time.Time{} // run id -> tick, from "tick fired"
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for id, f := range followers {
			for _, line := range f.lines() {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) != nil {
					continue
				}
				run, _ := rec["run"].(string)
				switch rec["msg"] {
				case "tick fired":
					if tk, err := time.Parse(time.RFC3339, fmt.Sprint(rec["tick"])); err == nil {
						tickOf[run] = tk
					}
				case "attempt claimed; it starts at its tick":
					tk, ok := tickOf[run]
					if !ok || time.Until(tk) < 5*time.Millisecond {
						continue
					}
					procs[id].signal(sig)
					sent := time.Now()
					if !sent.Before(tk) {
						continue // the signal came after all: try the next tick
					}
					return claimAhead{node: id, run: run, tick: tk, sent: sent}
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no run claimed ahead of its tick within 20s early enough to send %s before the tick", sig)
	return claimAhead{}
}

// procs are the cluster's daemons by node id.
func (c *cluster) procs() map[string]*proc {
	m := map[string]*proc{}
	for _, id := range c.ids() {
		m[id] = c.node(id).d
	}
	return m
}

// other is the cluster's node that is not id (a cluster of two).
func (c *cluster) other(id string) string {
	for _, n := range c.ids() {
		if n != id {
			return n
		}
	}
	c.t.Fatalf("no node other than %s", id)
	return ""
}

// startLine is one line of the starts file: a process of a run's attempt
// and when it began.
type startLine struct {
	tick    time.Time
	run     string
	attempt int
	node    string
	at      time.Time
}

func readStarts(t *testing.T, path string) []startLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []startLine
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Fatalf("line %q of the starts file", l)
		}
		tk, err1 := time.Parse(time.RFC3339, f[0])
		n, err2 := strconv.Atoi(f[2])
		at, err3 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("line %q of the starts file", l)
		}
		out = append(out, startLine{tick: tk, run: f[1], attempt: n, node: f[3], at: time.Unix(0, int64(at*1e9))})
	}
	return out
}

// startsByRun reads the starts file by run, and fails the test for every
// process that started before its tick.
func startsByRun(t *testing.T, path string) map[string][]startLine {
	t.Helper()
	byRun := map[string][]startLine{}
	for _, s := range readStarts(t, path) {
		if s.at.Before(s.tick) {
			t.Errorf("the process of tick %s (run %s attempt %d on %s) started at %s, before its tick",
				s.tick.Format(time.TimeOnly), s.run, s.attempt, s.node, s.at.Format("15:04:05.000000"))
		}
		byRun[s.run] = append(byRun[s.run], s)
	}
	return byRun
}

// TestClusterSignalsBetweenClaimAndTick aims SIGTERM, SIGKILL and SIGSTOP
// at a real node in the 50 ms between its claim of a tick's run, made
// ahead, and the tick, on a two-node cluster firing a job every second:
//   - SIGTERM: the stopping node starts the run at its tick, inside the
//     shutdown grace, and completes it (attempt 1).
//   - SIGKILL: the run is recovered by the other node past
//     inactive_threshold and completes there (attempt 2); no process of
//     attempt 1 ever starts.
//   - SIGSTOP past inactive_threshold, then SIGCONT: the same recovery, and
//     the node that wakes up must not start the attempt taken from it (its
//     tick's timer is long due when it wakes): it fences itself.
//
// Throughout, every tick has exactly one run, finished; every process
// starts at or after its tick.
func TestClusterSignalsBetweenClaimAndTick(t *testing.T) {
	proctest.Long(t, "signals to cluster nodes between claim and tick")
	dir := t.TempDir()
	witness, starts := filepath.Join(dir, "witness"), filepath.Join(dir, "starts")
	extra := fmt.Sprintf(`; echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $SCHEDULERD_ATTEMPT $SCHEDULERD_NODE $(date +%%s.%%N)" >> %s`, starts)
	c := newCluster(t, 2, witnessJobs(1, witness, extra))
	from := time.Now().Truncate(time.Second).Add(time.Second) // both nodes are ready
	ctx := context.Background()
	time.Sleep(1500 * time.Millisecond)

	// SIGTERM: the claimed run starts at its tick during the shutdown.
	term := signalAtClaimAhead(t, c.procs(), syscall.SIGTERM)
	d := c.node(term.node).d
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM", term.node)
	}
	if !d.cmd.ProcessState.Success() {
		t.Fatalf("%s exited with %s\n%s", term.node, d.cmd.ProcessState, d.logText())
	}
	if r := c.run(term.run); r.Status != jobs.StatusCompleted || r.Attempt != 1 || r.Node != term.node {
		t.Fatalf("SIGTERM %s before tick %s on %s: run %s attempt %d on %s, want completed attempt 1 there",
			term.tick.Sub(term.sent), term.tick.Format(time.TimeOnly), term.node, r.Status, r.Attempt, r.Node)
	}
	c.start(term.node)
	time.Sleep(1500 * time.Millisecond)

	// SIGKILL: the other node recovers the run; its first attempt never ran.
	kill := signalAtClaimAhead(t, c.procs(), syscall.SIGKILL)
	<-c.node(kill.node).d.exited
	survivor := c.other(kill.node)
	waitFor(t, "the killed node's claimed run to complete on the other node", 30*time.Second, func() bool {
		r := c.run(kill.run)
		return r.Status == jobs.StatusCompleted
	})
	if r := c.run(kill.run); r.Attempt != 2 || r.Node != survivor {
		t.Fatalf("SIGKILL %s before tick %s on %s: run completed as attempt %d on %s, want attempt 2 on %s",
			kill.tick.Sub(kill.sent), kill.tick.Format(time.TimeOnly), kill.node, r.Attempt, r.Node, survivor)
	}
	c.start(kill.node)
	time.Sleep(1500 * time.Millisecond)

	// SIGSTOP past the threshold: recovered elsewhere; on waking, the node
	// must not start the attempt taken from it.
	stop := signalAtClaimAhead(t, c.procs(), syscall.SIGSTOP)
	frozen := c.node(stop.node).d
	survivor = c.other(stop.node)
	waitFor(t, "the frozen node's claimed run to complete on the other node", 30*time.Second, func() bool {
		return c.run(stop.run).Status == jobs.StatusCompleted
	})
	frozen.signal(syscall.SIGCONT)
	waitFor(t, "the woken node to rejoin as a new incarnation", 30*time.Second, func() bool {
		return strings.Contains(frozen.logText(), "node rejoined as a new incarnation")
	})
	if !strings.Contains(frozen.logText(), "node fenced itself") {
		t.Errorf("the woken node did not fence itself\n%s", frozen.logText())
	}
	// Its attempt's result, rejected, says it never started (a process
	// killed by the fence at once may not have written its line).
	stale := ""
	waitFor(t, "the woken node's result of the attempt taken from it, rejected", 20*time.Second, func() bool {
		for _, line := range strings.Split(frozen.logText(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "stale attempt write rejected" && rec["run"] == stop.run {
				stale, _ = rec["error"].(string)
				return true
			}
		}
		return false
	})
	if !strings.HasPrefix(stale, "stopped before it started") {
		t.Errorf("the woken node's result of the attempt taken from it: %q, want one that never started\n%s", stale, frozen.logText())
	}
	if r := c.run(stop.run); r.Attempt != 2 || r.Node != survivor {
		t.Fatalf("SIGSTOP %s before tick %s on %s: run completed as attempt %d on %s, want attempt 2 on %s",
			stop.tick.Sub(stop.sent), stop.tick.Format(time.TimeOnly), stop.node, r.Attempt, r.Node, survivor)
	}
	atts, err := c.st.RunAttempts(ctx, stop.run)
	if err != nil || len(atts) != 2 || atts[0].Reason != jobs.ReasonNodeLost {
		t.Fatalf("attempts of the frozen node's run: %+v %v; want the first ended node_lost", atts, err)
	}
	time.Sleep(1500 * time.Millisecond)

	to := time.Now().Truncate(time.Second).Add(-time.Second)
	c.waitTicksDone(1, from, to, 30*time.Second)
	for _, id := range c.ids() {
		c.node(id).d.stop()
	}
	ticks := c.checkTicks(witness, 1, from, to)

	// The processes: each at or after its tick; none of attempt 1 of the
	// runs of the killed and the frozen node; the stopped node's ran there.
	byRun := startsByRun(t, starts)
	if got := byRun[term.run]; len(got) != 1 || got[0].attempt != 1 || got[0].node != term.node {
		t.Errorf("processes of the run claimed by the node stopped with SIGTERM: %+v, want attempt 1 on %s", got, term.node)
	}
	for _, ca := range []claimAhead{kill, stop} {
		if got := byRun[ca.run]; len(got) != 1 || got[0].attempt != 2 || got[0].node == ca.node {
			t.Errorf("processes of the run claimed by %s (tick %s): %+v, want one, of attempt 2, on the other node",
				ca.node, ca.tick.Format(time.TimeOnly), got)
		}
	}
	t.Logf("%d ticks once each; signals before their tick: SIGTERM %s, SIGKILL %s, SIGSTOP %s",
		ticks, term.tick.Sub(term.sent), kill.tick.Sub(kill.sent), stop.tick.Sub(stop.sent))
}

// TestSignalsBetweenClaimAndTick is the single-node (SQLite) form: SIGKILL
// and SIGSTOP sent to the daemon between its claim of a tick's run, made
// ahead, and the tick.
//   - SIGKILL, then a restart at once: the restarted daemon ends the
//     interrupted attempt (reason interrupted) and runs the tick as attempt
//     2; no process of attempt 1 ever starts.
//   - SIGSTOP for two seconds (less than inactive_threshold): the daemon
//     wakes with its tick's timer long due and starts the attempt then,
//     late, as attempt 1.
//
// Every tick has exactly one run, completed, and every process starts at
// or after its tick.
func TestSignalsBetweenClaimAndTick(t *testing.T) {
	proctest.Long(t, "signals to a daemon between claim and tick")
	e := newEnv(t)
	starts := filepath.Join(e.dir, "starts")
	e.writeConfig(fmt.Sprintf(`[[job]]
name = "tick"
schedule = "* * * * * *"
timezone = "UTC"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $SCHEDULERD_ATTEMPT $SCHEDULERD_NODE $(date +%%s.%%N)" >> %s'
catchup = "all"
misfire_grace = "1m"
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "0s" }
`, starts))
	d := e.start(true)
	from := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(1500 * time.Millisecond)

	kill := signalAtClaimAhead(t, map[string]*proc{"test-node": d}, syscall.SIGKILL)
	<-d.exited
	d = e.start(true)
	time.Sleep(1500 * time.Millisecond)

	stop := signalAtClaimAhead(t, map[string]*proc{"test-node": d}, syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	d.signal(syscall.SIGCONT)
	time.Sleep(1500 * time.Millisecond)
	to := time.Now().Truncate(time.Second).Add(-time.Second)
	st := e.openStore()
	waitFor(t, "every tick up to the end to have a finished run", 30*time.Second, func() bool {
		return ticksFinished(t, st, "tick", from, to)
	})
	d.stop()

	runs, err := st.RunsList(context.Background(), store.RunFilter{Job: "tick", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	byTick := map[int64][]*jobs.Run{}
	byID := map[string]*jobs.Run{}
	for _, r := range runs {
		byTick[r.ScheduledAt.Unix()] = append(byTick[r.ScheduledAt.Unix()], r)
		byID[r.ID] = r
	}
	for s := from.Unix(); s <= to.Unix(); s++ {
		if rs := byTick[s]; len(rs) != 1 || rs[0].Status != jobs.StatusCompleted {
			t.Errorf("tick %s: %d runs, first %v; want one, completed", time.Unix(s, 0).UTC().Format(time.TimeOnly), len(rs), statusesOf(rs))
		}
	}
	if r := byID[kill.run]; r == nil || r.Attempt != 2 {
		t.Errorf("the run claimed before the SIGKILL: %+v, want completed as attempt 2", r)
	} else if atts, err := st.RunAttempts(context.Background(), r.ID); err != nil || atts[0].Reason != jobs.ReasonInterrupted {
		t.Errorf("attempts of the run claimed before the SIGKILL: %+v %v; want the first interrupted", atts, err)
	}
	if r := byID[stop.run]; r == nil || r.Attempt != 1 {
		t.Errorf("the run claimed before the SIGSTOP: %+v, want completed as attempt 1", r)
	}
	byRun := startsByRun(t, starts)
	if got := byRun[kill.run]; len(got) != 1 || got[0].attempt != 2 {
		t.Errorf("processes of the run claimed before the SIGKILL: %+v, want one, of attempt 2", got)
	}
	if got := byRun[stop.run]; len(got) != 1 || got[0].attempt != 1 || got[0].at.Before(stop.tick.Add(time.Second)) {
		t.Errorf("processes of the run claimed before the SIGSTOP: %+v, want one, of attempt 1, after the two seconds stopped", got)
	}
	t.Logf("%d ticks once each; signals before their tick: SIGKILL %s, SIGSTOP %s",
		to.Unix()-from.Unix()+1, kill.tick.Sub(kill.sent), stop.tick.Sub(stop.sent))
}

func statusesOf(rs []*jobs.Run) []jobs.Status {
	var out []jobs.Status
	for _, r := range rs {
		out = append(out, r.Status)
	}
	return out
}
