package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNotifyProtocol listens on its own NOTIFY_SOCKET, as systemd would:
// READY=1 comes only once the control socket answers; a good and a bad
// reload each send RELOADING=1 with MONOTONIC_USEC in the same message, then
// READY=1; SIGTERM sends STOPPING=1; no WATCHDOG=1 unless asked for.
func TestNotifyProtocol(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("[[job]]\nname = \"idle\"\ncommand = [\"/bin/true\"]\n")
	d := e.start(false)
	ready := d.waitState("READY=1")
	if !strings.Contains(ready, "STATUS=") {
		t.Errorf("READY=1 without STATUS: %q", ready)
	}
	// The socket must already work when READY=1 arrives.
	conn, err := net.Dial("unix", filepath.Join(e.dir, "state", "schedulerd.sock"))
	if err != nil {
		t.Fatalf("READY=1 before the control socket listens: %v", err)
	}
	conn.Close()
	if r := e.cli("health"); r.code != 0 {
		t.Fatalf("health right after READY=1: exit %d: %s", r.code, r.stderr)
	}

	for _, good := range []bool{true, false} {
		if !good {
			if err := os.WriteFile(e.config, []byte("[[job]]\nname = 3\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := monotonicUsec()
		d.signal(syscall.SIGHUP)
		msg := d.waitState("RELOADING=1")
		var usec int64
		for _, l := range strings.Split(msg, "\n") {
			if v, ok := strings.CutPrefix(l, "MONOTONIC_USEC="); ok {
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if usec < before || usec > monotonicUsec() {
			t.Errorf("reload (good=%v): RELOADING=1 message %q lacks a current MONOTONIC_USEC", good, msg)
		}
		d.waitState("READY=1")
	}
	d.signal(syscall.SIGTERM)
	d.waitState("STOPPING=1")
	<-d.exited
	for {
		select {
		case s, ok := <-d.states:
			if ok && strings.Contains(s, "WATCHDOG=1") {
				t.Errorf("watchdog ping without WATCHDOG_USEC: %q", s)
			}
			if ok {
				continue
			}
		default:
		}
		break
	}
}

// TestWatchdogPings: with WATCHDOG_USEC set, the scheduling loop pings at
// least twice per watchdog period. (That a stuck loop stops the pings is
// TestWatchdogPingsComeFromTheLoop in the scheduler package: the ping is
// sent by the loop's iteration hook and nothing else.)
func TestWatchdogPings(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("[[job]]\nname = \"idle\"\ncommand = [\"/bin/true\"]\n")
	d := e.startEnv(true, "WATCHDOG_USEC=3000000")
	var pings []time.Time
	deadline := time.After(7 * time.Second)
	for len(pings) < 5 {
		select {
		case s := <-d.states:
			if strings.Contains(s, "WATCHDOG=1") {
				pings = append(pings, time.Now())
			}
		case <-deadline:
			t.Fatalf("%d watchdog pings in 7s with WATCHDOG_USEC=3s", len(pings))
		}
	}
	for i := 1; i < len(pings); i++ {
		if gap := pings[i].Sub(pings[i-1]); gap > 1500*time.Millisecond {
			t.Errorf("gap of %s between pings; the period is 3s", gap)
		}
	}
	d.stop()
}

// TestReloadRightAfterReady: systemd may send SIGHUP (systemctl reload) the
// moment READY=1 arrives. The handler is installed before READY=1, so that
// signal is a reload, never the default action that ends the process.
func TestReloadRightAfterReady(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("[[job]]\nname = \"idle\"\ncommand = [\"/bin/true\"]\n")
	for i := range 3 {
		d := e.start(false)
		d.waitState("READY=1")
		d.signal(syscall.SIGHUP)
		select {
		case <-d.exited:
			t.Fatalf("start %d: the daemon ended on a SIGHUP sent right after READY=1: %s", i, d.logText())
		case s := <-waitStateAsync(d, "RELOADING=1"):
			if s == "" {
				t.Fatalf("start %d: no RELOADING=1 after the SIGHUP: %s", i, d.logText())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("start %d: no RELOADING=1 within 30s of the SIGHUP: %s", i, d.logText())
		}
		d.waitState("READY=1")
		d.stop()
	}
}

// waitStateAsync runs waitState in a goroutine; it sends "" when the notify
// socket closes before the state arrives.
func waitStateAsync(d *proc, want string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		for s := range d.states {
			if strings.Contains("\n"+s+"\n", "\n"+want+"\n") {
				ch <- s
				return
			}
		}
		ch <- ""
	}()
	return ch
}
