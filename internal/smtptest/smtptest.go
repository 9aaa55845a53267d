// Package smtptest is a small SMTP server for tests: it takes mail as a
// real relay does (EHLO, STARTTLS or TLS from the first byte, AUTH PLAIN
// and LOGIN, MAIL, RCPT, DATA), keeps each message as it arrived on the
// wire, and records every command with whether it came inside TLS, so a
// test can check what a client sent in clear.
package smtptest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
)

// Options say what the server offers.
type Options struct {
	// TLS is the server's certificate: with StartTLS it offers STARTTLS,
	// with Implicit it speaks TLS from the first byte.
	TLS      *tls.Config
	StartTLS bool
	Implicit bool
	// Users, when set, are the user names and passwords AUTH takes; the
	// server then offers AUTH PLAIN LOGIN (Mechanisms, when set) inside
	// TLS, or also in clear with AuthInClear, and refuses MAIL before it.
	Users       map[string]string
	Mechanisms  []string
	AuthInClear bool
}

// Message is a message the server took.
type Message struct {
	From string
	To   []string
	// Data is the message as the client sent it, dot-unstuffed, with its
	// line ends as they came.
	Data []byte
	// TLS says whether it came inside TLS; User is the user logged in.
	TLS  bool
	User string
}

// Command is a command line the server read ("AUTH PLAIN ..." with its
// credentials), and whether it came inside TLS.
type Command struct {
	Line string
	TLS  bool
}

// Server is a running test server.
type Server struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string
	// Messages receives each message taken.
	Messages chan *Message

	opts Options
	ln   net.Listener
	wg   sync.WaitGroup

	mu       sync.Mutex
	commands []Command
	conns    map[net.Conn]bool
}

// Start starts a server on a port of 127.0.0.1; the test's cleanup stops
// it.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Mechanisms) == 0 {
		opts.Mechanisms = []string{"PLAIN", "LOGIN"}
	}
	s := &Server{Addr: ln.Addr().String(), Messages: make(chan *Message, 100), opts: opts, ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and ends its connections.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Commands returns the command lines read so far.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Command(nil), s.commands...)
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			s.serve(c)
		}()
	}
}

// maxData bounds a message.
const maxData = 16 << 20

// session is one connection's state.
type session struct {
	s     *Server
	conn  net.Conn
	r     *bufio.Reader
	w     *textproto.Writer
	tls   bool
	user  string
	from  string
	to    []string
	greet bool
}

func (s *Server) serve(c net.Conn) {
	ss := &session{s: s, conn: c}
	if s.opts.Implicit {
		tc := tls.Server(c, s.opts.TLS)
		if tc.Handshake() != nil {
			return
		}
		ss.conn, ss.tls = tc, true
	}
	ss.wrap()
	ss.reply("220 smtptest.localhost ESMTP ready")
	for {
		line, err := ss.readLine()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.commands = append(s.commands, Command{Line: line, TLS: ss.tls})
		s.mu.Unlock()
		verb, arg, _ := strings.Cut(line, " ")
		if !ss.command(strings.ToUpper(verb), arg) {
			return
		}
	}
}

func (ss *session) wrap() {
	ss.r = bufio.NewReader(ss.conn)
	ss.w = textproto.NewWriter(bufio.NewWriter(ss.conn))
}

func (ss *session) reply(lines ...string) {
	for _, l := range lines {
		_ = ss.w.PrintfLine("%s", l)
	}
}

// readLine reads a command line without its line end.
func (ss *session) readLine() (string, error) {
	l, err := ss.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(l, "\r\n"), nil
}

// command runs one command; false ends the connection.
func (ss *session) command(verb, arg string) bool {
	o := ss.s.opts
	switch verb {
	case "EHLO":
		ss.greet = true
		lines := []string{"250-smtptest.localhost", "250-8BITMIME", "250-SIZE 16777216"}
		if o.StartTLS && !ss.tls {
			lines = append(lines, "250-STARTTLS")
		}
		if o.Users != nil && (ss.tls || o.AuthInClear) {
			lines = append(lines, "250-AUTH "+strings.Join(o.Mechanisms, " "))
		}
		lines = append(lines, "250 HELP")
		ss.reply(lines...)
	case "HELO":
		ss.greet = true
		ss.reply("250 smtptest.localhost")
	case "STARTTLS":
		if !o.StartTLS || ss.tls {
			ss.reply("502 5.5.1 STARTTLS not offered")
			return true
		}
		ss.reply("220 2.0.0 ready to start TLS")
		tc := tls.Server(ss.conn, o.TLS)
		if tc.Handshake() != nil {
			return false
		}
		ss.conn, ss.tls, ss.greet, ss.user = tc, true, false, ""
		ss.wrap()
	case "AUTH":
		ss.auth(arg)
	case "MAIL":
		switch {
		case !ss.greet:
			ss.reply("503 5.5.1 EHLO first")
		case o.Users != nil && ss.user == "":
			ss.reply("530 5.7.0 Authentication required")
		default:
			from, ok := angle(arg, "FROM:")
			if !ok {
				ss.reply("501 5.5.4 syntax: MAIL FROM:<address>")
				return true
			}
			ss.from, ss.to = from, nil
			ss.reply("250 2.1.0 ok")
		}
	case "RCPT":
		to, ok := angle(arg, "TO:")
		if !ok || ss.from == "" {
			ss.reply("501 5.5.4 syntax: RCPT TO:<address>, after MAIL")
			return true
		}
		ss.to = append(ss.to, to)
		ss.reply("250 2.1.5 ok")
	case "DATA":
		if len(ss.to) == 0 {
			ss.reply("503 5.5.1 RCPT first")
			return true
		}
		ss.reply("354 end data with <CR><LF>.<CR><LF>")
		data, err := ss.readData()
		if err != nil {
			if errors.Is(err, errTooLarge) {
				ss.reply("552 5.3.4 message too large")
				return true
			}
			return false
		}
		ss.s.Messages <- &Message{From: ss.from, To: ss.to, Data: data, TLS: ss.tls, User: ss.user}
		ss.from, ss.to = "", nil
		ss.reply("250 2.0.0 queued")
	case "RSET":
		ss.from, ss.to = "", nil
		ss.reply("250 2.0.0 ok")
	case "NOOP":
		ss.reply("250 2.0.0 ok")
	case "QUIT":
		ss.reply("221 2.0.0 bye")
		return false
	default:
		ss.reply("502 5.5.2 command not recognized")
	}
	return true
}

// auth runs AUTH PLAIN or LOGIN.
func (ss *session) auth(arg string) {
	o := ss.s.opts
	mech, initial, _ := strings.Cut(arg, " ")
	mech = strings.ToUpper(mech)
	offered := false
	for _, m := range o.Mechanisms {
		offered = offered || m == mech
	}
	if o.Users == nil || !(ss.tls || o.AuthInClear) || !offered || ss.user != "" {
		ss.reply("503 5.5.1 AUTH not available")
		return
	}
	read := func(prompt string) (string, bool) {
		ss.reply("334 " + prompt)
		l, err := ss.readLine()
		if err != nil || l == "*" {
			return "", false
		}
		b, err := base64.StdEncoding.DecodeString(l)
		return string(b), err == nil
	}
	var user, pass string
	switch mech {
	case "PLAIN":
		if initial == "" {
			var ok bool
			if initial, ok = read(""); !ok {
				ss.reply("501 5.5.2 cancelled")
				return
			}
		} else {
			b, err := base64.StdEncoding.DecodeString(initial)
			if err != nil {
				ss.reply("501 5.5.2 bad base64")
				return
			}
			initial = string(b)
		}
		parts := strings.Split(initial, "\x00")
		if len(parts) != 3 {
			ss.reply("501 5.5.2 bad PLAIN response")
			return
		}
		user, pass = parts[1], parts[2]
	case "LOGIN":
		var ok1, ok2 bool
		user, ok1 = read(base64.StdEncoding.EncodeToString([]byte("Username:")))
		if ok1 {
			pass, ok2 = read(base64.StdEncoding.EncodeToString([]byte("Password:")))
		}
		if !ok1 || !ok2 {
			ss.reply("501 5.5.2 cancelled")
			return
		}
	}
	if want, ok := o.Users[user]; !ok || want != pass {
		ss.reply("535 5.7.8 Authentication credentials invalid")
		return
	}
	ss.user = user
	ss.reply("235 2.7.0 Authentication successful")
}

var errTooLarge = errors.New("message too large")

// readData reads the lines of DATA up to the one of a dot alone, keeping
// each line's end as it came and taking away the dot that stuffing adds.
func (ss *session) readData() ([]byte, error) {
	var b bytes.Buffer
	tooLarge := false
	for {
		l, err := ss.r.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if l == ".\r\n" || l == ".\n" {
			break
		}
		l = strings.TrimPrefix(l, ".")
		if b.Len()+len(l) > maxData {
			tooLarge = true
			continue
		}
		b.WriteString(l)
	}
	if tooLarge {
		return nil, errTooLarge
	}
	return b.Bytes(), nil
}

// angle reads "FROM:<addr> PARAMS" after its prefix.
func angle(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if !strings.HasPrefix(rest, "<") {
		return "", false
	}
	addr, _, ok := strings.Cut(rest[1:], ">")
	return addr, ok
}

// String shows a message's envelope, for failures.
func (m *Message) String() string {
	return fmt.Sprintf("from %s to %v (tls %v, user %q), %d bytes", m.From, m.To, m.TLS, m.User, len(m.Data))
}
