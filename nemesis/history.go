package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// History is everything a nemesis run did and the store ended with: what
// the driver did (faults, triggers, unexpected exits of nodes), what the
// jobs witnessed (executions), what the webhook receiver took
// (deliveries), and what the store holds at the end (runs, attempts,
// cursors, notifications). The checker reads nothing else, and it is
// written as JSON lines, one record a line, so that a run can be checked
// again (-check FILE).
type History struct {
	Meta          Meta
	Jobs          []JobSpec
	Faults        []Fault
	Exits         []Exit
	Triggers      []Trigger
	Runs          []Run
	Attempts      []Attempt
	Cursors       []Cursor
	Execs         []Exec
	Notifications []Notification
	Deliveries    []Delivery
	Violations    []Violation
}

// Meta describes the run and the settings that the checker's allowances
// come from.
type Meta struct {
	Seed     int64     `json:"seed"`
	Duration Duration  `json:"duration"`
	Start    time.Time `json:"start"`
	// LoadEnd is when the faults and the trigger load stopped and the
	// cron jobs were paused; End when the nodes were stopped.
	LoadEnd time.Time `json:"load_end"`
	End     time.Time `json:"end"`
	// Heartbeat and Inactive are the nodes' heartbeat_interval and
	// inactive_threshold.
	Heartbeat Duration `json:"heartbeat"`
	Inactive  Duration `json:"inactive"`
	// Kinds are the fault kinds this run could do; NotDone the others,
	// with why.
	Kinds   []string          `json:"kinds"`
	NotDone map[string]string `json:"not_done,omitempty"`
}

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// JobSpec is what the checker needs of a declared job.
type JobSpec struct {
	Name     string `json:"name"`
	Schedule string `json:"schedule,omitempty"` // empty: runs only when triggered
	Timezone string `json:"timezone,omitempty"`
	Overlap  string `json:"overlap,omitempty"`
	Catchup  string `json:"catchup,omitempty"`
	// KillGrace is the job's kill_grace: how long a stopped attempt may
	// take to end after SIGTERM.
	KillGrace Duration `json:"kill_grace"`
}

// Fault is one fault of the nemesis, from when it was done to when it
// was healed (End).
type Fault struct {
	Kind   string    `json:"kind"`
	Node   string    `json:"node,omitempty"` // empty: every node (PostgreSQL, the receiver)
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Detail string    `json:"detail,omitempty"`
}

// Exit is a node that exited without the driver asking it to.
type Exit struct {
	Node   string    `json:"node"`
	At     time.Time `json:"at"`
	Status string    `json:"status"`
	Log    string    `json:"log,omitempty"` // the end of its log
}

// Trigger is one trigger the driver sent through a node's socket.
type Trigger struct {
	Job       string     `json:"job"`
	Node      string     `json:"node"`
	DedupID   string     `json:"dedup_id,omitempty"`
	NotBefore *time.Time `json:"not_before,omitempty"`
	NotAfter  *time.Time `json:"not_after,omitempty"`
	Sent      time.Time  `json:"sent"`
	Answered  time.Time  `json:"answered"`
	// Outcome is ok (2xx: acknowledged, RunID is its run), duplicate
	// (refused: a non-terminal run has the dedup id) or error (no answer,
	// or another refusal: nothing is promised).
	Outcome string `json:"outcome"`
	RunID   string `json:"run_id,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Trigger outcomes.
const (
	outcomeOK        = "ok"
	outcomeDuplicate = "duplicate"
	outcomeError     = "error"
)

// Run is a run as the store holds it at the end.
type Run struct {
	ID          string     `json:"id"`
	Job         string     `json:"job"`
	Status      string     `json:"status"`
	Trigger     string     `json:"trigger"`
	ScheduledAt time.Time  `json:"scheduled_at"`
	NotBefore   time.Time  `json:"not_before"`
	NotAfter    *time.Time `json:"not_after,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Attempt     int        `json:"attempt"`
	Reason      string     `json:"reason,omitempty"`
	DedupID     string     `json:"dedup_id,omitempty"`
}

// Attempt is an attempt of a run as the store holds it.
type Attempt struct {
	RunID       string     `json:"run_id"`
	Number      int        `json:"number"`
	Node        string     `json:"node"`
	Incarnation string     `json:"incarnation"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Status      string     `json:"status"`
	Reason      string     `json:"reason,omitempty"`
}

// Cursor is a cron job's cursor at the end.
type Cursor struct {
	Job     string    `json:"job"`
	Last    time.Time `json:"last"`
	Paused  bool      `json:"paused"`
	Skipped int64     `json:"skipped"`
}

// Exec is one execution of a job's process, as the process itself wrote
// it to the witness file: its start, and its end with its exit code (nil
// when it wrote none: it was killed).
type Exec struct {
	Job     string     `json:"job"`
	RunID   string     `json:"run_id"`
	Attempt int        `json:"attempt"`
	Node    string     `json:"node"`
	PID     int        `json:"pid"`
	Tick    string     `json:"tick,omitempty"` // SCHEDULERD_SCHEDULED_AT
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"`
	Code    *int       `json:"code,omitempty"`
	// NoStart: the process wrote its end and no start (it was stopped
	// before it could); Start is then its end.
	NoStart bool `json:"no_start,omitempty"`
}

// Notification is a notification as the store holds it at the end.
type Notification struct {
	ID        string    `json:"id"`
	Job       string    `json:"job"`
	Event     string    `json:"event"`
	RunID     string    `json:"run_id,omitempty"`
	State     string    `json:"state"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Delivery is one request the webhook receiver answered 200.
type Delivery struct {
	ID    string    `json:"id"`
	Event string    `json:"event"`
	Job   string    `json:"job"`
	At    time.Time `json:"at"`
	// SignatureOK: its X-Schedulerd-Signature was the HMAC of its
	// timestamp and body under the notifier's secret.
	SignatureOK bool `json:"signature_ok"`
}

// line is one line of a history file: its type and one record.
type line struct {
	Type         string        `json:"type"`
	Meta         *Meta         `json:"meta,omitempty"`
	Job          *JobSpec      `json:"job,omitempty"`
	Fault        *Fault        `json:"fault,omitempty"`
	Exit         *Exit         `json:"exit,omitempty"`
	Trigger      *Trigger      `json:"trigger,omitempty"`
	Run          *Run          `json:"run,omitempty"`
	Attempt      *Attempt      `json:"attempt,omitempty"`
	Cursor       *Cursor       `json:"cursor,omitempty"`
	Exec         *Exec         `json:"exec,omitempty"`
	Notification *Notification `json:"notification,omitempty"`
	Delivery     *Delivery     `json:"delivery,omitempty"`
	Violation    *Violation    `json:"violation,omitempty"`
}

// Write writes the history as JSON lines.
func (h *History) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	put := func(l line) error { return enc.Encode(l) }
	if err := put(line{Type: "meta", Meta: &h.Meta}); err != nil {
		return err
	}
	var err error
	each := func(typ string, n int, rec func(i int) line) {
		for i := 0; i < n && err == nil; i++ {
			l := rec(i)
			l.Type = typ
			err = put(l)
		}
	}
	each("job", len(h.Jobs), func(i int) line { return line{Job: &h.Jobs[i]} })
	each("fault", len(h.Faults), func(i int) line { return line{Fault: &h.Faults[i]} })
	each("exit", len(h.Exits), func(i int) line { return line{Exit: &h.Exits[i]} })
	each("trigger", len(h.Triggers), func(i int) line { return line{Trigger: &h.Triggers[i]} })
	each("run", len(h.Runs), func(i int) line { return line{Run: &h.Runs[i]} })
	each("attempt", len(h.Attempts), func(i int) line { return line{Attempt: &h.Attempts[i]} })
	each("cursor", len(h.Cursors), func(i int) line { return line{Cursor: &h.Cursors[i]} })
	each("exec", len(h.Execs), func(i int) line { return line{Exec: &h.Execs[i]} })
	each("notification", len(h.Notifications), func(i int) line { return line{Notification: &h.Notifications[i]} })
	each("delivery", len(h.Deliveries), func(i int) line { return line{Delivery: &h.Deliveries[i]} })
	each("violation", len(h.Violations), func(i int) line { return line{Violation: &h.Violations[i]} })
	if err != nil {
		return err
	}
	return bw.Flush()
}

// WriteFile writes the history to path.
func (h *History) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := h.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadHistory reads a history that Write wrote. Its violations are those
// of the run that wrote it; check it again to get them anew.
func ReadHistory(r io.Reader) (*History, error) {
	h := &History{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		ok := true
		switch {
		case l.Type == "meta" && l.Meta != nil:
			h.Meta = *l.Meta
		case l.Type == "job" && l.Job != nil:
			h.Jobs = append(h.Jobs, *l.Job)
		case l.Type == "fault" && l.Fault != nil:
			h.Faults = append(h.Faults, *l.Fault)
		case l.Type == "exit" && l.Exit != nil:
			h.Exits = append(h.Exits, *l.Exit)
		case l.Type == "trigger" && l.Trigger != nil:
			h.Triggers = append(h.Triggers, *l.Trigger)
		case l.Type == "run" && l.Run != nil:
			h.Runs = append(h.Runs, *l.Run)
		case l.Type == "attempt" && l.Attempt != nil:
			h.Attempts = append(h.Attempts, *l.Attempt)
		case l.Type == "cursor" && l.Cursor != nil:
			h.Cursors = append(h.Cursors, *l.Cursor)
		case l.Type == "exec" && l.Exec != nil:
			h.Execs = append(h.Execs, *l.Exec)
		case l.Type == "notification" && l.Notification != nil:
			h.Notifications = append(h.Notifications, *l.Notification)
		case l.Type == "delivery" && l.Delivery != nil:
			h.Deliveries = append(h.Deliveries, *l.Delivery)
		case l.Type == "violation" && l.Violation != nil:
			h.Violations = append(h.Violations, *l.Violation)
		default:
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("line %d: unknown record %q", n, l.Type)
		}
	}
	return h, sc.Err()
}
