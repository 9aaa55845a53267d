package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// daemonProc is a `schedulerd run` process started by the benchmark, as the
// cluster tests start them: its own config and state directory, READY=1
// awaited on a NOTIFY_SOCKET.
type daemonProc struct {
	id      string
	dir     string
	cmd     *exec.Cmd
	notify  *net.UnixConn
	ready   chan struct{}
	exited  chan struct{}
	log     string
	started time.Time
	readyAt time.Time
}

// daemonConfig is the [daemon] section of a benchmark node; jobs follow.
type daemonConfig struct {
	NodeID      string
	Store       string // the store and state_dir lines (backend.storeDaemonConfig)
	Concurrency int    // 0: the daemon's default
	Heartbeat   string // "" : the daemon's default
	Inactive    string
	Extra       string // more [daemon] lines
}

func (c daemonConfig) render(jobsTOML string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nnode_id = %q\n%s", c.NodeID, c.Store)
	if c.Concurrency > 0 {
		fmt.Fprintf(&b, "concurrency = %d\n", c.Concurrency)
	}
	if c.Heartbeat != "" {
		fmt.Fprintf(&b, "heartbeat_interval = %q\n", c.Heartbeat)
	}
	if c.Inactive != "" {
		fmt.Fprintf(&b, "inactive_threshold = %q\n", c.Inactive)
	}
	b.WriteString("shutdown_grace = \"3s\"\nlog_format = \"json\"\n")
	b.WriteString(c.Extra)
	b.WriteString("\n")
	b.WriteString(jobsTOML)
	return b.String()
}

// startDaemon writes the config into a fresh directory under parent, starts
// the daemon and waits until it sends READY=1 (or timeout).
func startDaemon(ctx context.Context, bin, parent string, cfg daemonConfig, jobsTOML string, timeout time.Duration) (*daemonProc, error) {
	dir := filepath.Join(parent, cfg.NodeID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg.Store = strings.ReplaceAll(cfg.Store, "@STATE@", filepath.Join(dir, "state"))
	config := filepath.Join(dir, "schedulerd.toml")
	if err := os.WriteFile(config, []byte(cfg.render(jobsTOML)), 0o644); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	d := &daemonProc{id: cfg.NodeID, dir: dir, notify: conn, ready: make(chan struct{}), exited: make(chan struct{}),
		log: filepath.Join(dir, "daemon.log")}
	logf, err := os.Create(d.log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer logf.Close()
	d.cmd = exec.Command(bin, "run", "--config", config)
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		conn.Close()
		return nil, err
	}
	go func() {
		buf := make([]byte, 4096)
		closed := false
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				if l == "READY=1" && !closed {
					closed = true
					d.readyAt = time.Now()
					close(d.ready)
				}
			}
		}
	}()
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-d.ready:
		return d, nil
	case <-d.exited:
		err = fmt.Errorf("node %s exited before READY=1 (%s): %s", cfg.NodeID, d.cmd.ProcessState, d.logTail())
	case <-t.C:
		err = fmt.Errorf("node %s: no READY=1 within %s: %s", cfg.NodeID, timeout, d.logTail())
	case <-ctx.Done():
		err = ctx.Err()
	}
	d.kill()
	return nil, err
}

// pid is the daemon's process id.
func (d *daemonProc) pid() int { return d.cmd.Process.Pid }

// logTail returns the last lines of the daemon's log, for errors: its
// error message, when it exited with one, is the last.
func (d *daemonProc) logTail() string {
	b, _ := os.ReadFile(d.log)
	lines := strings.Split(string(bytes.TrimSpace(b)), "\n")
	if len(lines) > 2 {
		lines = lines[len(lines)-2:]
	}
	return strings.Join(lines, " | ")
}

// kill SIGKILLs the daemon and waits until it is gone.
func (d *daemonProc) kill() {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	d.notify.Close()
}

// stop SIGTERMs the daemon and waits (SIGKILL after timeout).
func (d *daemonProc) stop(timeout time.Duration) {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		d.notify.Close()
	case <-time.After(timeout):
		d.kill()
	}
}

// cpuTicks returns the process's user plus system time in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// closing parenthesis. utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return ut + st, nil
}

// memory returns VmRSS and VmHWM of a process in bytes.
func memory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	return rss, hwm, nil
}

// ppidOf returns the parent of a process, 0 when unknown.
func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// selfCPU returns this process's user plus system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processTreeTicks sums the CPU time of pid, of the children it reaped
// (cutime, cstime) and of its live direct children: a PostgreSQL postmaster
// and its backends.
func processTreeTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var total int64
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		n, _ := strconv.ParseInt(f[k], 10, 64)
		total += n
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return total, err
	}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != pid {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += ut + st
	}
	return total, nil
}

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
