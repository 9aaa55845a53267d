package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
)

// logsJobs are the jobs of the logs tests: talk prints a line, waits for
// the test on the fifo GO, then prints a line that would drive a
// terminal; flaky fails its first attempt once released on GO; idle never runs by itself;
// flood waits on GO, then writes floodBytes.
func logsJobs(fifo string) string {
	return fmt.Sprintf(`[[job]]
name = "talk"
shell = '''
echo "first $SCHEDULERD_ATTEMPT"
read x < "$GO"
printf '\303\251\033]0;pwned\007 second\n'
'''
env = { GO = %[1]q }
retry = { max_attempts = 1 }

[[job]]
name = "flaky"
shell = 'echo "try $SCHEDULERD_ATTEMPT"; if [ "$SCHEDULERD_ATTEMPT" = 1 ]; then read x < "$GO"; exit 1; fi'
env = { GO = %[1]q }
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "0s" }

[[job]]
name = "idle"
shell = 'echo "idle ran"'

[[job]]
name = "flood"
shell = 'read x < "$GO"; head -c %[2]d /dev/zero | tr "\000" x'
env = { GO = %[1]q }
retry = { max_attempts = 1 }
`, fifo, floodBytes)
}

// floodBytes is what the job flood writes.
const floodBytes = 32 << 20

// talkLine is the second line of talk as logs prints it: escaped.
const talkLine = `é\x1b]0;pwned\x07 second`

// mkfifo makes the fifo the jobs wait on.
func mkfifo(t *testing.T, dir string) string {
	t.Helper()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo
}

// release lets a job waiting on fifo go on: the write returns once the
// job has opened the fifo.
func release(t *testing.T, fifo string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(fifo, []byte("go\n"), 0o600) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no job opened the fifo within 60s")
	}
}

// logsProc is a `schedulerd logs` running in the background.
type logsProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	all    []string
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
}

func (p *logsProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

func (p *logsProc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startLogs runs schedulerd with args (and the variables env), reading
// its standard output line by line.
func startLogs(t *testing.T, env []string, args ...string) *logsProc {
	t.Helper()
	p := &logsProc{t: t, cmd: exec.Command(binary, args...), lines: make(chan string, 1000), exited: make(chan struct{})}
	p.cmd.Env = append(withoutSocketEnv(os.Environ()), env...)
	p.cmd.Stderr = p
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// expect reads the next lines, which must be want.
func (p *logsProc) expect(want ...string) {
	p.t.Helper()
	for _, w := range want {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("logs ended before %q; it printed %q\nstderr: %s", w, p.all, p.errText())
			}
			p.all = append(p.all, l)
			if l != w {
				p.t.Fatalf("logs printed %q, want %q; all: %q\nstderr: %s", l, w, p.all, p.errText())
			}
		case <-time.After(60 * time.Second):
			p.t.Fatalf("logs printed no %q within 60s; it printed %q\nstderr: %s", w, p.all, p.errText())
		}
	}
}

// waitExit waits for logs to exit by itself, with code.
func (p *logsProc) waitExit(code int) {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("logs did not exit; it printed %q\nstderr: %s", p.all, p.errText())
	}
	for l := range p.lines {
		p.all = append(p.all, l)
	}
	if got := p.cmd.ProcessState.ExitCode(); got != code {
		p.t.Fatalf("logs exited %d, want %d; it printed %q\nstderr: %s", got, code, p.all, p.errText())
	}
}

// header is the line logs -f prints before the output of an attempt.
func header(id, job string, attempt, of int) string {
	return fmt.Sprintf("==> run %s of %s, attempt %d of %d, on test-node <==", id, job, attempt, of)
}

// runStatus reads a run's status from the daemon's store.
func runStatus(t *testing.T, e *env, id string) jobs.Status {
	t.Helper()
	r, err := e.openStore().RunGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// TestLogsFollowsAJob: `logs -f JOB` started before the job's first run
// waits for it, prints each line as the job writes it (before the run
// ends), escaped for the terminal, then the run's end, then the next
// run after its header; it ends on SIGINT with exit 0. Without -f, logs
// prints the newest run's output, or a run's, escaped unless --raw; and
// says clearly what is unknown or has no run yet.
func TestLogsFollowsAJob(t *testing.T) {
	e := newEnv(t)
	fifo := mkfifo(t, e.dir)
	e.writeConfig(logsJobs(fifo))
	d := e.start(true)

	p := startLogs(t, nil, "logs", "-f", "talk", "--config", e.config)
	waitFor(t, "logs to wait for the first run", 30*time.Second, func() bool {
		return strings.Contains(p.errText(), "job talk has no run that has started yet: waiting for its first")
	})
	id1 := jsonField(t, e.ok("trigger", "talk", "--json"), "id")
	p.expect(header(id1, "talk", 1, 1), "first 1")
	if st := runStatus(t, e, id1); st != jobs.StatusRunning {
		t.Fatalf("the first line came, and the run is %s: it came before the run ended?", st)
	}
	release(t, fifo)
	p.expect(talkLine, fmt.Sprintf("==> run %s of talk: completed (exit code 0) <==", id1))

	id2 := jsonField(t, e.ok("trigger", "talk", "--json"), "id")
	p.expect(header(id2, "talk", 1, 1), "first 1")
	release(t, fifo)
	p.expect(talkLine, fmt.Sprintf("==> run %s of talk: completed (exit code 0) <==", id2))
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	p.waitExit(0)

	// Without -f: the newest run's output, or a run's; --raw as written.
	if out := e.ok("logs", "talk"); out != "first 1\n"+talkLine+"\n" {
		t.Errorf("logs talk: %q", out)
	}
	if out := e.ok("logs", id1); out != "first 1\n"+talkLine+"\n" {
		t.Errorf("logs RUN: %q", out)
	}
	if out := e.ok("logs", id1, "--raw"); out != "first 1\né\x1b]0;pwned\x07 second\n" {
		t.Errorf("logs --raw: %q", out)
	}
	lines := jsonLines(t, e.ok("--json", "logs", id1))
	if len(lines) < 2 || lines[0]["type"] != "attempt" || lines[0]["state"] != "stored" {
		t.Fatalf("logs --json: %v", lines)
	}
	var text string
	for _, l := range lines[1:] {
		text += l["output"].(string)
	}
	if text != "first 1\né\x1b]0;pwned\x07 second\n" {
		t.Errorf("logs --json: the output is %q", text)
	}

	e.fails(exitUnknownJob, `no job is called "nosuch"`, "logs", "nosuch")
	e.fails(exitUnknownRun, `unknown run "0190a0b0-0000-7000-8000-000000000000"`, "logs", "0190a0b0-0000-7000-8000-000000000000")
	e.fails(exitFailure, "job idle has no run that has started yet; with -f, logs waits for its first", "logs", "idle")
	d.stop()
}

// TestLogsFollowsARunsAttempts: `logs -f RUN` prints each attempt after
// its header and the run's state after it, and exits once the run has
// finished.
func TestLogsFollowsARunsAttempts(t *testing.T) {
	e := newEnv(t)
	fifo := mkfifo(t, e.dir)
	e.writeConfig(logsJobs(fifo))
	d := e.start(true)
	id := jsonField(t, e.ok("trigger", "flaky", "--json"), "id")
	waitFor(t, "the first attempt to start", 30*time.Second, func() bool { return runStatus(t, e, id) == jobs.StatusRunning })
	p := startLogs(t, nil, "logs", id, "-f", "--config", e.config)
	p.expect(header(id, "flaky", 1, 2), "try 1")
	release(t, fifo)
	p.waitExit(0)
	// The end of attempt 1, from the run as it waits for its retry or,
	// when logs saw attempt 2 begun first, from the run's history.
	want := []string{
		header(id, "flaky", 1, 2), "try 1",
		`(retrying \(attempt 1 of 2 failed: exit status 1\), next attempt not before |attempt 1 of 2 ended, retrying \(failed\): exit status 1 <==$)`,
		header(id, "flaky", 2, 2), "try 2",
		"==> run " + id + " of flaky: completed (exit code 0) <==",
	}
	if len(p.all) != len(want) {
		t.Fatalf("logs -f RUN printed %q", p.all)
	}
	for i, w := range want {
		if i == 2 {
			w = "^==> run " + id + " of flaky: " + w
			if !regexp.MustCompile(w).MatchString(p.all[i]) {
				t.Fatalf("logs -f RUN printed %q, want %q in line %d", p.all, w, i+1)
			}
		} else if p.all[i] != w {
			t.Fatalf("logs -f RUN printed %q, want %q in line %d", p.all, w, i+1)
		}
	}
	d.stop()
}

// TestLogsOverHTTPAPI: logs -f over the HTTP API with a read token sees
// the output before the run ends; the route needs a token (401 without)
// and no more than the read role.
func TestLogsOverHTTPAPI(t *testing.T) {
	e := newEnv(t)
	fifo := mkfifo(t, e.dir)
	addr := freeAddr(t)
	read := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(8, fmt.Sprintf("api_listen = %q", addr), logsJobs(fifo)+"\n"+read.table)
	d := e.start(true)
	id := jsonField(t, e.ok("trigger", "talk", "--json"), "id")
	api := []string{"--api", "http://" + addr, "--token-file", read.file}
	p := startLogs(t, nil, append([]string{"logs", "-f", id}, api...)...)
	p.expect(header(id, "talk", 1, 1), "first 1")
	if st := runStatus(t, e, id); st != jobs.StatusRunning {
		t.Fatalf("the first line came over the API, and the run is %s", st)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	url := "http://" + addr + "/v1/runs/" + id + "/output"
	if code, _, body := rawAPI(t, hc, url, "GET", "", nil); code != http.StatusUnauthorized {
		t.Errorf("output without a token: %d %s", code, body)
	}
	code, h, body := rawAPI(t, hc, url, "GET", "Bearer "+read.token, nil)
	if code != http.StatusOK || h.Get("Schedulerd-Output") != "live" || body != "first 1\n" {
		t.Errorf("output with a read token while it runs: %d %v %q", code, h, body)
	}
	release(t, fifo)
	p.expect(talkLine, fmt.Sprintf("==> run %s of talk: completed (exit code 0) <==", id))
	p.waitExit(0)
	r := runBinary(t, "", "", append([]string{"logs", "talk"}, api...)...)
	if r.code != 0 || r.stdout != "first 1\n"+talkLine+"\n" {
		t.Errorf("logs JOB over the API: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	d.stop()
}

// TestLogsFollowersThatNeverRead: as many followers as the API serves,
// none of which reads, do not hold up the job, whose output they follow,
// nor the daemon's other requests, nor grow its memory by the output.
func TestLogsFollowersThatNeverRead(t *testing.T) {
	e := newEnv(t)
	fifo := mkfifo(t, e.dir)
	addr := freeAddr(t)
	read := newCLIToken(t, e.dir, "grafana", "read")
	e.writeConfigWith(8, fmt.Sprintf("api_listen = %q", addr), logsJobs(fifo)+"\n"+read.table)
	d := e.start(true)
	id := jsonField(t, e.ok("trigger", "flood", "--json"), "id")
	waitFor(t, "the flood to start", 30*time.Second, func() bool { return runStatus(t, e, id) == jobs.StatusRunning })

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	follow := func() int {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /v1/runs/%s/output?follow=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", id, read.token)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode // and its body is never read
	}
	for i := range 8 {
		if code := follow(); code != http.StatusOK {
			t.Fatalf("follower %d: %d", i+1, code)
		}
	}
	if code := follow(); code != http.StatusTooManyRequests {
		t.Errorf("a follower past the budget: %d, want 429", code)
	}
	before := peakRSS(t, d.cmd.Process.Pid)
	release(t, fifo)
	waitFor(t, "the flood to finish", 2*time.Minute, func() bool { return runStatus(t, e, id).Terminal() })
	if st := runStatus(t, e, id); st != jobs.StatusCompleted {
		t.Fatalf("the flood ended %s", st)
	}
	grew := peakRSS(t, d.cmd.Process.Pid) - before
	t.Logf("the daemon's peak memory grew by %d KiB while the job wrote %d MiB to 8 followers that do not read", grew>>10, floodBytes>>20)
	if grew > floodBytes/2 {
		t.Errorf("the daemon's peak memory grew by %d MiB for %d MiB of output", grew>>20, floodBytes>>20)
	}
	// The daemon answers the rest meanwhile.
	e.ok("health")
	if out := e.ok("logs", id); !strings.HasSuffix(out, strings.Repeat("x", 1000)) {
		t.Errorf("logs of the flood: %d bytes", len(out))
	}
	d.stop()
}

// TestLogsClusterElsewhere: on a cluster on PostgreSQL, the node that
// runs an attempt gives its output live; another node says where it runs
// and, with -f, gives the stored output once the attempt ends.
func TestLogsClusterElsewhere(t *testing.T) {
	proctest.Long(t, "a cluster of two daemons")
	dir := t.TempDir()
	fifo := mkfifo(t, dir)
	c := newCluster(t, 2, logsJobs(fifo))
	id := jsonField(t, c.cli("node-1", "trigger", "talk", "--json").stdout, "id")
	var runner string
	waitFor(t, "the run to start", 30*time.Second, func() bool {
		r := c.run(id)
		runner = r.Node
		return r.Status == jobs.StatusRunning
	})
	other := c.other(runner)
	sock := func(node string) string { return filepath.Join(c.node(node).env.dir, "state", "schedulerd.sock") }

	here := startLogs(t, nil, "logs", "-f", id, "--socket", sock(runner))
	here.expect(fmt.Sprintf("==> run %s of talk, attempt 1 of 1, on %s <==", id, runner), "first 1")
	there := startLogs(t, nil, "logs", "-f", id, "--socket", sock(other))
	there.expect(fmt.Sprintf("==> run %s of talk, attempt 1 of 1, on %s (another node: its output comes when the attempt ends) <==", id, runner))
	now := c.cli(other, "logs", id)
	if now.code != 0 || now.stdout != "" || !strings.Contains(now.stderr, "attempt 1 runs on node "+runner+", whose output is seen here when it ends") {
		t.Errorf("logs RUN on the other node while it runs: exit %d %q %q", now.code, now.stdout, now.stderr)
	}
	release(t, fifo)
	end := fmt.Sprintf("==> run %s of talk: completed (exit code 0) <==", id)
	here.expect(talkLine, end)
	there.expect("first 1", talkLine, end)
	here.waitExit(0)
	there.waitExit(0)
}
