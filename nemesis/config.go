package main

import (
	"fmt"
	"strings"
	"time"
)

// Settings of every node, as in the cluster tests of cmd/schedulerd.
const (
	heartbeat   = time.Second
	inactive    = 5 * time.Second
	killGrace   = 2 * time.Second
	concurrency = 16
)

// jobDef is a job of the nemesis: a witness process that sleeps between
// minMS and maxMS milliseconds and fails (exit 1) failPct times in a
// hundred, with the given policies.
type jobDef struct {
	name     string
	schedule string // empty: triggered only
	// more TOML lines: overlap, catchup, retry, timeout, ...
	overlap, catchup string
	extra            string
	minMS, maxMS     int
	failPct          int
}

// cronJobs fire every second (or two, or three), each with other overlap
// and catchup settings, retries that sometimes fail, timeouts, jitter and
// a start deadline.
var cronJobs = []jobDef{
	{name: "tick-allow", schedule: "* * * * * *", overlap: "allow", catchup: "all",
		extra: `misfire_grace = "2m"
retry = { max_attempts = 3, backoff = "fixed", initial_delay = "1s" }`,
		minMS: 100, maxMS: 600, failPct: 10},
	{name: "tick-skip", schedule: "* * * * * *", overlap: "skip", catchup: "none",
		extra: `misfire_grace = "5s"
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "1s" }`,
		minMS: 300, maxMS: 2500, failPct: 10},
	{name: "tick-queue", schedule: "* * * * * *", overlap: "queue", catchup: "latest",
		extra: `misfire_grace = "10s"
retry = { max_attempts = 3, backoff = "fixed", initial_delay = "500ms" }`,
		minMS: 50, maxMS: 300, failPct: 10},
	{name: "tick-replace", schedule: "*/2 * * * * *", overlap: "replace", catchup: "latest",
		extra: `misfire_grace = "10s"
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "1s" }`,
		minMS: 500, maxMS: 3000, failPct: 5},
	{name: "tick-timeout", schedule: "* * * * * *", overlap: "allow", catchup: "latest",
		extra: `timeout = "1s"
start_deadline = "15s"
max_concurrency = 3
retry = { max_attempts = 3, backoff = "exponential", initial_delay = "1s", max_delay = "4s" }`,
		minMS: 200, maxMS: 1500},
	{name: "tick-jitter", schedule: "*/3 * * * * *", overlap: "skip", catchup: "all",
		extra: `jitter = "2s"
start_deadline = "20s"
misfire_grace = "1m"
retry = { max_attempts = 3, backoff = "fixed", initial_delay = "1s" }`,
		minMS: 100, maxMS: 500, failPct: 5},
}

// triggerJobs run only when the driver triggers them.
var triggerJobs = []jobDef{
	{name: "trig-retry", extra: `timeout = "5s"
retry = { max_attempts = 4, backoff = "exponential", initial_delay = "1s", max_delay = "4s" }`,
		minMS: 100, maxMS: 1000, failPct: 25},
	{name: "trig-limit", extra: `max_concurrency = 2
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "1s" }`,
		minMS: 300, maxMS: 1500, failPct: 5},
	// Long enough to be running when its node is stopped or cut off:
	// its process then runs on while the attempt is recovered elsewhere,
	// until the node fences itself or wakes.
	{name: "trig-long", extra: `timeout = "30s"
retry = { max_attempts = 3, backoff = "fixed", initial_delay = "1s" }`,
		minMS: 3000, maxMS: 12000, failPct: 5},
}

// jobSpecs are the jobs as the checker sees them.
func jobSpecs() []JobSpec {
	var out []JobSpec
	for _, j := range append(append([]jobDef(nil), cronJobs...), triggerJobs...) {
		out = append(out, JobSpec{Name: j.name, Schedule: j.schedule, Timezone: "UTC", Overlap: j.overlap,
			Catchup: j.catchup, KillGrace: Duration(killGrace)})
	}
	return out
}

// witnessScript is the program of every job. It appends a line when it
// starts and one when it ends (with its exit code; 143 when stopped by
// SIGTERM), each with the time, its pid, job, run, attempt and node. The
// trap comes first: a process stopped before it writes no line, and one
// stopped after it at least its end; a SIGTERM while it ends (its timeout
// at that moment) is ignored, so it ends once. With
// TMPDIR set (the node's state directory) it first writes a scratch file
// there, and fails with 75 when it cannot: the disk is full.
func witnessScript(witness string) string {
	return `#!/bin/bash
# A job of the nemesis: MIN_MS MAX_MS FAIL_PERCENT.
w=` + shellQuote(witness) + `
line() {
	printf '%s %s %s %s %s %s %s %s\n' "$1" "$EPOCHREALTIME" "$$" "$SCHEDULERD_JOB" "$SCHEDULERD_RUN_ID" \
		"$SCHEDULERD_ATTEMPT" "$SCHEDULERD_NODE" "$2" >>"$w"
}
finish() {
	trap '' TERM
	line end "$1"
	exit "$1"
}
trap 'finish 143' TERM
line start "$SCHEDULERD_SCHEDULED_AT"
if [ -n "$TMPDIR" ]; then
	if ! { mkdir -p "$TMPDIR" && printf '%01024d' 0 >"$TMPDIR/scratch.$$"; } 2>/dev/null; then
		rm -f "$TMPDIR/scratch.$$"
		finish 75
	fi
	rm -f "$TMPDIR/scratch.$$"
fi
ms=$(($1 + RANDOM % ($2 - $1 + 1)))
printf -v frac %03d $((ms % 1000))
sleep "$((ms / 1000)).$frac" &
wait $!
if ((RANDOM % 100 < $3)); then
	finish 1
fi
finish 0
`
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nodeConfig is the config of one node.
func nodeConfig(n *node, dsn, script, webhook, secretFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `[daemon]
node_id = %q
store = %q
state_dir = %q
socket = %q
concurrency = %d
heartbeat_interval = %q
inactive_threshold = %q
shutdown_grace = "3s"
log_format = "json"

[defaults]
notify = ["hook"]
kill_grace = %q
timeout = "10s"

[[notifier]]
name = "hook"
events = ["failed", "dead_letter", "expired", "recovered", "skipped", "overdue", "resolved"]
webhook = %q
secret_file = %q
timeout = "2s"
`, n.id, dsn, n.state, n.socket, concurrency, heartbeat.String(), inactive.String(), killGrace.String(), webhook, secretFile)
	for _, j := range append(append([]jobDef(nil), cronJobs...), triggerJobs...) {
		fmt.Fprintf(&b, "\n[[job]]\nname = %q\n", j.name)
		if j.schedule != "" {
			fmt.Fprintf(&b, "schedule = %q\ntimezone = \"UTC\"\n", j.schedule)
		}
		fmt.Fprintf(&b, "command = [%q, \"%d\", \"%d\", \"%d\"]\n", script, j.minMS, j.maxMS, j.failPct)
		if j.overlap != "" {
			fmt.Fprintf(&b, "overlap = %q\ncatchup = %q\n", j.overlap, j.catchup)
		}
		if n.tmpfs {
			fmt.Fprintf(&b, "env = { TMPDIR = %q }\n", n.state+"/tmp")
		}
		b.WriteString(j.extra + "\n")
	}
	return b.String()
}
