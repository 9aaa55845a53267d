package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliResult is what a command printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs `schedulerd ARGS --config <the test's config>` and returns what
// it printed and its exit code.
func (e *env) cli(args ...string) cliResult {
	e.t.Helper()
	return runBinary(e.t, "", "", append(args, "--config", e.config)...)
}

// runBinary runs schedulerd with args in dir (the package directory when
// ""), stdin on its standard input.
func runBinary(t *testing.T, dir, stdin string, args ...string) cliResult {
	t.Helper()
	return runBinaryEnv(t, dir, stdin, nil, args...)
}

// runBinaryEnv is runBinary with the variables env added to the
// environment, which has none of SCHEDULERD_ otherwise.
func runBinaryEnv(t *testing.T, dir, stdin string, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(withoutSocketEnv(os.Environ()), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run schedulerd %v: %v", args, err)
	}
	return res
}

// ok runs a command that must succeed and returns its stdout.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.cli(args...)
	if r.code != 0 {
		e.t.Fatalf("schedulerd %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs a command that must exit with code and say want on stderr.
func (e *env) fails(code int, want string, args ...string) cliResult {
	e.t.Helper()
	r := e.cli(args...)
	if r.code != code || !strings.HasPrefix(r.stderr, "schedulerd: ") || !strings.Contains(r.stderr, want) {
		e.t.Fatalf("schedulerd %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), r.code, r.stderr, code, want)
	}
	return r
}

func withoutSocketEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SCHEDULERD_") {
			out = append(out, kv)
		}
	}
	return out
}

// jsonLines parses one JSON object per line.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON object per line: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func jsonOne(t *testing.T, s string) map[string]any {
	t.Helper()
	ls := jsonLines(t, s)
	if len(ls) != 1 {
		t.Fatalf("want one JSON line, got %d: %s", len(ls), s)
	}
	return ls[0]
}

// cliJobs are the jobs of the CLI tests.
func cliJobs() string {
	return fmt.Sprintf(`[[job]]
name = "ok"
shell = 'echo hello; "$SD_BIN" progress 50 half way && echo reported'
env = { SD_BIN = %q }

[[job]]
name = "fail"
shell = "echo boom >&2; exit 3"
retry = { max_attempts = 1 }

[[job]]
name = "slow"
shell = 'echo $$ > "$PID_FILE"; exec sleep 600'
env = { PID_FILE = "%%s" }
kill_grace = "2s"

[[job]]
name = "tick"
schedule = "0 0 1 1 *"
timezone = "Europe/Berlin"
command = ["/bin/true"]
`, binary)
}

func (e *env) writeCLIConfig() {
	e.t.Helper()
	e.writeConfig(fmt.Sprintf(cliJobs(), filepath.Join(e.dir, "slow.pid")))
}

// TestCLITriggerRunsAndShow covers trigger (with --wait, its exit codes, and
// a progress report from inside the job), runs, runs show, rerun, jobs,
// nodes and health, human and --json.
func TestCLITriggerRunsAndShow(t *testing.T) {
	e := newEnv(t)
	e.writeCLIConfig()
	d := e.start(true)

	out := e.ok("trigger", "ok", "--wait")
	if !strings.Contains(out, "completed (exit code 0)") {
		t.Fatalf("trigger --wait output:\n%s", out)
	}
	run := jsonOne(t, e.ok("runs", "--job", "ok", "--json"))
	id := run["id"].(string)
	for _, k := range []string{"id", "job", "status", "attempt", "max_attempts", "trigger", "scheduled_at", "not_before",
		"not_after", "created_at", "started_at", "finished_at", "node", "exit_code", "error", "dedup_id", "rerun_of"} {
		if _, ok := run[k]; !ok {
			t.Errorf("runs --json lacks %q", k)
		}
	}
	if run["status"] != "completed" || run["trigger"] != "manual" || run["not_after"] != nil || run["exit_code"] != 0.0 || run["node"] != "test-node" {
		t.Errorf("run %v", run)
	}
	if _, err := time.Parse(time.RFC3339, run["finished_at"].(string)); err != nil || !strings.HasSuffix(run["finished_at"].(string), "Z") {
		t.Errorf("finished_at %v is not RFC 3339 UTC", run["finished_at"])
	}

	// runs show: fields, the attempt with its output, the events, and the
	// progress the job reported from inside with `schedulerd progress`.
	show := jsonOne(t, e.ok("runs", "show", id, "--json"))
	if show["id"] != id || show["progress"] != 50.0 || show["progress_message"] != "half way" {
		t.Errorf("runs show --json: %v", show)
	}
	attempts := show["attempts"].([]any)
	if len(attempts) != 1 {
		t.Fatalf("attempts %v", attempts)
	}
	a := attempts[0].(map[string]any)
	if a["exit_code"] != 0.0 || a["output"] != "hello\nreported\n" || a["status"] != "completed" {
		t.Errorf("attempt %v", a)
	}
	var tos []string
	for _, ev := range show["events"].([]any) {
		tos = append(tos, ev.(map[string]any)["to"].(string)+"/"+ev.(map[string]any)["reason"].(string))
	}
	if strings.Join(tos, " ") != "pending/created running/claimed completed/succeeded" {
		t.Errorf("events %v", tos)
	}
	human := e.ok("runs", "show", id)
	for _, want := range []string{"status:", "completed (succeeded)", "progress:", "50% half way", "| hello", "events:", "claimed"} {
		if !strings.Contains(human, want) {
			t.Errorf("runs show lacks %q:\n%s", want, human)
		}
	}

	// A failing job: --wait exits 9 and says how it ended.
	r := e.fails(exitRunFailed, "ended dead_letter", "trigger", "fail", "--wait")
	if !strings.Contains(r.stderr, "exit status 3") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = e.fails(exitRunFailed, "ended dead_letter", "trigger", "fail", "--wait", "--json")
	if fin := jsonOne(t, r.stdout); fin["status"] != "dead_letter" || fin["exit_code"] != 3.0 {
		t.Errorf("trigger --wait --json: %v", fin)
	}

	// Rerun makes a linked run.
	rr := jsonOne(t, e.ok("rerun", id, "--wait", "--json"))
	if rr["rerun_of"] != id || rr["trigger"] != "rerun" || rr["status"] != "completed" {
		t.Errorf("rerun: %v", rr)
	}

	// Listing filters.
	if got := jsonLines(t, e.ok("runs", "--json")); len(got) != 4 {
		t.Errorf("runs: %d, want 4", len(got))
	}
	if got := jsonLines(t, e.ok("runs", "--status", "dead_letter", "--json")); len(got) != 2 || got[0]["job"] != "fail" {
		t.Errorf("runs --status dead_letter: %v", got)
	}
	if got := jsonLines(t, e.ok("runs", "--limit", "1", "--json")); len(got) != 1 || got[0]["rerun_of"] != id {
		t.Errorf("runs --limit 1: %v", got)
	}
	if tbl := e.ok("runs"); !strings.HasPrefix(tbl, "ID ") || strings.Count(tbl, "\n") != 5 {
		t.Errorf("runs table:\n%s", tbl)
	}

	// jobs: kind, schedule and zone, next fire, last run.
	jobs := jsonLines(t, e.ok("jobs", "--json"))
	if len(jobs) != 4 {
		t.Fatalf("jobs: %v", jobs)
	}
	byName := map[string]map[string]any{}
	for _, j := range jobs {
		byName[j["name"].(string)] = j
	}
	if j := byName["tick"]; j["kind"] != "cron" || j["schedule"] != "0 0 1 1 *" || j["timezone"] != "Europe/Berlin" ||
		j["next_fire"] == nil || j["paused"] != false || j["skipped"] != 0.0 {
		t.Errorf("tick: %v", j)
	}
	if j := byName["fail"]; j["kind"] != "trigger" || j["last_run_status"] != "dead_letter" || j["last_run_at"] == nil || j["next_fire"] != nil {
		t.Errorf("fail: %v", j)
	}
	if tbl := e.ok("jobs"); !strings.Contains(tbl, "0 0 1 1 * (Europe/Berlin)") {
		t.Errorf("jobs table:\n%s", tbl)
	}

	// nodes and health.
	nodes := jsonLines(t, e.ok("nodes", "--json"))
	if len(nodes) != 1 || nodes[0]["id"] != "test-node" || nodes[0]["state"] != "active" || nodes[0]["pid"] != float64(d.cmd.Process.Pid) {
		t.Errorf("nodes: %v", nodes)
	}
	if out := e.ok("health"); !strings.Contains(out, "healthy") {
		t.Errorf("health: %s", out)
	}
	if h := jsonOne(t, e.ok("health", "--json")); h["ok"] != true {
		t.Errorf("health --json: %v", h)
	}
	d.stop()
}

// TestCLIRefusals: each refusal has its exit code and says why.
func TestCLIRefusals(t *testing.T) {
	e := newEnv(t)
	e.writeCLIConfig()
	d := e.start(true)

	e.fails(exitUnknownJob, `unknown job "nope"`, "trigger", "nope")
	e.fails(exitUnknownJob, `unknown job "nope"`, "pause", "nope")
	e.fails(exitUnknownRun, `unknown run "no-such-run"`, "runs", "show", "no-such-run")
	e.fails(exitUnknownRun, `unknown run`, "cancel", "no-such-run")
	e.fails(exitUnknownRun, `unknown run`, "rerun", "no-such-run")

	// A dedup id is refused while its run is active, free once it is not.
	first := jsonOne(t, e.ok("trigger", "ok", "--dedup-id", "nightly", "--not-before", "+1h", "--json"))
	if first["status"] != "pending" || first["dedup_id"] != "nightly" {
		t.Fatalf("trigger --dedup-id: %v", first)
	}
	nb, _ := time.Parse(time.RFC3339, first["not_before"].(string))
	if d := time.Until(nb); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("--not-before +1h gave %v", nb)
	}
	r := e.fails(exitDuplicate, first["id"].(string), "trigger", "ok", "--dedup-id", "nightly")
	if !strings.Contains(r.stderr, "nightly") {
		t.Errorf("duplicate message: %s", r.stderr)
	}
	e.ok("cancel", first["id"].(string))
	e.ok("trigger", "ok", "--dedup-id", "nightly", "--wait")

	// Windows.
	e.fails(exitInvalidWindow, "not_after", "trigger", "ok", "--not-before", "+2h", "--not-after", "+1h")
	e.fails(exitInvalidWindow, "invalid window", "trigger", "ok", "--not-after", "2020-01-01T00:00:00Z")
	e.fails(exitUsage, "--not-before", "trigger", "ok", "--not-before", "tomorrow")
	e.fails(exitUsage, "usage", "trigger")
	e.fails(exitUsage, "--status", "runs", "--status", "done")

	// Cancel of a finished run, pause of a job without a schedule.
	e.fails(exitFailure, "already cancelled", "cancel", first["id"].(string))
	e.fails(exitFailure, "no schedule", "pause", "ok")

	// Progress outside a job.
	e.fails(exitUsage, "inside a job", "progress", "50")

	// Another user: the socket's modes keep them out.
	if os.Geteuid() == 0 {
		bin := publicBinary(t)
		cmd := exec.Command(bin, "jobs", "--socket", filepath.Join(e.dir, "state", "schedulerd.sock"))
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitPermission || !strings.Contains(string(out), "permission denied") {
			t.Errorf("jobs as nobody: %v\n%s", err, out)
		}
	}

	d.stop()
	e.fails(exitNotRunning, "not running", "jobs")
	e.fails(exitNotRunning, "not running", "health")
	// A stale socket after a kill: still "not running".
	d = e.start(true)
	d.kill()
	e.fails(exitNotRunning, "not running", "trigger", "ok")
}

// publicBinary copies the binary where another user can run it.
func publicBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "schedulerd-pub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "schedulerd")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestCLICancelRunning: cancel of a running job stops its process and the
// run ends cancelled.
func TestCLICancelRunning(t *testing.T) {
	e := newEnv(t)
	e.writeCLIConfig()
	d := e.start(true)
	pidFile := filepath.Join(e.dir, "slow.pid")

	run := jsonOne(t, e.ok("trigger", "slow", "--json"))
	id := run["id"].(string)
	var pid int
	waitFor(t, "the slow job to start", 10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	if s := jsonOne(t, e.ok("runs", "show", id, "--json")); s["status"] != "running" {
		t.Fatalf("status %v", s["status"])
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the job's process %d is not there: %v", pid, err)
	}
	fin := jsonOne(t, e.ok("cancel", id, "--wait", "--json"))
	if fin["status"] != "cancelled" || fin["reason"] != "cancelled" {
		t.Fatalf("after cancel --wait: %v", fin)
	}
	waitFor(t, "the job's process to be gone", 5*time.Second, func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	show := jsonOne(t, e.ok("runs", "show", id, "--json"))
	var reasons []string
	for _, ev := range show["events"].([]any) {
		reasons = append(reasons, ev.(map[string]any)["reason"].(string))
	}
	if reasons[len(reasons)-1] != "cancelled" {
		t.Errorf("events %v", reasons)
	}
	d.stop()
}

// TestCLIPauseSurvivesRestart: pause persists across a daemon restart;
// resume undoes it.
func TestCLIPauseSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.writeCLIConfig()
	d := e.start(true)
	paused := func() bool {
		for _, j := range jsonLines(t, e.ok("jobs", "--json")) {
			if j["name"] == "tick" {
				if j["paused"] == true && j["next_fire"] != nil {
					t.Errorf("a paused job has a next fire time: %v", j)
				}
				return j["paused"] == true
			}
		}
		t.Fatal("no job tick")
		return false
	}
	if out := e.ok("pause", "tick"); !strings.Contains(out, "paused") {
		t.Errorf("pause: %s", out)
	}
	if !paused() {
		t.Fatal("not paused")
	}
	d.stop()
	d = e.start(true)
	if !paused() {
		t.Fatal("the pause did not survive a restart")
	}
	// Triggers still work while paused.
	e.ok("trigger", "tick", "--wait")
	if r := jsonOne(t, e.ok("resume", "tick", "--json")); r["paused"] != false {
		t.Errorf("resume --json: %v", r)
	}
	if paused() {
		t.Fatal("still paused after resume")
	}
	d.stop()
}

// TestCLIReload: reload applies a good config and rejects a bad one (exit
// 2, the running config stays), with RELOADING/READY for systemd both times.
func TestCLIReload(t *testing.T) {
	e := newEnv(t)
	e.writeCLIConfig()
	d := e.start(true)
	e.writeConfig(fmt.Sprintf(cliJobs(), filepath.Join(e.dir, "slow.pid")) + "\n[[job]]\nname = \"added\"\ncommand = [\"/bin/true\"]\n")
	if out := e.ok("reload"); !strings.Contains(out, "reload applied") {
		t.Errorf("reload: %s", out)
	}
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	e.ok("trigger", "added", "--wait")

	if err := os.WriteFile(e.config, []byte("[[job]]\nname = \"broken\"\nschedule = \"61 * * * *\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The client reads the socket from the config; a broken one cannot say.
	sock := filepath.Join(e.dir, "state", "schedulerd.sock")
	r := e.fails(exitUsage, "reload rejected", "reload", "--socket", sock)
	if !strings.Contains(r.stderr, "schedule") {
		t.Errorf("rejection does not say why: %s", r.stderr)
	}
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	e.ok("trigger", "added", "--wait", "--socket", sock)
	d.stop()
}
