package main

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// t0 is the first tick of the histories of these tests.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

// cleanHistory is a history that keeps every promise: a cron job that
// fired every second for five ticks (the fourth skipped, and counted so),
// the second tick's run retried after its node was SIGSTOPped (its first
// process ran on until the node woke, as fencing allows), a trigger
// acknowledged and run, and a notification delivered.
func cleanHistory() *History {
	h := &History{
		Meta: Meta{Seed: 1, Duration: Duration(time.Minute), Start: t0, Heartbeat: Duration(time.Second), Inactive: Duration(5 * time.Second)},
		Jobs: []JobSpec{
			{Name: "tick", Schedule: "* * * * * *", Timezone: "UTC", Overlap: "skip", Catchup: "all", KillGrace: Duration(2 * time.Second)},
			{Name: "trig", KillGrace: Duration(2 * time.Second)},
		},
	}
	for i, tick := range []int{0, 1, 2, 4} {
		id := fmt.Sprintf("run-%d", tick)
		start := at(time.Duration(tick) * time.Second)
		end := start.Add(300 * time.Millisecond)
		h.Runs = append(h.Runs, Run{ID: id, Job: "tick", Status: "completed", Trigger: "schedule", ScheduledAt: start,
			NotBefore: start, CreatedAt: start.Add(-250 * time.Millisecond), FinishedAt: ptr(end), Attempt: 1})
		h.Attempts = append(h.Attempts, Attempt{RunID: id, Number: 1, Node: "node-1", StartedAt: start, FinishedAt: ptr(end), Status: "completed"})
		h.Execs = append(h.Execs, Exec{Job: "tick", RunID: id, Attempt: 1, Node: "node-1", PID: 100 + i,
			Tick: start.Format(time.RFC3339), Start: start.Add(time.Millisecond), End: ptr(end.Add(-time.Millisecond)), Code: ptr(0)})
	}
	// run-1 was first attempted on node-2, which was stopped at 1.5s for
	// 7s: node-1 recovered it at 7s and ran attempt 2, while node-2's
	// process ran on; node-2 stopped it when it woke, at 9s.
	r := &h.Runs[1]
	r.Attempt = 2
	r.FinishedAt = ptr(at(7500 * time.Millisecond))
	h.Attempts[1] = Attempt{RunID: "run-1", Number: 1, Node: "node-2", StartedAt: at(time.Second), FinishedAt: ptr(at(6500 * time.Millisecond)),
		Status: "retrying", Reason: "node_lost"}
	h.Attempts = append(h.Attempts, Attempt{RunID: "run-1", Number: 2, Node: "node-1", StartedAt: at(7 * time.Second),
		FinishedAt: ptr(at(7500 * time.Millisecond)), Status: "completed"})
	h.Execs[1] = Exec{Job: "tick", RunID: "run-1", Attempt: 1, Node: "node-2", PID: 200, Tick: at(time.Second).Format(time.RFC3339),
		Start: at(time.Second), End: ptr(at(9 * time.Second)), Code: ptr(143)}
	h.Execs = append(h.Execs, Exec{Job: "tick", RunID: "run-1", Attempt: 2, Node: "node-1", PID: 201, Tick: at(time.Second).Format(time.RFC3339),
		Start: at(7100 * time.Millisecond), End: ptr(at(7400 * time.Millisecond)), Code: ptr(0)})
	h.Faults = append(h.Faults, Fault{Kind: "stop", Node: "node-2", Start: at(1500 * time.Millisecond), End: at(8500 * time.Millisecond)})
	h.Cursors = []Cursor{{Job: "tick", Last: at(4 * time.Second), Paused: true, Skipped: 1}}

	h.Triggers = []Trigger{{Job: "trig", Node: "node-3", DedupID: "d1", NotBefore: ptr(at(20 * time.Second)), NotAfter: ptr(at(40 * time.Second)),
		Sent: at(10 * time.Second), Answered: at(10*time.Second + 5*time.Millisecond), Outcome: outcomeOK, RunID: "run-t"}}
	h.Runs = append(h.Runs, Run{ID: "run-t", Job: "trig", Status: "completed", Trigger: "manual", ScheduledAt: at(10 * time.Second),
		NotBefore: at(20 * time.Second), NotAfter: ptr(at(40 * time.Second)), CreatedAt: at(10 * time.Second), FinishedAt: ptr(at(21 * time.Second)),
		Attempt: 1, DedupID: "d1"})
	h.Attempts = append(h.Attempts, Attempt{RunID: "run-t", Number: 1, Node: "node-3", StartedAt: at(20 * time.Second), FinishedAt: ptr(at(21 * time.Second)), Status: "completed"})
	h.Execs = append(h.Execs, Exec{Job: "trig", RunID: "run-t", Attempt: 1, Node: "node-3", PID: 300, Tick: at(10 * time.Second).Format(time.RFC3339),
		Start: at(20*time.Second + time.Millisecond), End: ptr(at(21 * time.Second)), Code: ptr(0)})

	h.Notifications = []Notification{{ID: "n1", Job: "tick", Event: "recovered", RunID: "run-1", State: "delivered", Attempts: 1, CreatedAt: at(6500 * time.Millisecond)}}
	h.Deliveries = []Delivery{{ID: "n1", Event: "recovered", Job: "tick", At: at(6600 * time.Millisecond), SignatureOK: true}}
	return h
}

func TestCheckCleanHistory(t *testing.T) {
	r := Check(cleanHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a clean history: %s: %s", v.Kind, v.Message)
	}
	if r.Ticks != 5 || r.Skipped != 1 {
		t.Errorf("%d ticks, %d skipped; want 5 and 1", r.Ticks, r.Skipped)
	}
}

// TestCheckFindsEachViolation feeds the checker histories that each break
// one promise, and checks that it reports that one, of its kind: a checker
// that cannot fail checks nothing.
func TestCheckFindsEachViolation(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		want    string // in the message
		breakIt func(h *History)
	}{
		{"a tick with two runs", vDuplicate, "2 runs in the store", func(h *History) {
			r := h.Runs[0]
			r.ID = "run-0-again"
			h.Runs = append(h.Runs, r)
			h.Attempts = append(h.Attempts, Attempt{RunID: r.ID, Number: 1, Node: "node-3", StartedAt: r.ScheduledAt, FinishedAt: r.FinishedAt, Status: "completed"})
			h.Execs = append(h.Execs, Exec{Job: "tick", RunID: r.ID, Attempt: 1, Node: "node-3", PID: 999, Tick: h.Execs[0].Tick,
				Start: r.ScheduledAt, End: r.FinishedAt, Code: ptr(0)})
		}},
		{"a tick executed by two runs", vDuplicate, "executed by 2 runs", func(h *History) {
			h.Execs[2].Tick = h.Execs[0].Tick // run-2's process ran tick 0
		}},
		{"a tick without a run", vMissingTick, "2 of its 5 ticks", func(h *History) {
			// run-2 (tick 2) goes: ticks 2 and 3 have no run, and the
			// cursor counts one skipped.
			h.Runs = append(h.Runs[:2], h.Runs[3:]...)
			h.Attempts = append(h.Attempts[:2], h.Attempts[3:]...)
			h.Execs = append(h.Execs[:2], h.Execs[3:]...)
		}},
		{"more counted skipped than missing", vMissingTick, "counts 2 ticks skipped", func(h *History) {
			h.Cursors[0].Skipped = 2
		}},
		{"a cron job without a cursor", vMissingTick, "no cursor", func(h *History) {
			h.Cursors = nil
		}},
		{"attempts overlapping in the store", vOverlap, "before attempt 1 ended", func(h *History) {
			h.Attempts[len(h.Attempts)-2].StartedAt = at(6 * time.Second) // run-1's attempt 2
			h.Execs[len(h.Execs)-2].Start = at(6100 * time.Millisecond)
		}},
		{"processes of two attempts overlapping, no fault", vOverlap, "attempt 2 started on node-1", func(h *History) {
			h.Faults = nil
		}},
		{"a stopped node's process running on past its bound", vOverlap, "attempt 2 started on node-1", func(h *History) {
			// It woke at 8.5s: 8.5s + 1s (heartbeat) + 2s (kill_grace) +
			// 2s (fenceSlack) is its bound.
			h.Execs[1].End = ptr(at(14 * time.Second))
		}},
		{"a stale attempt started after the next one", vOverlap, "attempt 1 on node-2 ran from", func(h *History) {
			// node-2 woke at 8.5s and started the attempt it had
			// claimed before the stop, after node-1's attempt 2.
			h.Execs[1].Start, h.Execs[1].End = at(8600*time.Millisecond), ptr(at(8900*time.Millisecond))
		}},
		{"an attempt executed twice", vOverlap, "executed twice", func(h *History) {
			e := h.Execs[0]
			e.PID, e.Node = 997, "node-3"
			h.Execs = append(h.Execs, e)
		}},
		{"an acknowledged trigger without its run", vLostTrigger, "which the store does not have", func(h *History) {
			h.Runs = h.Runs[:len(h.Runs)-1]
			h.Attempts = h.Attempts[:len(h.Attempts)-1]
			h.Execs = h.Execs[:len(h.Execs)-1]
		}},
		{"an acknowledged trigger whose run is another job's", vLostTrigger, "which is of tick", func(h *History) {
			h.Triggers[0].RunID = "run-0"
			h.Triggers[0].NotBefore = nil
		}},
		{"a notification the receiver never took", vUndelivered, "the receiver never took it", func(h *History) {
			h.Deliveries = nil
		}},
		{"a notification that failed", vUndelivered, "is failed after 10 attempts", func(h *History) {
			h.Notifications[0].State, h.Notifications[0].Attempts, h.Notifications[0].LastError = "failed", 10, "503"
		}},
		{"a run left running", vNonTerminal, "is running", func(h *History) {
			h.Runs[len(h.Runs)-1].Status = "running"
		}},
		{"a run left retrying", vNonTerminal, "is retrying", func(h *History) {
			h.Runs[0].Status = "retrying"
		}},
		{"a process that never ended", vExecution, "never ended", func(h *History) {
			h.Execs[0].End, h.Execs[0].Code = nil, nil
		}},
		{"an execution of an attempt the store does not have", vExecution, "the store has no such attempt", func(h *History) {
			h.Execs[0].Attempt = 2
		}},
		{"an execution on another node than the store's", vExecution, "the store says it was node-1's", func(h *History) {
			h.Execs[0].Node = "node-3"
		}},
		{"an execution of a run the store does not have", vExecution, "is not in the store", func(h *History) {
			h.Execs[0].RunID = "run-ghost"
		}},
		{"a completed attempt that no process completed", vExecution, "no process of it exited 0", func(h *History) {
			h.Execs[0].Code = ptr(1)
		}},
		{"a process started before its tick", vWindow, "before its not_before", func(h *History) {
			h.Execs[0].Start = at(-time.Millisecond)
		}},
		{"an attempt started before the trigger's not_before", vWindow, "in the store, before its not_before", func(h *History) {
			h.Attempts[len(h.Attempts)-1].StartedAt = at(19 * time.Second)
		}},
		{"an attempt started after not_after", vWindow, "after its not_after", func(h *History) {
			h.Attempts[len(h.Attempts)-1].StartedAt = at(41 * time.Second)
		}},
		{"a run with another not_after than asked", vWindow, "its trigger asked for", func(h *History) {
			h.Triggers[0].NotAfter = ptr(at(50 * time.Second))
		}},
		{"two runs of one dedup id active at once", vDedup, "was active", func(h *History) {
			r := h.Runs[len(h.Runs)-1]
			r.ID, r.CreatedAt = "run-t2", at(15*time.Second)
			h.Runs = append(h.Runs, r)
		}},
		{"a trigger refused as a duplicate with no active run", vDedup, "no run with that id was active", func(h *History) {
			h.Triggers = append(h.Triggers, Trigger{Job: "trig", Node: "node-1", DedupID: "d1", Sent: at(30 * time.Second),
				Answered: at(30 * time.Second), Outcome: outcomeDuplicate})
		}},
		{"a delivery the store never wrote", vNotification, "which the store does not have", func(h *History) {
			h.Deliveries = append(h.Deliveries, Delivery{ID: "n-ghost", Event: "failed", Job: "tick", At: at(time.Minute), SignatureOK: true})
		}},
		{"a bad signature", vNotification, "bad signature", func(h *History) {
			h.Deliveries[0].SignatureOK = false
		}},
		{"a node that exited on its own", vCrash, "exited", func(h *History) {
			h.Exits = append(h.Exits, Exit{Node: "node-2", At: at(30 * time.Second), Status: "exit status 1", Log: "panic"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanHistory()
			tc.breakIt(h)
			r := Check(h)
			found := false
			for _, v := range r.Violations {
				if v.Kind == tc.kind && strings.Contains(v.Message, tc.want) {
					found = true
				} else {
					t.Logf("also: %s: %s", v.Kind, v.Message)
				}
			}
			if !found {
				t.Errorf("no %s violation saying %q; got %+v", tc.kind, tc.want, r.Violations)
			}
		})
	}
}

// TestCheckExcusesOnlyFencing: a process of an earlier attempt may run on
// past a later attempt's start only within the bound of the fault that cut
// its node off, and a SIGKILLed node's process ends with it.
func TestCheckExcusesOnlyFencing(t *testing.T) {
	partitioned := func(h *History) {
		// node-2 cut off from PostgreSQL at 1.5s: it fences itself by
		// 1.5s + 5s (inactive) and stops its process within kill_grace.
		h.Faults[0].Kind = "partition"
		h.Execs[1].End = ptr(at(8 * time.Second))
	}
	killed := func(h *History) {
		h.Faults[0] = Fault{Kind: "kill", Node: "node-2", Start: at(2 * time.Second), End: at(3 * time.Second)}
		h.Execs[1].End, h.Execs[1].Code = nil, nil
	}
	for name, change := range map[string]func(h *History){"partition": partitioned, "kill": killed} {
		h := cleanHistory()
		change(h)
		if r := Check(h); len(r.Violations) > 0 {
			t.Errorf("%s: %+v", name, r.Violations)
		}
	}
	h := cleanHistory()
	partitioned(h)
	h.Execs[1].End = ptr(at(11 * time.Second)) // past 1.5s + 5s + 2s + 2s
	if r := Check(h); r.Count(vOverlap) != 1 {
		t.Errorf("a partitioned node's process past its bound: %+v", r.Violations)
	}
	h = cleanHistory()
	killed(h)
	h.Faults[0].Start = at(7500 * time.Millisecond) // killed after the next attempt began
	if r := Check(h); r.Count(vOverlap) != 1 {
		t.Errorf("a process killed after the next attempt started: %+v", r.Violations)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	h := cleanHistory()
	h.Exits = []Exit{{Node: "node-1", At: at(time.Minute), Status: "exit status 2", Log: "x"}}
	h.Violations = Check(h).Violations
	h.Meta.NotDone = map[string]string{"disk-full": "needs root"}
	var b bytes.Buffer
	if err := h.Write(&b); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHistory(&b)
	if err != nil {
		t.Fatal(err)
	}
	// Times read back lose their monotonic part and location.
	var want bytes.Buffer
	if err := got.Write(&want); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	_ = h.Write(&again)
	if want.String() != again.String() {
		t.Errorf("history read back differs:\n%s\nwant\n%s", want.String(), again.String())
	}
	if !reflect.DeepEqual(Check(got), Check(h)) {
		t.Errorf("the history read back checks otherwise")
	}
	if _, err := ReadHistory(strings.NewReader(`{"type":"bogus"}` + "\n")); err == nil {
		t.Error("a history with an unknown record read without error")
	}
}

func TestParseWitness(t *testing.T) {
	in := `start 1772445600.000100 42 tick run-1 1 node-1 2026-03-02T10:00:00Z
start 1772445600.5 43 trig run-2 1 node-2 2026-03-02T10:00:00Z
end 1772445600.300200 42 tick run-1 1 node-1 0
`
	es, err := parseWitness(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Fatalf("%d executions, want 2: %+v", len(es), es)
	}
	if e := es[0]; e.RunID != "run-1" || e.Attempt != 1 || e.Node != "node-1" || e.PID != 42 || e.Code == nil || *e.Code != 0 ||
		!e.Start.Equal(time.Unix(1772445600, 100_000)) || !e.End.Equal(time.Unix(1772445600, 300_200_000)) || e.Tick != "2026-03-02T10:00:00Z" {
		t.Errorf("first execution: %+v", e)
	}
	if e := es[1]; e.End != nil || !e.Start.Equal(time.Unix(1772445600, 500_000_000)) {
		t.Errorf("second execution, still running: %+v", e)
	}
	// A process stopped before it wrote its start.
	es, err = parseWitness(strings.NewReader("end 1772445600.1 42 tick run-1 2 node-1 143\n"))
	if err != nil || len(es) != 1 || !es[0].NoStart || es[0].Code == nil || *es[0].Code != 143 || es[0].Attempt != 2 ||
		!es[0].Start.Equal(*es[0].End) {
		t.Errorf("an end without its start: %+v %v", es, err)
	}
	for _, bad := range []string{"end 1772445600.1 42 tick run-1 1 node-1 x\n", "start x 42 tick run-1 1 node-1 t\n", "middle 1 2 3 4 5 6 7\n"} {
		if _, err := parseWitness(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}
