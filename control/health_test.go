package control

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startHealth serves the health endpoints of eng on a port of 127.0.0.1.
func startHealth(t *testing.T, cfg HealthConfig) *HealthServer {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	hs, err := ListenHealthConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Close(ctx)
	})
	return hs
}

// readyz asks /readyz on a fresh connection and returns the status.
func readyz(ctx context.Context, addr string) (int, error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

// TestHealthListenerBounded: hundreds of idle TCP connections (the daemon
// once ran out of descriptors, and its jobs failed, under 3,000) never make
// the health listener hold more than MaxConns connections, and /readyz
// still answers on a fresh connection: idle ones are closed to make room
// (their header timeout here is a minute, so eviction is what frees them).
func TestHealthListenerBounded(t *testing.T) {
	const maxConns, idle = 8, 300
	eng := &fakeEngine{st: openStore(t)}
	hs := startHealth(t, HealthConfig{Engine: eng, MaxConns: maxConns, ReadHeaderTimeout: time.Minute})
	addr := hs.Addr().String()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if i%3 == 1 {
			fmt.Fprint(c, "GET /readyz HTTP/1.1\r\nHost: x\r\n") // and never the end of the headers
		}
		held = append(held, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A fresh connection not read within moments may be closed to make
	// room, as the idle ones are (on a busy machine): a prober asks again.
	for i := range 5 {
		var (
			code int
			err  error
		)
		for try := 1; try <= 5; try++ {
			if code, err = readyz(ctx, addr); err == nil {
				break
			}
			t.Logf("/readyz %d, try %d: %v", i, try, err)
		}
		if err != nil || code != http.StatusOK {
			t.Fatalf("/readyz %d next to %d idle connections: %d %v", i, idle, code, err)
		}
	}
	if peak := hs.count.peak.Load(); peak > maxConns {
		t.Errorf("the listener held %d connections at once, max %d", peak, maxConns)
	} else {
		t.Logf("at most %d connections held next to %d idle ones", peak, idle)
	}
}

// TestHealthListenerTimesOutIdle: a connection that sends nothing is closed
// after the header timeout, and one idle after a request after the idle
// timeout, even when nobody else needs its slot.
func TestHealthListenerTimesOutIdle(t *testing.T) {
	eng := &fakeEngine{st: openStore(t)}
	hs := startHealth(t, HealthConfig{Engine: eng, ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
	silent, err := net.Dial("tcp", hs.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	after, err := net.Dial("tcp", hs.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	fmt.Fprint(after, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	for name, c := range map[string]net.Conn{"silent": silent, "idle after a request": after} {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Errorf("the %s connection is still open after 30s", name)
				}
				break
			}
		}
	}
	waitUntil(t, "the listener to hold no connection", 10*time.Second, func() bool { return hs.count.open.Load() == 0 })
}

// TestHealthListenerWarnsOffLoopback: binding an address that is not a
// loopback one is logged as a warning; a loopback one is not.
func TestHealthListenerWarnsOffLoopback(t *testing.T) {
	for _, tt := range []struct {
		addr string
		warn bool
	}{{"127.0.0.1:0", false}, {"localhost:0", false}, {"0.0.0.0:0", true}, {":0", true}} {
		logs := &logBuffer{}
		hs, err := ListenHealthConfig(HealthConfig{Addr: tt.addr, Engine: &fakeEngine{st: openStore(t)},
			Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		_ = hs.Close(context.Background())
		got := logs.records("not a loopback address")
		if (len(got) == 1) != tt.warn || (tt.warn && got[0]["level"] != "WARN") {
			t.Errorf("health_listen %s: warnings %v, want a warning %v", tt.addr, got, tt.warn)
		}
	}
}

// countingEngine is a fakeEngine whose health check counts its calls and,
// while block is open, waits until it is closed.
type countingEngine struct {
	*fakeEngine
	calls atomic.Int64
	block chan struct{}
}

func (e *countingEngine) Health(ctx context.Context) Health {
	e.calls.Add(1)
	<-e.block
	return e.fakeEngine.Health(ctx)
}

// TestReadyzFloodSharesOneCheck: a flood of /readyz requests costs the
// engine one health check while one is in flight (each check is a store
// query), and the results are served for healthTTL after it.
func TestReadyzFloodSharesOneCheck(t *testing.T) {
	eng := &countingEngine{fakeEngine: &fakeEngine{st: openStore(t)}, block: make(chan struct{})}
	hs := startHealth(t, HealthConfig{Engine: eng, MaxConns: 256})
	const flood = 100
	var wg sync.WaitGroup
	codes := make(chan int, flood)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := readyz(ctx, hs.Addr().String())
			if err != nil {
				t.Error(err)
			}
			codes <- code
		}()
	}
	waitUntil(t, "the first health check", 10*time.Second, func() bool { return eng.calls.Load() >= 1 })
	close(eng.block)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("/readyz: %d", code)
		}
	}
	// Requests that came after the check ended may start another; a
	// request per check would be a hundred.
	if n := eng.calls.Load(); n > 3 {
		t.Errorf("%d concurrent /readyz requests ran %d health checks", flood, n)
	}

	start := time.Now()
	before := eng.calls.Load()
	for range 20 {
		if code, err := readyz(ctx, hs.Addr().String()); err != nil || code != http.StatusOK {
			t.Fatalf("/readyz: %d %v", code, err)
		}
	}
	// One check per healthTTL at most, and one more for the one under way.
	if n, most := eng.calls.Load()-before, int64(time.Since(start)/healthTTL)+2; n > most {
		t.Errorf("20 requests in a row ran %d health checks, more than %d", n, most)
	}
}
