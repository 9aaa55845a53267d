package main

import (
	"bufio"
	"net"
	"testing"
)

// TestProxyCountsRoundTrips: the proxy forwards both ways, and counts a
// round trip each time the client sends after the server has, only while
// counting; bytes the client sends in several writes before an answer
// are one round trip.
func TestProxyCountsRoundTrips(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "end\n" {
				if _, err := c.Write([]byte("ok\n")); err != nil {
					return
				}
			}
		}
	}()
	p, err := startProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	trip := func(parts ...string) {
		t.Helper()
		for _, s := range parts {
			if _, err := c.Write([]byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := r.ReadString('\n'); err != nil || got != "ok\n" {
			t.Fatalf("answer %q, %v", got, err)
		}
	}
	trip("end\n") // not counted
	p.counting.Store(true)
	for range 5 {
		trip("a\n", "b\n", "end\n")
	}
	p.counting.Store(false)
	trip("end\n")
	if got := p.turns.Load(); got != 5 {
		t.Fatalf("%d round trips counted, want 5", got)
	}
}
