package control

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvictionSparesASentRequest: when every slot is taken, the listener
// closes a silent connection, never one whose client has sent a request
// that the server has not read yet (on a busy machine the server can take
// longer than the silent age to get to it), even when that one is older.
func TestEvictionSparesASentRequest(t *testing.T) {
	raw, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(raw, 2)
	ln.silent = 0 // every new connection is old enough to be evicted
	defer ln.Close()

	dial := func() (client, server net.Conn) {
		t.Helper()
		c, err := net.Dial("unix", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	// The older connection has sent its request; the newer one nothing.
	sentC, sentS := dial()
	defer sentC.Close()
	if _, err := io.WriteString(sentC, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	silentC, silentS := dial()
	defer silentC.Close()
	_ = silentS

	// Both slots are taken: the next Accept must make room.
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			accepted <- s
		}
	}()
	thirdC, err := net.Dial("unix", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer thirdC.Close()
	select {
	case s := <-accepted:
		defer s.Close()
	case <-time.After(time.Minute):
		t.Fatal("the third connection was not accepted: no silent connection was evicted")
	}

	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := bufio.NewReader(c).ReadByte()
		return errors.Is(err, io.EOF)
	}
	if !closed(silentC) {
		t.Error("the silent connection was kept")
	}
	if closed(sentC) {
		t.Error("the connection with a request waiting to be read was evicted")
	}
	// The request is still there for the server to read.
	buf := make([]byte, 3)
	if _, err := io.ReadFull(sentS, buf); err != nil || string(buf) != "GET" {
		t.Errorf("the server read %q, %v", buf, err)
	}
}

// dropFirst is a listener that closes its first drop connections unread,
// as the daemon does to silent ones, and hands on the others.
type dropFirst struct {
	net.Listener
	drop    atomic.Int32
	dropped atomic.Int32
}

func (l *dropFirst) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.drop.Add(-1) < 0 {
			return c, err
		}
		l.dropped.Add(1) // before the client can see the close
		c.Close()
	}
}

// serveDropping serves a fixed reply on a socket whose first drop
// connections are closed unread, and counts the POSTs that reach it.
func serveDropping(t *testing.T, drop int32) (path string, ln *dropFirst, posts *atomic.Int32) {
	path = filepath.Join(t.TempDir(), "s")
	raw, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln = &dropFirst{Listener: raw}
	ln.drop.Store(drop)
	posts = new(atomic.Int32)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jobs": [], "job": "a", "paused": true}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path, ln, posts
}

// TestClientSendsAGetAgainAfterAnEviction: a GET whose connection was
// closed before any reply is sent again; a POST is not, since the client
// cannot know that the daemon did not act on it.
func TestClientSendsAGetAgainAfterAnEviction(t *testing.T) {
	ctx := context.Background()
	path, ln, _ := serveDropping(t, 2)
	c := NewClient(path)
	defer c.Close()
	if _, err := c.Jobs(ctx); err != nil {
		t.Fatalf("a GET after two closed connections: %v", err)
	}
	if n := ln.dropped.Load(); n != 2 {
		t.Fatalf("%d connections were closed, want 2", n)
	}

	// Something that hangs up on every request fails a GET after
	// maxClosedRetries more tries, not at the end of the client's budget.
	path, ln, _ = serveDropping(t, 1000)
	c1 := NewClient(path)
	defer c1.Close()
	if _, err := c1.Jobs(ctx); err == nil {
		t.Fatal("a GET to a listener that hangs up on every connection succeeded")
	}
	if n := ln.dropped.Load(); n != 1+maxClosedRetries {
		t.Fatalf("%d connections were closed, want %d", n, 1+maxClosedRetries)
	}

	path, ln, posts := serveDropping(t, 1)
	c2 := NewClient(path)
	defer c2.Close()
	if _, err := c2.Pause(ctx, "a"); err == nil {
		t.Fatal("a POST whose connection was closed unread succeeded: it was sent again")
	}
	if n := ln.dropped.Load(); n != 1 {
		t.Fatalf("%d connections were closed, want 1", n)
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("the handler saw %d POSTs, want 0", n)
	}
}
