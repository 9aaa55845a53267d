package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// proxy is the TCP proxy through which one node reaches PostgreSQL: a
// virtual IP that the driver moves to the new primary on a failover
// (retarget), and a link that it can cut without closing a connection
// (partition): while cut, bytes wait in the proxy and in the kernel's
// buffers, as packets a network drops are sent again once it heals, and a
// new connection is accepted but reaches nothing until then. It can also
// lose answers (lossy): close a connection instead of forwarding the end of
// a statement's answer, which the server has carried out (and, outside a
// transaction, committed), as a connection that breaks as the server
// answers.
type proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	open   chan struct{} // closed while traffic flows
	links  map[*link]struct{}
	closed bool
	// postgres: what the server sends is PostgreSQL's protocol, whose
	// answers the proxy can lose. lossy: one answer in loseOneIn is lost;
	// answers counts the answers seen while lossy, lost those lost.
	postgres      bool
	lossy         bool
	answers, lost int
}

// loseOneIn is how many of the answers that end a statement the proxy
// forwards while lossy for each one it loses.
const loseOneIn = 5

// link is one connection through the proxy.
type link struct{ client, server net.Conn }

func (l *link) close() {
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

// newProxy listens on a free port of 127.0.0.1 and forwards to target,
// a PostgreSQL server when postgres is set.
func newProxy(target string, postgres bool) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &proxy{ln: ln, target: target, open: open, links: map[*link]struct{}{}, postgres: postgres}
	go p.accept()
	return p, nil
}

// Addr is where the node connects.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	l := &link{client: c}
	if !p.add(l) {
		c.Close()
		return
	}
	p.wait()
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	s, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		p.drop(l)
		return
	}
	p.mu.Lock()
	if _, ok := p.links[l]; !ok {
		// Retargeted or closed while it dialled.
		p.mu.Unlock()
		s.Close()
		return
	}
	l.server = s
	p.mu.Unlock()
	go p.pipe(l, s, c)
	if p.postgres {
		p.answer(l, c, s)
	} else {
		p.pipe(l, c, s)
	}
}

// answer copies PostgreSQL's messages from the server (src) to the client
// (dst), holding each while the link is cut. While the proxy is lossy, it
// closes the link instead of forwarding one in loseOneIn CommandComplete
// messages: the client never hears that its statement was carried out,
// nor, outside a transaction, that it was committed (the server commits
// at the end of the extended protocol's Sync, which comes with the
// statement, before it flushes its answer), and a COMMIT's answer is a
// CommandComplete too. The client speaks first and without TLS
// (sslmode=disable), so everything the server sends is a message: a type
// byte and a length that counts itself.
func (p *proxy) answer(l *link, dst, src net.Conn) {
	r := bufio.NewReaderSize(src, 32<<10)
	w := bufio.NewWriterSize(dst, 32<<10)
	head := make([]byte, 5)
	var body []byte
	for {
		if _, err := io.ReadFull(r, head); err != nil {
			break
		}
		n := int64(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 || n > 1<<30 {
			break // not PostgreSQL's protocol
		}
		if int64(cap(body)) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			break
		}
		if head[0] == 'C' && p.loses() {
			break
		}
		p.wait()
		if _, err := w.Write(head); err != nil {
			break
		}
		if _, err := w.Write(body); err != nil {
			break
		}
		// Flush before a read that would wait: what came together goes
		// together, and nothing waits for more.
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				break
			}
		}
	}
	p.drop(l)
}

// loses says whether to lose the answer at hand.
func (p *proxy) loses() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lossy {
		return false
	}
	p.answers++
	if p.answers%loseOneIn != 0 {
		return false
	}
	p.lost++
	return true
}

// lose makes the proxy lose answers, or stop losing them (on false): then
// it returns how many it lost of how many it saw since it started.
func (p *proxy) lose(on bool) (lost, answers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lossy = on
	lost, answers = p.lost, p.answers
	if on {
		p.lost, p.answers = 0, 0
	}
	return lost, answers
}

// pipe copies from src to dst, holding each chunk while the link is cut.
func (p *proxy) pipe(l *link, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			// PostgreSQL's protocol needs no half-close: the end of
			// one side ends the link.
			break
		}
	}
	p.drop(l)
}

func (p *proxy) add(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

// wait returns while traffic flows, else when it flows again.
func (p *proxy) wait() {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
}

// cut stops the traffic (a partition) until heal.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// heal lets the traffic flow again.
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// retarget sends new connections to target and closes the present ones,
// as a virtual IP that moved to another server does.
func (p *proxy) retarget(target string) {
	p.mu.Lock()
	p.target = target
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	for l := range links {
		l.close()
	}
}

// Close stops the proxy and closes its connections.
func (p *proxy) Close() {
	p.mu.Lock()
	p.closed = true
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	p.ln.Close()
	p.heal()
	for l := range links {
		l.close()
	}
}
