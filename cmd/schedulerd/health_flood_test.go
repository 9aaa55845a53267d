package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// startWithNofile is startEnv for a daemon whose descriptors are limited to
// nofile (soft and hard: the Go runtime raises the soft limit to the hard
// one). The shell execs the daemon, so the process is the daemon's.
func (e *env) startWithNofile(nofile int) *proc {
	e.t.Helper()
	return e.launch(true, exec.Command("/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), binary, "run", "--config", e.config), false)
}

// flooder keeps connections open that send nothing.
type flooder struct {
	opened atomic.Int64 // connections opened so far
	stop   func()
}

// flood keeps n connections to addr open that send nothing: one that the
// server closes is opened again at once, as a client that floods does.
// Its stop ends the flood and closes them all.
func flood(t *testing.T, addr string, n int) *flooder {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	f := &flooder{}
	opened := &f.opened
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 5 * time.Second}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				opened.Add(1)
				go func() { <-ctx.Done(); c.Close() }()
				_, _ = c.Read(make([]byte, 1)) // until the server closes it
				c.Close()
			}
		}()
	}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			t.Logf("the flood opened %d connections", opened.Load())
		})
	}
	return f
}

// openFiles counts the descriptors of process pid.
func openFiles(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestHealthFloodKeepsJobsRunning: a daemon limited to 256 descriptors
// runs jobs while 2,000 idle connections flood its health listener and
// come back as soon as they are closed (3,000 of them once took every
// descriptor of a daemon, and 17 of its 20 runs went to dead_letter with
// "too many open files"). The listener holds a bounded number of them, the
// jobs run and complete, /readyz answers on a fresh connection, and the
// control socket serves the triggers.
func TestHealthFloodKeepsJobsRunning(t *testing.T) {
	proctest.Long(t, "a flood of connections to the health listener")
	const nofile, idle, runs = 256, 2000, 20
	e := newEnv(t)
	addr := freeAddr(t)
	e.writeConfigWith(4, fmt.Sprintf("health_listen = %q", addr), `[[job]]
name = "work"
shell = 'sleep 0.2; echo done'
retry = { max_attempts = 2, backoff = "fixed", initial_delay = "1s" }
`)
	d := e.startWithNofile(nofile)
	pid := d.cmd.Process.Pid
	waitFor(t, "/readyz to answer 200", 30*time.Second, func() bool { code, _ := getReadyz(addr); return code == 200 })
	base := openFiles(pid)

	f := flood(t, addr, idle)
	defer f.stop()
	// The connections fill the listener's slots and its accept queue.
	waitFor(t, "the flood's connections to be open", time.Minute, func() bool { return f.opened.Load() >= idle })

	var mostFiles atomic.Int64
	watchDone := make(chan struct{})
	watchStop := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			if n := int64(openFiles(pid)); n > mostFiles.Load() {
				mostFiles.Store(n)
			}
			select {
			case <-watchStop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	for i := range runs {
		if r := e.cli("trigger", "work"); r.code != 0 {
			t.Fatalf("trigger %d during the flood: exit %d: %s", i, r.code, r.stderr)
		}
	}
	// A connection may be closed to make room before it is read, as a
	// flooding one is: a prober asks again.
	waitFor(t, "/readyz to answer 200 on a fresh connection during the flood", 30*time.Second, func() bool {
		code, _ := getReadyz(addr)
		return code == 200
	})
	st := e.openStore()
	var all []*jobs.Run
	waitFor(t, "every run to finish", 2*time.Minute, func() bool {
		var err error
		all, err = st.RunsList(context.Background(), store.RunFilter{Job: "work", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if !r.Status.Terminal() {
				return false
			}
		}
		return len(all) == runs
	})
	close(watchStop)
	<-watchDone
	for _, r := range all {
		if r.Status != jobs.StatusCompleted || r.Attempt != 1 {
			t.Errorf("run %s: %s after %d attempts: %s", r.ID, r.Status, r.Attempt, r.Error)
		}
	}
	t.Logf("the daemon held %d descriptors before the flood, at most %d during it", base, mostFiles.Load())
	if most := mostFiles.Load(); most > int64(base)+64 {
		t.Errorf("the daemon held up to %d descriptors during the flood, %d before it", most, base)
	}
	if strings.Contains(d.logText(), "too many open files") {
		t.Errorf("the daemon ran out of descriptors:\n%.3000s", d.logText())
	}
	f.stop()
	d.stop()
}
