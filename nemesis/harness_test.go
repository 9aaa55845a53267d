package main

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with prefix and the line.
func echoServer(t *testing.T, prefix string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(prefix + sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask writes a line and reads the answer, waiting at most wait.
func ask(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	s, err := r.ReadString('\n')
	return strings.TrimSpace(s), err
}

// TestProxy: a cut holds the bytes of a connection without closing it and
// delivers them once healed; a connection made during a cut reaches the
// server only then; a retarget closes the connections and sends new ones
// to the new server.
func TestProxy(t *testing.T) {
	a, b := echoServer(t, "a:"), echoServer(t, "b:")
	p, err := newProxy(a, false)
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
	if got, err := ask(c, r, "1", 5*time.Second); got != "a:1" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	p.cut()
	if got, err := ask(c, r, "2", 300*time.Millisecond); err == nil {
		t.Fatalf("an answer through a cut proxy: %q", got)
	}
	late, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	lr := bufio.NewReader(late)
	if got, err := ask(late, lr, "3", 300*time.Millisecond); err == nil {
		t.Fatalf("a connection made during the cut answered: %q", got)
	}
	p.heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); strings.TrimSpace(got) != "a:2" {
		t.Fatalf("the bytes held by the cut: %q %v", got, err)
	}
	_ = late.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := lr.ReadString('\n'); strings.TrimSpace(got) != "a:3" {
		t.Fatalf("the connection made during the cut: %q %v", got, err)
	}
	p.retarget(b)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a connection survived the retarget")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := ask(c2, bufio.NewReader(c2), "4", 5*time.Second); got != "b:4" {
		t.Fatalf("after the retarget: %q %v", got, err)
	}
}

func sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestReceiver: the receiver logs what it answers 200 with whether the
// signature holds, refuses what is not an event, answers nothing while it
// hangs and refuses connections while it is down.
func TestReceiver(t *testing.T) {
	secret := []byte("s3cret")
	rcv, err := newReceiver(secret, filepath.Join(t.TempDir(), "deliveries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	post := func(id string, body []byte, sig string, timeout time.Duration) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, rcv.URL(), bytes.NewReader(body))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		if sig == "" {
			sig = sign(secret, ts, body)
		}
		req.Header.Set("X-Schedulerd-Id", id)
		req.Header.Set("X-Schedulerd-Timestamp", ts)
		req.Header.Set("X-Schedulerd-Signature", sig)
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	event := func(id string) []byte { return []byte(`{"id":"` + id + `","event":"failed","job":"j"}`) }
	if code, err := post("n1", event("n1"), "", 5*time.Second); code != 200 {
		t.Fatalf("a signed event: %d %v", code, err)
	}
	if code, err := post("n2", event("n2"), "sha256=00", 5*time.Second); code != 200 {
		t.Fatalf("a badly signed event: %d %v", code, err)
	}
	if code, _ := post("n3", []byte("not json"), "", 5*time.Second); code != http.StatusBadRequest {
		t.Fatalf("not an event: %d", code)
	}
	if code, _ := post("n4", bytes.Repeat([]byte("x"), 100<<10), "", 5*time.Second); code != http.StatusBadRequest {
		t.Fatalf("a body of 100 KiB: %d", code)
	}
	if err := rcv.setMode(receiverHang); err != nil {
		t.Fatal(err)
	}
	if code, err := post("n5", event("n5"), "", 300*time.Millisecond); err == nil {
		t.Fatalf("an answer while hanging: %d", code)
	}
	if err := rcv.setMode(receiverDown); err != nil {
		t.Fatal(err)
	}
	if code, err := post("n6", event("n6"), "", 2*time.Second); err == nil {
		t.Fatalf("an answer while down: %d", code)
	}
	if err := rcv.setMode(receiverUp); err != nil {
		t.Fatal(err)
	}
	if code, err := post("n7", event("n7"), "", 5*time.Second); code != 200 {
		t.Fatalf("up again: %d %v", code, err)
	}
	var got []string
	for _, d := range rcv.taken() {
		got = append(got, d.ID+"="+strconv.FormatBool(d.SignatureOK))
	}
	if want := "n1=true n2=false n7=true"; strings.Join(got, " ") != want {
		t.Errorf("deliveries %q, want %q", strings.Join(got, " "), want)
	}
}

// message is a message of PostgreSQL's protocol: a type byte, a length
// that counts itself, the body.
func message(typ byte, body string) []byte {
	m := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(m[1:], uint32(4+len(body)))
	return append(m, body...)
}

// answerServer answers each byte it reads with a DataRow, a
// CommandComplete and a ReadyForQuery, written at once, as PostgreSQL
// answers a statement.
func answerServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	answer := slices.Concat(message('D', "\x00\x01\x00\x00\x00\x01x"), message('C', "UPDATE 1\x00"), message('Z', "I"))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				for {
					if _, err := c.Read(b); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProxyLosesAnswers: while lossy, the proxy closes the connection
// instead of forwarding one CommandComplete in loseOneIn, and forwards the
// other answers whole; otherwise it forwards every one.
func TestProxyLosesAnswers(t *testing.T) {
	p, err := newProxy(answerServer(t), true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := slices.Concat(message('D', "\x00\x01\x00\x00\x00\x01x"), message('C', "UPDATE 1\x00"), message('Z', "I"))
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// statement sends a statement and reads its answer.
	statement := func(c net.Conn) error {
		if _, err := c.Write([]byte{'q'}); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("answer %q, want %q", got, want)
		}
		return nil
	}
	c := dial()
	for i := range 2 * loseOneIn {
		if err := statement(c); err != nil {
			t.Fatalf("statement %d, not lossy: %v", i+1, err)
		}
	}
	p.lose(true)
	for i := 1; i < loseOneIn; i++ {
		if err := statement(c); err != nil {
			t.Fatalf("statement %d, lossy: %v", i, err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{'q'}); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("answer %d, lossy: %q, %v; want the connection closed, and no answer", loseOneIn, got, err)
	}
	c = dial()
	if err := statement(c); err != nil {
		t.Fatalf("a new connection, lossy: %v", err)
	}
	if lost, answers := p.lose(false); lost != 1 || answers != loseOneIn+1 {
		t.Fatalf("lost %d of %d answers, want 1 of %d", lost, answers, loseOneIn+1)
	}
	for i := range 2 * loseOneIn {
		if err := statement(c); err != nil {
			t.Fatalf("statement %d, no longer lossy: %v", i+1, err)
		}
	}
}
