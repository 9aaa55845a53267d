package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/proctest"
	"github.com/schedulerd/schedulerd/store"
)

// TestFloodAndJunk: while a job fires every second, the control socket gets
// hundreds of silent connections and a stream of malformed, oversized and
// unknown requests. The daemon stays up, every tick fires on time, and no
// junk request changes anything.
func TestFloodAndJunk(t *testing.T) {
	proctest.Long(t, "a flood of connections and junk requests")
	e := newEnv(t)
	e.writeConfig(`[[job]]
name = "tick"
schedule = "* * * * * *"
command = ["/bin/true"]

[[job]]
name = "victim"
command = ["/bin/true"]
`)
	d := e.start(true)
	sock := filepath.Join(e.dir, "state", "schedulerd.sock")

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	// 300 connections that send nothing, or half a request, and hang.
	var silent []net.Conn
	for i := 0; i < 300; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			continue // the backlog may be full; that is the point
		}
		if i%2 == 0 {
			fmt.Fprintf(c, "POST /v1/jobs/victim/trigger HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
		}
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	junk := []string{
		"POST /v1/jobs/victim/trigger HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{not json",
		"POST /v1/jobs/victim/trigger HTTP/1.1\r\nHost: x\r\nContent-Length: 21\r\n\r\n{\"dedup_idx\": \"oops\"}",
		"POST /v1/jobs/victim/trigger HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n" + strings.Repeat("x", 200000),
		"POST /v1/jobs/victim/trigger HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n\r\n{\"not_before\": \"yesterday-ish\", \"x\": 1}    ",
		"GET /v1/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
		"DELETE /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n",
		"\x00\x01\x02garbage\r\n\r\n",
		"GET /v1/runs?limit=-5 HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/runs/../cancel HTTP/1.1\r\nHost: x\r\n\r\n",
	}
	var sent, answered4xx atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 400 && ctx.Err() == nil; i++ { // bounded in count and time
				c, err := net.DialTimeout("unix", sock, time.Second)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				_, _ = c.Write([]byte(junk[(w+i)%len(junk)]))
				sent.Add(1)
				if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.Contains(line, " 4") {
					answered4xx.Add(1)
				}
				c.Close()
			}
		}(w)
	}
	floodStart := time.Now()
	// A legitimate command in the middle of the flood is served.
	time.Sleep(time.Second) // let the flood build up; the flood itself is bounded by ctx
	began := time.Now()
	if r := e.cli("jobs", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"victim"`) {
		t.Errorf("jobs during the flood: exit %d: %s", r.code, r.stderr)
	}
	served := time.Since(began)
	wg.Wait()
	floodEnd := time.Now()
	if r := e.cli("health"); r.code != 0 {
		t.Fatalf("daemon unhealthy after the flood: %s %s", r.stdout, r.stderr)
	}
	d.stop()

	if answered4xx.Load() == 0 {
		t.Errorf("no junk request was answered during the flood (%d sent)", sent.Load())
	}
	// Every tick during the flood fired, and on time.
	type logLine struct {
		Msg  string `json:"msg"`
		Tick string `json:"tick"`
		Late string `json:"late"`
	}
	f, err := os.Open(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fired := map[int64]time.Duration{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "tick fired" {
			continue
		}
		tk, err1 := time.Parse(time.RFC3339, l.Tick)
		late, err2 := time.ParseDuration(l.Late)
		if err1 == nil && err2 == nil {
			fired[tk.Unix()] = late
		}
	}
	var worst time.Duration
	for s := floodStart.Unix() + 1; s < floodEnd.Unix(); s++ {
		late, ok := fired[s]
		if !ok {
			t.Errorf("tick %s did not fire during the flood", time.Unix(s, 0).UTC().Format(time.RFC3339))
		}
		worst = max(worst, late)
	}
	if worst > time.Second {
		t.Errorf("a tick fired %s late during the flood", worst)
	}
	// Junk changed nothing: the victim job was never triggered.
	st := e.openStore()
	runs, err := st.RunsList(context.Background(), store.RunFilter{Job: "victim"})
	if err != nil || len(runs) != 0 {
		t.Fatalf("junk made %d runs of the victim job (%v)", len(runs), err)
	}
	t.Logf("%d silent connections, %d junk requests (%d answered 4xx) over %s; a real command took %s; ticks fired at most %s late",
		len(silent), sent.Load(), answered4xx.Load(), floodEnd.Sub(floodStart).Round(time.Millisecond), served.Round(time.Millisecond), worst)
}

// TestSecondDaemonOnSameSocketRefuses: a daemon with its own state but the
// socket path of a live one refuses to start and says why.
func TestSecondDaemonOnSameSocketRefuses(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("[[job]]\nname = \"idle\"\ncommand = [\"/bin/true\"]\n")
	d := e.start(true)
	other := newEnv(t)
	other.writeConfig("[[job]]\nname = \"idle\"\ncommand = [\"/bin/true\"]\n")
	cfg, _ := os.ReadFile(other.config)
	cfg = []byte(strings.Replace(string(cfg), "[daemon]\n", fmt.Sprintf("[daemon]\nsocket = %q\n", filepath.Join(e.dir, "state", "schedulerd.sock")), 1))
	if err := os.WriteFile(other.config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	o := other.start(false)
	select {
	case <-o.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("second daemon on the same socket kept running")
	}
	if o.cmd.ProcessState.Success() || !strings.Contains(o.logText(), "another schedulerd is listening") {
		t.Fatalf("unclear refusal: %s\n%s", o.cmd.ProcessState, o.logText())
	}
	if r := e.cli("health"); r.code != 0 {
		t.Fatalf("first daemon hurt by the second: %s", r.stderr)
	}
	d.stop()
}
