package command

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	defaultKillGrace   = 10 * time.Second
	defaultOutputLimit = 64 << 10
	shellPath          = "/bin/sh"
)

// pipeWait bounds how long a run waits for the output pipe to reach EOF once
// the job's main process has exited (background processes may still hold
// it), and again after the remaining group was sent SIGKILL. Tests shorten it.
var pipeWait = time.Second

// Spec describes one process to run.
type Spec struct {
	// Argv is the program and its arguments; it excludes Shell. A program
	// name without a slash is searched for in the job's PATH (the PATH of
	// the job's environment, not the daemon's); relative PATH entries are
	// skipped. A relative program path is taken relative to Dir.
	Argv []string
	// Shell, when set, is run as /bin/sh -c Shell.
	Shell string
	// Dir is the absolute working directory. "" means the user's home
	// directory if User is set and that directory exists, else "/".
	Dir string
	// User is the user to run as, by name or numeric uid. "" means the
	// daemon's own user.
	User string
	// Env holds the job's variables, added after the base environment (see
	// BaseEnv); they may override PATH and the other base variables.
	Env map[string]string
	// KillGrace is how long after SIGTERM to the process group SIGKILL
	// follows when a run is stopped; 0 means 10s.
	KillGrace time.Duration
	// OutputLimit is how many bytes of output are kept from the head, and
	// again from the tail; 0 means 64 KiB each.
	OutputLimit int
	// Stdin, when not nil, is what the process reads on its standard input
	// (a pipe; a process that does not read it all is not waited for);
	// nil: /dev/null.
	Stdin []byte
	// Live, when set, is given each piece of output as it is read, in
	// order, from the goroutine that drains the pipe (schedulerd logs
	// -f follows an attempt through it). It must neither keep p nor block.
	Live func(p []byte)
}

// Result is the outcome of one run.
type Result struct {
	// ExitCode is the process's exit code; -1 when it was killed by a
	// signal or never started.
	ExitCode int
	// Signal names the signal the process died by (for example
	// "terminated" or "killed"); "" when it exited normally.
	Signal string
	// Output is the bounded capture of standard output and standard error.
	Output Output
	// StartErr is non-nil when the process could not be started (bad
	// program, bad working directory, unknown user); ExitCode is then -1.
	StartErr error
	// Stopped reports that the run was stopped because the context was
	// done (timeout, cancel, shutdown).
	Stopped bool
	// Killed reports that SIGKILL was needed because the job was still
	// running KillGrace after SIGTERM.
	Killed bool
	// Duration is the wall-clock time from start until the run was over.
	Duration time.Duration
}

// prepared is a Spec resolved into exactly what is handed to the kernel.
type prepared struct {
	path string
	argv []string
	env  []string
	dir  string
	user string
	cred *syscall.Credential
}

// prepare validates spec and resolves its user, environment, working
// directory and program. Every error names the thing that is wrong.
func prepare(spec Spec) (*prepared, error) {
	p := &prepared{user: spec.User}
	switch {
	case len(spec.Argv) > 0 && spec.Shell != "":
		return nil, errors.New("invalid command: Argv and Shell are mutually exclusive")
	case spec.Shell != "":
		p.argv = []string{shellPath, "-c", spec.Shell}
	case len(spec.Argv) > 0:
		if spec.Argv[0] == "" {
			return nil, errors.New("invalid command: empty program name")
		}
		p.argv = slices.Clone(spec.Argv)
	default:
		return nil, errors.New("invalid command: neither Argv nor Shell is set")
	}

	var id *Identity
	if spec.User != "" {
		var err error
		if id, err = LookupUser(spec.User); err != nil {
			return nil, err
		}
		p.cred = credential(id)
	}

	env := BaseEnv(id)
	for k, v := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("environment variable %s: value contains a NUL byte", k)
		}
		env[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		p.env = append(p.env, k+"="+env[k])
	}

	switch {
	case spec.Dir != "":
		if !filepath.IsAbs(spec.Dir) {
			return nil, fmt.Errorf("working directory %q: not an absolute path", spec.Dir)
		}
		fi, err := os.Stat(spec.Dir)
		if err != nil {
			return nil, fmt.Errorf("working directory %q: %w", spec.Dir, unwrapPath(err))
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("working directory %q: not a directory", spec.Dir)
		}
		p.dir = spec.Dir
	case id != nil && id.Home != "" && filepath.IsAbs(id.Home) && isDir(id.Home):
		p.dir = id.Home
	default:
		p.dir = "/"
	}

	path, err := lookPath(p.argv[0], env["PATH"], p.dir)
	if err != nil {
		return nil, err
	}
	p.path = path
	return p, nil
}

// CheckSwitch returns an error when this process cannot run a job as the
// user name: root runs jobs as anyone; a daemon running as another user
// (the packaged unit runs it as the user schedulerd) runs them only as
// itself, with its own primary group.
func CheckSwitch(name string) error {
	id, err := LookupUser(name)
	if err != nil {
		return err
	}
	if os.Geteuid() == 0 || credential(id) == nil {
		return nil
	}
	return fmt.Errorf("the daemon runs as uid %d, not root, so it runs jobs only as itself, not as %q (uid %d, gid %d)",
		os.Geteuid(), name, id.UID, id.GID)
}

// credential returns the credentials to switch to for id, or nil when the
// daemon already runs as exactly that unprivileged user (an unprivileged
// process cannot call setgroups, even to its own groups).
func credential(id *Identity) *syscall.Credential {
	if os.Geteuid() != 0 && uint32(os.Getuid()) == id.UID && uint32(os.Getgid()) == id.GID {
		return nil
	}
	return &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: slices.Clone(id.Groups)}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// unwrapPath strips the *fs.PathError wrapper so messages name a path once.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lookPath resolves program like exec.LookPath would, but searches the job's
// PATH rather than the daemon's, and resolves relative paths against dir.
func lookPath(program, pathEnv, dir string) (string, error) {
	if strings.Contains(program, "/") {
		path := program
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		if err := checkExecutable(path); err != nil {
			return "", fmt.Errorf("program %q: %w", program, err)
		}
		return path, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(d) {
			continue
		}
		path := filepath.Join(d, program)
		if checkExecutable(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("program %q: not found in the job's PATH %q", program, pathEnv)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return unwrapPath(err)
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}

// Run starts the process described by spec and waits for it. It never
// returns before the process group is gone or has been sent SIGKILL and the
// output pipe is drained or closed. When ctx is done it sends SIGTERM to the
// process group, then SIGKILL to the group after spec.KillGrace, and reports
// Stopped. Run is safe for concurrent use.
func Run(ctx context.Context, spec Spec) Result {
	res := Result{ExitCode: -1}
	if err := ctx.Err(); err != nil {
		res.Stopped = true
		res.StartErr = fmt.Errorf("not started: %w", err)
		return res
	}
	p, err := prepare(spec)
	if err != nil {
		res.StartErr = err
		return res
	}
	limit := spec.OutputLimit
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	grace := spec.KillGrace
	if grace <= 0 {
		grace = defaultKillGrace
	}

	devNull, stdinW, err := openStdin(spec.Stdin)
	if err != nil {
		res.StartErr = err
		return res
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		devNull.Close()
		res.StartErr = fmt.Errorf("create output pipe: %w", err)
		return res
	}
	start := time.Now()
	proc, err := os.StartProcess(p.path, p.argv, &os.ProcAttr{
		Dir:   p.dir,
		Env:   p.env,
		Files: []*os.File{devNull, pw, pw},
		Sys:   sysProcAttr(p.cred),
	})
	// The child has its own copies; the parent's write end must go so the
	// pipe reaches EOF when the job's processes are done with it.
	devNull.Close()
	pw.Close()
	if stdinW != nil {
		if err != nil {
			stdinW.Close()
		} else {
			go feed(stdinW, spec.Stdin)
		}
	}
	if err != nil {
		pr.Close()
		if p.user != "" {
			res.StartErr = fmt.Errorf("start %q as user %q: %w", p.argv[0], p.user, err)
		} else {
			res.StartErr = fmt.Errorf("start %q: %w", p.argv[0], err)
		}
		res.Duration = time.Since(start)
		return res
	}
	pgid := proc.Pid // a session leader also leads a group of its own ID

	out := newCapture(limit)
	out.live = spec.Live
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		out.readFrom(pr)
	}()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExitedNoReap(proc.Pid)
	}()

	select {
	case <-exited:
	case <-ctx.Done():
		res.Stopped = true
		signalGroup(pgid, syscall.SIGTERM)
		res.Killed = awaitGrace(exited, readDone, grace, pgid)
		<-exited
	}

	// The main process has exited but is not reaped yet, so pgid still
	// names this job's group. Background processes get a bounded time to
	// release the output pipe; then nothing of the group may remain.
	if !waitFor(ctx.Done(), readDone, pipeWait) {
		signalGroup(pgid, syscall.SIGKILL)
		if !waitFor(nil, readDone, pipeWait) {
			// Something outside the group holds the pipe: stop reading.
			_ = pr.SetReadDeadline(time.Now())
			<-readDone
		}
	} else {
		signalGroup(pgid, syscall.SIGKILL)
	}
	pr.Close()

	state, err := proc.Wait()
	res.Duration = time.Since(start)
	res.Output = out.output()
	if err != nil {
		return res
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
		return res
	}
	res.ExitCode = state.ExitCode()
	return res
}

// openStdin returns the file the child gets as its standard input: the
// read end of a pipe whose write end (w) the caller feeds with data, or
// /dev/null when data is nil.
func openStdin(data []byte) (r, w *os.File, err error) {
	if data == nil {
		r, err = os.Open(os.DevNull)
		if err != nil {
			return nil, nil, fmt.Errorf("open %s for stdin: %w", os.DevNull, unwrapPath(err))
		}
		return r, nil, nil
	}
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("create input pipe: %w", err)
	}
	return r, w, nil
}

// feed writes data to the child's standard input and closes it. A child
// that exits without reading ends the write (EPIPE); one that neither
// reads nor exits is stopped by its timeout, which closes the pipe's
// other end with the process.
func feed(w *os.File, data []byte) {
	defer w.Close()
	_, _ = w.Write(data)
}

// sysProcAttr returns how a job's process is set up between fork and exec.
//
// Setsid starts the job in a new session, which is also a new process group
// whose ID is the job's pid: the group is what a stop signals, and the
// session has no controlling terminal, so a job of a daemon started from a
// terminal cannot open /dev/tty to type into the operator's shell
// (TIOCSTI). Setpgid must not be added: a session leader cannot change its
// group (EPERM).
//
// Pdeathsig: if the daemon dies (SIGKILL, OOM) the job's leader dies with
// it, so the attempt that the restarted daemon retries does not overlap an
// orphan. Under systemd the cgroup kill covers the rest.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
}

// awaitGrace waits until the main process has exited and the output pipe has
// reached EOF, or until grace has passed, in which case it sends SIGKILL to
// the group and reports true.
func awaitGrace(exited, readDone <-chan struct{}, grace time.Duration, pgid int) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	for exited != nil || readDone != nil {
		select {
		case <-exited:
			exited = nil
		case <-readDone:
			readDone = nil
		case <-t.C:
			signalGroup(pgid, syscall.SIGKILL)
			return true
		}
	}
	return false
}

// waitFor reports whether done is closed within d; it gives up early when
// abort is closed.
func waitFor(abort, done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-abort:
	case <-t.C:
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to every process in the group pgid. A group that is
// already gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// waitExitedNoReap blocks until process pid has exited, leaving it a zombie
// so its ID (and with it the process group ID) cannot be reused until
// os.Process.Wait reaps it.
func waitExitedNoReap(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}
