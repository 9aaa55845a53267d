package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// streamBuffer collects what a follow writes, and tells when it grows.
type streamBuffer struct {
	mu      sync.Mutex
	buf     strings.Builder
	changed chan struct{}
}

func newStreamBuffer() *streamBuffer { return &streamBuffer{changed: make(chan struct{})} }

func (b *streamBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

func (b *streamBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until what was written is want.
func (b *streamBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		b.mu.Lock()
		got, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the follow wrote %q, want %q", got, want)
		}
	}
}

// claimAs starts attempt 1 of a new run of backup as node, in the store.
func claimAs(t *testing.T, st store.Store, node string) (*jobs.Run, jobs.Fence) {
	t.Helper()
	ctx := context.Background()
	r := insertRun(t, st, "backup", "")
	rs, err := st.RunsClaim(ctx, store.ClaimParams{
		Node: node, Incarnation: node + "-inc", Jobs: store.NewJobLimits(map[string]int{"backup": 0}), Limit: 1,
	})
	if err != nil || len(rs) != 1 || rs[0].ID != r.ID {
		t.Fatalf("claim as %s: %v %v", node, rs, err)
	}
	return rs[0], jobs.Fence{RunID: r.ID, Attempt: rs[0].Attempt, Incarnation: node + "-inc"}
}

// finish ends the attempt of f, as node, storing out as its output of
// total bytes written.
func finish(t *testing.T, st store.Store, run *jobs.Run, f jobs.Fence, node, out string, total int64, truncated bool) {
	t.Helper()
	code := 0
	res := jobs.Result{ExitCode: &code, Output: out, OutputBytes: total, Truncated: truncated}
	if _, err := st.RunTransition(context.Background(), jobs.Finish(run, f, node, res, time.Now(), func() float64 { return 0 })); err != nil {
		t.Fatal(err)
	}
}

// TestOutputLiveThenStored: the output of a run before its attempt, while
// it runs on this node (what there is, from an offset, and followed as
// it is written until the attempt ends, through a silence longer than
// the server's timeouts), and once stored.
func TestOutputLiveThenStored(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := startServer(t, func(c *ServerConfig) { c.ReadTimeout, c.WriteTimeout = timeout, timeout })
	ctx := context.Background()
	pending := insertRun(t, ts.st, "adhoc", "")
	var none strings.Builder
	info, err := ts.c.Output(ctx, pending.ID, OutputParams{Follow: true}, nil, &none)
	if err != nil || info.State != OutputNone || info.Attempt != 0 || none.Len() != 0 {
		t.Fatalf("output of a run not started: %+v %q %v", info, none.String(), err)
	}

	run, f := claimAs(t, ts.st, "test-node")
	live := newFakeLive(1)
	ts.eng.setLive(run.ID, live)
	live.write("one\n")
	var now strings.Builder
	info, err = ts.c.Output(ctx, run.ID, OutputParams{}, nil, &now)
	if err != nil || info.State != OutputLive || info.Attempt != 1 || info.Node != "test-node" || info.Next != 4 || now.String() != "one\n" {
		t.Fatalf("live output without follow: %+v %q %v", info, now.String(), err)
	}
	now.Reset()
	if info, err = ts.c.Output(ctx, run.ID, OutputParams{From: 2}, nil, &now); err != nil || now.String() != "e\n" || info.Next != 4 {
		t.Fatalf("live output from 2: %+v %q %v", info, now.String(), err)
	}

	got := newStreamBuffer()
	began := make(chan OutputInfo, 1)
	ended := make(chan error, 1)
	go func() {
		_, err := ts.c.Output(ctx, run.ID, OutputParams{Follow: true, Attempt: 1}, func(i OutputInfo) { began <- i }, got)
		ended <- err
	}()
	if i := <-began; i.State != OutputLive || i.Attempt != 1 || i.Next != -1 {
		t.Fatalf("a follow of a live output begins with %+v", i)
	}
	got.waitFor(t, "one\n")
	// A job quiet for longer than the timeouts: the follow waits on. The
	// time is the subject of the test: the deadlines are the socket's.
	time.Sleep(3 * timeout)
	live.write("two\n")
	got.waitFor(t, "one\ntwo\n")
	select {
	case err := <-ended:
		t.Fatalf("the follow ended while the attempt runs: %v", err)
	default:
	}
	live.end()
	if err := <-ended; err != nil {
		t.Fatalf("the follow of an attempt that ended: %v", err)
	}

	ts.eng.setLive(run.ID, nil)
	finish(t, ts.st, run, f, "test-node", "one\ntwo\n", 8, false)
	for _, p := range []OutputParams{{}, {Follow: true}, {Attempt: 1}} {
		var stored strings.Builder
		info, err := ts.c.Output(ctx, run.ID, p, nil, &stored)
		if err != nil || info.State != OutputStored || info.Attempt != 1 || info.Next != 8 || stored.String() != "one\ntwo\n" {
			t.Fatalf("stored output (%+v): %+v %q %v", p, info, stored.String(), err)
		}
	}
	var tail strings.Builder
	if _, err := ts.c.Output(ctx, run.ID, OutputParams{From: 4}, nil, &tail); err != nil || tail.String() != "two\n" {
		t.Fatalf("stored output from 4: %q %v", tail.String(), err)
	}
	if n := len(ts.follows) + len(ts.replies); n != 0 {
		t.Errorf("%d slots still taken", n)
	}
}

// TestOutputRefusals: bad parameters, an unknown run, an attempt the run
// has not made.
func TestOutputRefusals(t *testing.T) {
	ts := startServer(t, nil)
	hc := rawClient(ts.Path())
	run := insertRun(t, ts.st, "backup", "")
	for _, tt := range []struct {
		query string
		code  int
		want  string
	}{
		{"attempt=0", 400, "attempt: want a number from 1"},
		{"attempt=x", 400, "attempt: want a number from 1"},
		{"from=-1", 400, "from: want an offset"},
		{"follow=maybe", 400, "follow: want 1 or 0"},
		{"tail=1", 400, "unknown query parameter"},
		{"attempt=1", 404, "has no attempt 1"},
	} {
		resp, err := hc.Get("http://schedulerd/v1/runs/" + run.ID + "/output?" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("?%s: %d %s, want %d and %q", tt.query, resp.StatusCode, body, tt.code, tt.want)
		}
	}
	_, err := ts.c.Output(context.Background(), "no-such-run", OutputParams{Follow: true}, nil, io.Discard)
	if !errors.Is(err, ErrUnknownRun) {
		t.Errorf("output of an unknown run: %v", err)
	}
}

// TestOutputElsewhere: an attempt that runs on another node is said to,
// with the node; followed, its stored output comes once it ends.
func TestOutputElsewhere(t *testing.T) {
	ts := startServer(t, func(c *ServerConfig) { c.WaitPoll = 10 * time.Millisecond })
	ctx := context.Background()
	run, f := claimAs(t, ts.st, "other-node")
	var now strings.Builder
	info, err := ts.c.Output(ctx, run.ID, OutputParams{}, nil, &now)
	if err != nil || info.State != OutputElsewhere || info.Node != "other-node" || info.Attempt != 1 || now.Len() != 0 {
		t.Fatalf("output of an attempt on another node: %+v %q %v", info, now.String(), err)
	}
	got := newStreamBuffer()
	began := make(chan OutputInfo, 1)
	ended := make(chan error, 1)
	go func() {
		_, err := ts.c.Output(ctx, run.ID, OutputParams{Follow: true}, func(i OutputInfo) { began <- i }, got)
		ended <- err
	}()
	if i := <-began; i.State != OutputElsewhere || i.Node != "other-node" {
		t.Fatalf("a follow of another node's attempt begins with %+v", i)
	}
	finish(t, ts.st, run, f, "other-node", "done there\n", 11, false)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if got.String() != "done there\n" {
		t.Fatalf("the follow of another node's attempt wrote %q", got.String())
	}
}

// TestStoredFrom: an offset in the output as written maps onto a stored
// output that was truncated: the head from it, the marker counted from
// it, the tail.
func TestStoredFrom(t *testing.T) {
	// 10 bytes written, 3 kept at each end: "abc" ... "hij".
	a := &store.ClippedAttempt{Attempt: jobs.Attempt{Output: "abc" + truncationMarker(4) + "hij", OutputBytes: 10, Truncated: true}}
	for _, tt := range []struct {
		from int64
		want string
	}{
		{0, "abc\n[... 4 bytes truncated ...]\nhij"},
		{1, "bc\n[... 4 bytes truncated ...]\nhij"},
		{3, "\n[... 4 bytes truncated ...]\nhij"},
		{5, "\n[... 2 bytes truncated ...]\nhij"},
		{7, "hij"},
		{9, "j"},
		{10, ""},
		{99, ""},
	} {
		if got := storedFrom(a, tt.from); got != tt.want {
			t.Errorf("from %d: %q, want %q", tt.from, got, tt.want)
		}
	}
	// A head and tail of 1000 bytes around a count of many digits.
	big := strings.Repeat("h", 1000) + truncationMarker(123456789) + strings.Repeat("t", 1000)
	b := &store.ClippedAttempt{Attempt: jobs.Attempt{Output: big, OutputBytes: 123456789 + 2000, Truncated: true}}
	if got := storedFrom(b, 123456789+1500); got != strings.Repeat("t", 500) {
		t.Errorf("from within a long tail: %d bytes", len(got))
	}
	plain := &store.ClippedAttempt{Attempt: jobs.Attempt{Output: "hello", OutputBytes: 5}}
	if got := storedFrom(plain, 2); got != "llo" {
		t.Errorf("from 2 of an output kept whole: %q", got)
	}
}

// rawFollow sends a follow request on a connection of its own and reads
// the reply's status line and headers (not its body).
func rawFollow(t *testing.T, path, id string) (net.Conn, *http.Response) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/runs/%s/output?follow=1 HTTP/1.1\r\nHost: schedulerd\r\n\r\n", id)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return conn, resp
}

// TestOutputFollowsBounded: at most MaxFollows follows at once, the next
// is refused busy; a follower that goes away, one that never reads and
// the server's close each end their follow, free its slot and leave no
// goroutine behind; the attempt's output is never held up by them.
func TestOutputFollowsBounded(t *testing.T) {
	ts := startServer(t, func(c *ServerConfig) { c.MaxFollows, c.WriteTimeout = 2, 500*time.Millisecond })
	run, _ := claimAs(t, ts.st, "test-node")
	live := newFakeLive(1)
	ts.eng.setLive(run.ID, live)
	base := runtime.NumGoroutine()

	gone, resp := rawFollow(t, ts.Path(), run.ID)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(OutputStateHeader) != "live" {
		t.Fatalf("a follow: %s %v", resp.Status, resp.Header)
	}
	stuck, _ := rawFollow(t, ts.Path(), run.ID)
	defer stuck.Close()
	waitUntil(t, "two follows to wait for output", 10*time.Second, func() bool { return live.followers() == 2 })
	hc := rawClient(ts.Path())
	busy, err := hc.Get("http://schedulerd/v1/runs/" + run.ID + "/output?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	busy.Body.Close()
	if busy.StatusCode != http.StatusTooManyRequests || busy.Header.Get("Retry-After") != "1" {
		t.Fatalf("a follow past the budget: %s", busy.Status)
	}
	hc.CloseIdleConnections()

	// The follower that goes away ends its follow.
	gone.Close()
	waitUntil(t, "the follow of a client gone to end", 10*time.Second, func() bool { return len(ts.follows) == 1 })

	// The one that never reads: the output goes on being written, the
	// follow is cut off once its writes wait past WriteTimeout.
	chunk := strings.Repeat("x", 64<<10)
	for range 256 {
		live.write(chunk)
	}
	waitUntil(t, "the follow of a client that does not read to end", 30*time.Second, func() bool { return len(ts.follows) == 0 })
	waitUntil(t, "the goroutines of the follows that ended to end", 10*time.Second, func() bool {
		return runtime.NumGoroutine() <= base
	})

	// Close ends a follow that waits for output.
	run2, _ := claimAs(t, ts.st, "test-node")
	live2 := newFakeLive(1)
	ts.eng.setLive(run2.ID, live2)
	waiting, _ := rawFollow(t, ts.Path(), run2.ID)
	defer waiting.Close()
	waitUntil(t, "a follow to wait for output", 10*time.Second, func() bool { return live2.followers() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Close(ctx); err != nil {
		t.Fatalf("Close with a follow waiting: %v", err)
	}
	waitUntil(t, "the goroutines of the follows to end", 10*time.Second, func() bool {
		return runtime.NumGoroutine() <= base
	})
}
