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

	"github.com/schedulerd/schedulerd/jobs"
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

// signalAtClaimAhead follows the logs of the cluster's nodes until one of
// them claims the run of a tick ahead of it ("attempt claimed; it starts
// at its tick", up to 50 ms before the tick), and sends sig to that node at
// once. A claim seen too late to signal 5 ms before its tick is skipped
// for the next one.
func signalAtClaimAhead(c *cluster, sig syscall.Signal) claimAhead {
	c.t.Helper()
	followers := map[string]*logFollower{}
	for _, id := range c.ids() {
		followers[id] = followLog(c.t, c.node(id).d)
	}
	tickOf := map[string]time.Time{} // run id -> tick, from "tick fired"
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range c.ids() {
			for _, line := range followers[id].lines() {
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
					c.node(id).d.signal(sig)
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
	c.t.Fatalf("no run claimed ahead of its tick within 20s early enough to send %s before the tick", sig)
	return claimAhead{}
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
	if testing.Short() {
		t.Skip("cluster test of about half a minute; run without -short")
	}
	dir := t.TempDir()
	witness, starts := filepath.Join(dir, "witness"), filepath.Join(dir, "starts")
	extra := fmt.Sprintf(`; echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $SCHEDULERD_ATTEMPT $SCHEDULERD_NODE $(date +%%s.%%N)" >> %s`, starts)
	c := newCluster(t, 2, witnessJobs(1, witness, extra))
	from := time.Now().Truncate(time.Second).Add(time.Second) // both nodes are ready
	ctx := context.Background()
	time.Sleep(1500 * time.Millisecond)

	// SIGTERM: the claimed run starts at its tick during the shutdown.
	term := signalAtClaimAhead(c, syscall.SIGTERM)
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
	kill := signalAtClaimAhead(c, syscall.SIGKILL)
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
	stop := signalAtClaimAhead(c, syscall.SIGSTOP)
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
	byRun := map[string][]startLine{}
	for _, s := range readStarts(t, starts) {
		if s.at.Before(s.tick) {
			t.Errorf("the process of tick %s (run %s attempt %d on %s) started at %s, before its tick",
				s.tick.Format(time.TimeOnly), s.run, s.attempt, s.node, s.at.Format("15:04:05.000000"))
		}
		byRun[s.run] = append(byRun[s.run], s)
	}
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
