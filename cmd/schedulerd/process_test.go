package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/pgtest"
	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// binary is the schedulerd built once for the process tests.
var binary string

// pg is the PostgreSQL server of the cluster tests.
var pg *pgtest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "schedulerd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "schedulerd")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build schedulerd:", err)
		os.Exit(1)
	}
	// One throwaway PostgreSQL for the cluster tests (or
	// $SCHEDULERD_TEST_POSTGRES); on CI a missing one fails the run.
	code := pgtest.Main(m, &pg)
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a schedulerd process started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	notify *net.UnixConn
	states chan string // sd_notify messages, one per datagram
	log    string
	exited chan struct{}
}

// env is a test's directory with its config and state.
type env struct {
	t      *testing.T
	dir    string
	config string
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	return &env{t: t, dir: dir, config: filepath.Join(dir, "schedulerd.toml")}
}

// writeConfig writes the [daemon] section pointing at the test's state
// directory, then jobs.
func (e *env) writeConfig(jobsTOML string) {
	e.t.Helper()
	e.writeConfigWith(8, "", jobsTOML)
}

// writeConfigWith is writeConfig with the daemon's concurrency and more
// [daemon] lines.
func (e *env) writeConfigWith(concurrency int, daemon, jobsTOML string) {
	e.t.Helper()
	cfg := fmt.Sprintf(`[daemon]
state_dir = %q
node_id = "test-node"
concurrency = %d
shutdown_grace = "5s"
log_format = "json"
log_level = "debug"
%s
%s`, filepath.Join(e.dir, "state"), concurrency, daemon, jobsTOML)
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// start runs `schedulerd run` and, when wantReady, waits for READY=1.
func (e *env) start(wantReady bool) *proc {
	e.t.Helper()
	return e.startEnv(wantReady)
}

// startEnv is start with extra environment variables for the daemon.
func (e *env) startEnv(wantReady bool, extra ...string) *proc {
	e.t.Helper()
	cmd := exec.Command(binary, "run", "--config", e.config)
	cmd.Env = append(os.Environ(), extra...)
	return e.launch(wantReady, cmd, false)
}

// launch starts cmd, which runs the daemon (or a shell that execs it),
// with NOTIFY_SOCKET added to its environment (os.Environ() when cmd.Env is
// nil) and its output in a log file of the test's directory; when
// wantReady it waits for READY=1. anyUser makes the notify socket writable
// by every user, for a daemon that runs as another one. The daemon is
// killed when the test ends.
func (e *env) launch(wantReady bool, cmd *exec.Cmd, anyUser bool) *proc {
	e.t.Helper()
	sock := filepath.Join(e.dir, fmt.Sprintf("notify-%d.sock", rand.Int64()))
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		e.t.Fatal(err)
	}
	if anyUser {
		if err := os.Chmod(sock, 0o666); err != nil {
			e.t.Fatal(err)
		}
	}
	logf, err := os.CreateTemp(e.dir, "daemon-*.log")
	if err != nil {
		e.t.Fatal(err)
	}
	d := &proc{t: e.t, cmd: cmd, notify: conn, states: make(chan string, 10000), log: logf.Name(), exited: make(chan struct{})}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(slices.Clip(cmd.Env), "NOTIFY_SOCKET="+sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	logf.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(d.states)
				return
			}
			d.states <- string(buf[:n])
		}
	}()
	go func() { _ = cmd.Wait(); close(d.exited) }()
	e.t.Cleanup(func() { d.kill(); conn.Close() })
	if wantReady {
		d.waitState("READY=1")
	}
	return d
}

// waitState waits for an sd_notify message with the line want, skipping
// others, and returns the whole message.
func (d *proc) waitState(want string) string {
	d.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s, ok := <-d.states:
			if !ok {
				d.t.Fatalf("notify socket closed before %s", want)
			}
			for _, l := range strings.Split(s, "\n") {
				if l == want {
					return s
				}
			}
		case <-d.exited:
			d.t.Fatalf("daemon exited before %s: %s\n%s", want, d.cmd.ProcessState, d.logText())
		case <-timeout:
			d.t.Fatalf("no %s within 30s\n%s", want, d.logText())
		}
	}
}

func (d *proc) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

func (d *proc) signal(sig syscall.Signal) {
	_ = d.cmd.Process.Signal(sig)
}

// kill SIGKILLs the daemon and waits for it to be gone.
func (d *proc) kill() {
	d.signal(syscall.SIGKILL)
	<-d.exited
}

// stop SIGTERMs the daemon and waits for a clean exit.
func (d *proc) stop() {
	d.t.Helper()
	d.signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.t.Fatalf("daemon did not stop on SIGTERM\n%s", d.logText())
	}
	if !d.cmd.ProcessState.Success() {
		d.t.Fatalf("daemon exited with %s\n%s", d.cmd.ProcessState, d.logText())
	}
}

// openStore opens the daemon's SQLite file for reading next to it.
func (e *env) openStore() store.Store {
	e.t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(e.dir, "state", "schedulerd.db")})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// openPostgres opens the PostgreSQL database dsn that the test's daemons
// use, closed when the test ends.
func openPostgres(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitFor polls cond (reading the store or a file another process writes)
// every 50ms until it holds.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// witnessLine is one line a witness job appends.
type witnessLine struct {
	tick    time.Time
	run     string
	attempt int
}

func readWitness(t *testing.T, path string) []witnessLine {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []witnessLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue // a line cut by a SIGKILL mid-write
		}
		tick, err := time.Parse(time.RFC3339, fields[0])
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(fields[2])
		out = append(out, witnessLine{tick, fields[1], n})
	}
	return out
}

// TestKilledAtRandomEveryTickOnce is guarantee 1 and 2 under crashes: a job
// fires every second and appends its tick to a witness file; the daemon is
// SIGKILLed at random moments and restarted many times. Every tick from the
// first to the last must have exactly one run (catchup = "all"), none two.
// Execution is at-least-once: an attempt cut by the kill is retried, so a
// tick may show more than one attempt, but always of the same run.
func TestKilledAtRandomEveryTickOnce(t *testing.T) {
	proctest.Long(t, "SIGKILLs a daemon at random for a minute")
	e := newEnv(t)
	witness := filepath.Join(e.dir, "witness")
	e.writeConfig(fmt.Sprintf(`[[job]]
name = "tick"
schedule = "* * * * * *"
timezone = "UTC"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID $SCHEDULERD_ATTEMPT" >> %s'
catchup = "all"
misfire_grace = "1m"
retry = { max_attempts = 5, backoff = "fixed", initial_delay = "1s" }
`, witness))
	rng := testRNG(t, 1)
	var start time.Time // the first READY=1: the job's cursor exists by then
	kills := 0
	for i := 0; i < 20; i++ {
		d := e.start(true)
		if start.IsZero() {
			start = time.Now()
		}
		time.Sleep(time.Duration(rng.Int64N(int64(2500 * time.Millisecond))))
		d.kill()
		kills++
		// Sometimes stay down for a while: ticks are missed and caught up.
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}
	}
	d := e.start(true)
	end := time.Now().Truncate(time.Second)
	// Wait until every tick up to end is in the witness, then stop.
	var missing []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := map[int64]bool{}
		for _, l := range readWitness(t, witness) {
			seen[l.tick.Unix()] = true
		}
		missing = missing[:0]
		for tk := start.Truncate(time.Second).Add(time.Second); !tk.After(end); tk = tk.Add(time.Second) {
			if !seen[tk.Unix()] {
				missing = append(missing, tk.Format(time.RFC3339))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(witness)
			t.Fatalf("ticks never in the witness: %v\nwitness:\n%.2000s", missing, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.stop()

	lines := readWitness(t, witness)
	runOf := map[int64]string{} // unix second of the tick -> run id
	var retried int
	for _, l := range lines {
		if r, ok := runOf[l.tick.Unix()]; ok && r != l.run {
			t.Errorf("tick %s fired twice: runs %s and %s", l.tick.Format(time.RFC3339), r, l.run)
		}
		runOf[l.tick.Unix()] = l.run
		if l.attempt > 1 {
			retried++
		}
	}
	first := start.Truncate(time.Second).Add(time.Second)
	for tk := first; !tk.After(end); tk = tk.Add(time.Second) {
		if _, ok := runOf[tk.Unix()]; !ok {
			t.Errorf("tick %s never fired", tk.Format(time.RFC3339))
		}
	}
	// The store agrees: one run per tick, and none left unfinished.
	st := e.openStore()
	runs, err := st.RunsList(context.Background(), store.RunFilter{Job: "tick", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	perTick := map[int64]int{}
	for _, r := range runs {
		perTick[r.ScheduledAt.Unix()]++
		if r.Status == jobs.StatusRunning {
			t.Errorf("run %s left running after a clean stop", r.ID)
		}
	}
	for tk, n := range perTick {
		if n != 1 {
			t.Errorf("tick %s has %d runs", time.Unix(tk, 0).UTC().Format(time.RFC3339), n)
		}
	}
	if len(perTick) < len(runOf) {
		t.Errorf("the store has %d ticks, the witness %d", len(perTick), len(runOf))
	}
	t.Logf("%d kills over %s; %d ticks, %d witness lines, %d lines from retried attempts",
		kills, end.Sub(start).Round(time.Second), len(runOf), len(lines), retried)
}

// TestBadConfigAtStart: a wrong config is an error naming file, line and key,
// exit code 2, and nothing starts.
func TestBadConfigAtStart(t *testing.T) {
	e := newEnv(t)
	e.writeConfig(`[[job]]
name = "x"
schedule = "0 0 30 2 *"
command = ["/bin/true"]
`)
	out, err := exec.Command(binary, "run", "--config", e.config).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2\n%s", err, out)
	}
	msg := string(out)
	if !strings.Contains(msg, e.config+":11:") || !strings.Contains(msg, "schedule") {
		t.Fatalf("message does not name file:line and key:\n%s", msg)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "state", "schedulerd.db")); !os.IsNotExist(err) {
		t.Fatalf("a store was made for a bad config: %v", err)
	}
}

// TestBadReloadKeepsRunningConfig: SIGHUP with a broken file keeps the old
// jobs firing; a good file then swaps them in.
func TestBadReloadKeepsRunningConfig(t *testing.T) {
	proctest.Long(t, "jobs firing every second across SIGHUP reloads")
	e := newEnv(t)
	witness := filepath.Join(e.dir, "witness")
	job := func(name string) string {
		return fmt.Sprintf(`[[job]]
name = %q
schedule = "* * * * * *"
shell = 'echo "$SCHEDULERD_SCHEDULED_AT $SCHEDULERD_RUN_ID %s" >> %s'
`, name, name, witness)
	}
	e.writeConfig(job("first"))
	d := e.start(true)
	count := func(name string) int {
		n := 0
		for _, l := range readWitnessRaw(t, witness) {
			if strings.HasSuffix(l, " "+name) {
				n++
			}
		}
		return n
	}
	waitFor(t, "the first job to fire", 10*time.Second, func() bool { return count("first") >= 1 })

	e.writeConfig(job("first") + "[[job]]\nname = \"broken\"\nschedule = \"61 * * * *\"\n")
	d.signal(syscall.SIGHUP)
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	before := count("first")
	waitFor(t, "the first job to keep firing after a rejected reload", 10*time.Second, func() bool { return count("first") >= before+2 })
	if !strings.Contains(d.logText(), "reload rejected") {
		t.Fatalf("no rejection logged:\n%s", d.logText())
	}
	// A client finds the daemon through the file being edited: only its
	// [daemon] table is read, and that is sound.
	if out := e.ok("trigger", "first", "--json"); !strings.Contains(out, `"job":"first"`) {
		t.Fatalf("trigger through the config with a broken job: %s", out)
	}
	// Nor does a TOML mistake in a job (an edit half done): the client
	// reads [daemon] alone, and says why.
	e.writeConfig(job("first") + "[[job]]\nname = \"half\"\ntimeout =\n")
	if r := e.cli("trigger", "first", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"job":"first"`) ||
		!strings.Contains(r.stderr, "warning: ") || !strings.Contains(r.stderr, "invalid TOML") {
		t.Fatalf("trigger through a config that is not valid TOML in a job: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	e.writeConfig(job("second"))
	d.signal(syscall.SIGHUP)
	d.waitState("RELOADING=1")
	d.waitState("READY=1")
	waitFor(t, "the second job to fire after a good reload", 10*time.Second, func() bool { return count("second") >= 2 })
	stopped := count("first")
	n := count("second")
	waitFor(t, "two more ticks", 10*time.Second, func() bool { return count("second") >= n+2 })
	if got := count("first"); got > stopped+1 { // one may have been running at the swap
		t.Errorf("removed job still fires: %d -> %d", stopped, got)
	}
	d.stop()
}

func readWitnessRaw(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestSecondDaemonRefuses: a second daemon on the same state directory
// refuses to start with a clear message.
func TestSecondDaemonRefuses(t *testing.T) {
	e := newEnv(t)
	e.writeConfig(`[[job]]
name = "idle"
command = ["/bin/true"]
`)
	d := e.start(true)
	out, err := exec.Command(binary, "run", "--config", e.config).CombinedOutput()
	if err == nil {
		t.Fatalf("second daemon started:\n%s", out)
	}
	if !strings.Contains(string(out), "in use by another schedulerd") || !strings.Contains(string(out), strconv.Itoa(d.cmd.Process.Pid)) {
		t.Fatalf("unclear refusal:\n%s", out)
	}
	d.stop()
}

// TestGiBOutputKeepsDaemonMemoryBounded: a job printing 1 GiB costs the
// daemon bounded memory, and the run keeps head, tail and the byte count.
func TestGiBOutputKeepsDaemonMemoryBounded(t *testing.T) {
	proctest.Long(t, "1 GiB of output through a daemon")
	e := newEnv(t)
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	e.writeConfig(fmt.Sprintf(`[[job]]
name = "loud"
at = %s
shell = "echo start; head -c 1073741824 /dev/zero; echo; echo end"
`, at))
	d := e.start(true)
	st := e.openStore()
	var run *jobs.Run
	waitFor(t, "the loud job to finish", 120*time.Second, func() bool {
		rs, err := st.RunsList(context.Background(), store.RunFilter{Job: "loud"})
		if err != nil || len(rs) == 0 || rs[0].Status.Terminal() == false {
			return false
		}
		run = rs[0]
		return true
	})
	hwm := vmHWM(t, d.cmd.Process.Pid)
	d.stop()
	if run.Status != jobs.StatusCompleted {
		t.Fatalf("status %s: %s", run.Status, run.Error)
	}
	atts, err := st.RunAttempts(context.Background(), run.ID)
	if err != nil || len(atts) != 1 {
		t.Fatalf("attempts: %v %v", atts, err)
	}
	a := atts[0]
	if a.OutputBytes != 1<<30+len64("start\n\nend\n") || !a.Truncated || !strings.HasPrefix(a.Output, "start\n") || !strings.HasSuffix(a.Output, "\nend\n") {
		t.Fatalf("output: %d bytes, truncated %v, %d kept", a.OutputBytes, a.Truncated, len(a.Output))
	}
	t.Logf("daemon peak RSS (VmHWM) %d MiB while a job wrote 1 GiB", hwm>>20)
	if hwm > 128<<20 {
		t.Fatalf("daemon peak RSS %d MiB, want < 128 MiB", hwm>>20)
	}
}

func len64(s string) int64 { return int64(len(s)) }

// vmHWM returns the peak resident set size of a process, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
