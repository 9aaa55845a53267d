package main

import (
	"net"
	"sync"
	"time"
)

// proxy is the TCP proxy through which one node reaches PostgreSQL: a
// virtual IP that the driver moves to the new primary on a failover
// (retarget), and a link that it can cut without closing a connection
// (partition): while cut, bytes wait in the proxy and in the kernel's
// buffers, as packets a network drops are sent again once it heals, and a
// new connection is accepted but reaches nothing until then.
type proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	open   chan struct{} // closed while traffic flows
	links  map[*link]struct{}
	closed bool
}

// link is one connection through the proxy.
type link struct{ client, server net.Conn }

func (l *link) close() {
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

// newProxy listens on a free port of 127.0.0.1 and forwards to target.
func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &proxy{ln: ln, target: target, open: open, links: map[*link]struct{}{}}
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
	p.pipe(l, c, s)
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
