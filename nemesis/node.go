package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

// stateSize is the size of the tmpfs under a node's state directory, which
// the disk-full fault fills: blocks and inodes.
const stateSize = "size=2m,nr_inodes=256,mode=0700"

// node is one `schedulerd run` process of the cluster, restarted as the
// nemesis kills it. With a private state directory (tmpfs) it runs in a
// mount namespace of its own (unshare -m), whose tmpfs only it and its
// jobs see: the driver reaches it through /proc/PID/root.
type node struct {
	id      string
	dir     string
	config  string
	state   string
	socket  string
	logPath string
	bin     string
	tmpfs   bool
	proxy   *proxy

	// exited is told of exits that the driver did not ask for.
	exited func(Exit)
	// life is held by whoever starts, kills, stops or fills the node, so
	// that one thing at a time does.
	life sync.Mutex

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	stopped bool          // the driver killed or stopped it on purpose
	client  *control.Client
}

// start starts the daemon and waits for READY=1.
func (n *node) start(ctx context.Context) error {
	notifyPath := filepath.Join(n.dir, "notify.sock")
	_ = os.Remove(notifyPath)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	var cmd *exec.Cmd
	if n.tmpfs {
		cmd = exec.Command("unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
			`mount -t tmpfs -o "$1" nemesis "$0" && exec "$2" run --config "$3"`, n.state, stateSize, n.bin, n.config)
	} else {
		cmd = exec.Command(n.bin, "run", "--config", n.config)
	}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The node dies with the driver.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.stopped = cmd, done, false
	n.mu.Unlock()
	go n.wait(cmd, done)
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(buf[:k]), "\n") {
				if l == "READY=1" {
					close(ready)
					return
				}
			}
		}
	}()
	t := time.NewTimer(2 * time.Minute)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before READY=1: %s", n.id, n.logTail())
	case <-t.C:
		n.kill()
		return fmt.Errorf("%s: no READY=1 within 2m: %s", n.id, n.logTail())
	case <-ctx.Done():
		n.kill()
		return ctx.Err()
	}
}

func (n *node) wait(cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	n.mu.Lock()
	stopped := n.stopped
	n.mu.Unlock()
	close(done)
	if !stopped && n.exited != nil {
		status := "exit 0"
		if err != nil {
			status = err.Error()
		}
		n.exited(Exit{Node: n.id, At: time.Now(), Status: status, Log: n.logTail()})
	}
}

// running reports whether the process runs, with its pid.
func (n *node) running() (int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0, false
	}
	select {
	case <-n.done:
		return 0, false
	default:
		return n.cmd.Process.Pid, true
	}
}

// signal sends sig to the daemon, marking it stopped on purpose first
// when the signal ends it.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return errors.New("not started")
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		n.stopped = true
	}
	return n.cmd.Process.Signal(sig)
}

// kill SIGKILLs the daemon and waits until it is gone.
func (n *node) kill() {
	if n.signal(syscall.SIGKILL) == nil {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		<-done
	}
}

// terminate SIGTERMs the daemon and waits up to timeout, then SIGKILLs it.
// It reports whether it ended within the timeout.
func (n *node) terminate(timeout time.Duration) bool {
	if _, ok := n.running(); !ok {
		return true
	}
	_ = n.signal(syscall.SIGCONT)
	if n.signal(syscall.SIGTERM) != nil {
		return true
	}
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		n.kill()
		return false
	}
}

// statePath is path (inside the state directory) as the driver reaches
// it: through the daemon's own mount namespace when it has one.
func (n *node) statePath(name string) (string, bool) {
	pid, ok := n.running()
	if !ok {
		return "", false
	}
	p := filepath.Join(n.state, name)
	if n.tmpfs {
		p = fmt.Sprintf("/proc/%d/root%s", pid, p)
	}
	return p, true
}

// api returns a client of the node's socket.
func (n *node) api() *control.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client == nil {
		n.client = control.NewClient(n.socket)
		n.client.Timeout = 5 * time.Second
	}
	return n.client
}

// logTail returns the last lines of the node's log.
func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	lines := strings.Split(string(bytes.TrimSpace(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}
