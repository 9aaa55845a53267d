package control

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/schedulerd/schedulerd/internal/procfs"
	"github.com/schedulerd/schedulerd/internal/safefs"
)

// maxSocketPath is the longest path a unix socket address holds.
const maxSocketPath = 107

// listenBacklog is the queue of connections not yet accepted (the kernel
// caps it at net.core.somaxconn). Past it, connecting fails with EAGAIN, so
// it is generous: the connections the server holds are bounded by MaxConns.
const listenBacklog = 1024

// socketFile is a bound socket and the identity of its file, so that Close
// removes our file and never one that another process put there since.
type socketFile struct {
	ln   net.Listener
	path string
	dev  uint64
	ino  uint64
}

// umaskMu serializes the changes of the process-wide umask.
var umaskMu sync.Mutex

// bindSocket makes the directory if needed, clears a stale socket file,
// binds path as 0660 and gives it to the group gid (-1: none). dirOwned says
// the directory was made for the daemon by its service manager.
func bindSocket(path string, gid int, group string, dirOwned bool, log *slog.Logger) (*socketFile, error) {
	if path == "" {
		return nil, errors.New("the socket path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if len(abs) > maxSocketPath {
		return nil, fmt.Errorf("the path %s is %d bytes; a unix socket path has at most %d", abs, len(abs), maxSocketPath)
	}
	dir, err := prepareDir(filepath.Dir(abs), gid, group, dirOwned, log)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	// Every directory on the way passed the checks, so nobody else can
	// change what the path names: clearing and binding by path is safe.
	if err := clearPath(abs, log); err != nil {
		return nil, err
	}
	ln, err := bindUmask(abs)
	if err != nil {
		return nil, err
	}
	sf := &socketFile{ln: ln, path: abs}
	// The socket file is looked at and given to the group through the
	// directory's handle, as a directory entry that is never followed.
	name, dfd := filepath.Base(abs), int(dir.File().Fd())
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		ln.Close()
		return nil, &fs.PathError{Op: "lstat", Path: abs, Err: err}
	}
	sf.dev, sf.ino = st.Dev, st.Ino
	if gid >= 0 {
		if err := unix.Fchownat(dfd, name, os.Geteuid(), gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			sf.ln.Close()
			sf.remove(log)
			return nil, fmt.Errorf("give %s to socket_group %s: %w", abs, group, err)
		}
	}
	return sf, nil
}

// socketDirRole names the socket's directory in errors.
const socketDirRole = "socket directory"

// prepareDir checks the socket's directory and every directory above it
// (internal/safefs: no symlink to it, owned by root or the daemon's user,
// not writable by group or others), making it 0750 if it is missing. One
// that it made, or that was made for the daemon (owned: systemd's
// RuntimeDirectory), is set to 0750 and given to the socket group through
// its handle, never by path, so that a directory swapped in after the check
// is not the one changed. Any other existing directory keeps its mode and
// group; a warning says when the group cannot get through it. The
// directory is returned open.
func prepareDir(dir string, gid int, group string, owned bool, log *slog.Logger) (*safefs.Dir, error) {
	d, err := safefs.OpenDir(dir, socketDirRole, 0o750)
	if err != nil {
		return nil, err
	}
	if d.Created() || owned {
		if err := giveDir(d.File(), gid, group); err != nil {
			d.Close()
			return nil, err
		}
		return d, nil
	}
	fi, err := d.File().Stat()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && gid >= 0 && int(st.Gid) != gid && fi.Mode().Perm()&0o001 == 0 {
		log.Warn("members of socket_group cannot reach the socket: its directory is not searchable by the group; "+
			"give the directory to the group (chgrp) or set socket to a path in another directory",
			"directory", dir, "mode", fi.Mode().Perm().String(), "socket_group", group)
	}
	return d, nil
}

// giveDir sets the open socket directory f to 0750 and, when gid >= 0,
// gives it to the socket group.
func giveDir(f *os.File, gid int, group string) error {
	if err := f.Chmod(0o750); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if gid >= 0 {
		if err := f.Chown(os.Geteuid(), gid); err != nil {
			return fmt.Errorf("give the socket directory %s to socket_group %s: %w", f.Name(), group, err)
		}
	}
	return nil
}

// ErrInUse is wrapped by Listen when a live daemon listens on the path.
var ErrInUse = errors.New("another schedulerd is listening")

// clearPath refuses a symlink, a file that is not a socket, and a socket
// that a live process listens on; it removes a stale socket file.
func clearPath(path string, log *slog.Logger) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink; refusing to use it as the control socket: remove it, or set socket to another path", path)
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%s exists and is not a socket; remove it, or set socket to another path", path)
	}
	var lingering int
	held := procfs.WaitWhile(func() bool {
		live, pid, derr := listenerLive(path)
		err, lingering = derr, pid
		return err == nil && !live
	})
	switch {
	case err == nil && held:
		return fmt.Errorf("%w on %s: the socket of a stopped daemon (pid %d) is still held %s after it ended: "+
			"find the process that holds it (fuser %s), or set socket to another path", ErrInUse, path, lingering, procfs.Linger, path)
	case err == nil:
		return fmt.Errorf("%w on %s: stop it first, or set socket to another path", ErrInUse, path)
	case errors.Is(err, syscall.ECONNREFUSED):
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
		log.Info("removed a stale control socket left by a daemon that is gone", "socket", path)
		return nil
	default:
		return fmt.Errorf("check whether a daemon listens on %s: %w", path, err)
	}
}

// listenerLive connects to the socket at path and reports whether the
// process that listens there is alive. A connection to a listener whose
// process is gone (SO_PEERCRED names the process that called listen) is a
// socket that a child forked by that dead daemon still holds for an
// instant, before its exec closes it (procfs.Linger). err is the dial's
// error when nothing listens (ECONNREFUSED for a stale socket file).
func listenerLive(path string) (live bool, pid int, err error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return false, 0, err
	}
	defer c.Close()
	cred, cerr := peerCredentials(c)
	if cerr != nil {
		return true, 0, nil // cannot tell: take it for a live daemon
	}
	return !procfs.Gone(int(cred.Pid)), int(cred.Pid), nil
}

// bindUmask binds and listens on path with the umask 0117, so the socket is
// created 0660. The umask is process-wide: the change is serialized, and
// ForkLock is held so that no child process is started with it.
func bindUmask(path string) (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	syscall.ForkLock.RLock()
	umaskMu.Lock()
	old := unix.Umask(0o117)
	err = unix.Bind(fd, &unix.SockaddrUnix{Name: path})
	unix.Umask(old)
	umaskMu.Unlock()
	syscall.ForkLock.RUnlock()
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("%w on %s", ErrInUse, path)
		}
		return nil, fmt.Errorf("bind %s: %w", path, err)
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

// remove deletes the socket file if it is still ours.
func (sf *socketFile) remove(log *slog.Logger) {
	fi, err := os.Lstat(sf.path)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Dev != sf.dev || st.Ino != sf.ino {
		log.Info("control socket was replaced by another process; leaving it", "socket", sf.path)
		return
	}
	if err := os.Remove(sf.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("remove the control socket", "socket", sf.path, "error", err)
	}
}

// peerPolicy decides who may use the socket: root, the daemon's user, and
// members of the socket group.
type peerPolicy struct {
	uid    uint32
	gid    int // -1: no group
	gidStr string
}

func newPeerPolicy(group string) (*peerPolicy, error) {
	p := &peerPolicy{uid: uint32(os.Geteuid()), gid: -1}
	if group == "" {
		return p, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		if _, convErr := strconv.Atoi(group); convErr == nil {
			g, err = user.LookupGroupId(group)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("unknown group %q", group)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return nil, fmt.Errorf("group %q has the id %q, not a number", group, g.Gid)
	}
	p.gid, p.gidStr = gid, g.Gid
	return p, nil
}

// allowed reports whether the peer may use the socket. Group membership is
// the peer's primary group, or the user's supplementary groups looked up by
// uid.
func (p *peerPolicy) allowed(c *unix.Ucred) bool {
	if c.Uid == 0 || c.Uid == p.uid {
		return true
	}
	if p.gid < 0 {
		return false
	}
	if c.Gid == uint32(p.gid) {
		return true
	}
	u, err := lookupUserID(c.Uid)
	if err != nil {
		return false
	}
	ids, err := u.GroupIds()
	return err == nil && slices.Contains(ids, p.gidStr)
}

func lookupUserID(uid uint32) (*user.User, error) {
	return user.LookupId(strconv.FormatUint(uint64(uid), 10))
}

// peerCredentials returns the SO_PEERCRED of an accepted connection.
func peerCredentials(c net.Conn) (*unix.Ucred, error) {
	if lc, ok := c.(*limitConn); ok {
		c = lc.Conn
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// limitListener bounds the connections served at once. When every slot is
// taken, Accept closes the oldest connection that has not sent a request
// for a moment (idle between requests, or new and silent), so that silent
// clients cannot keep others out; when all are busy with requests, it waits.
type limitListener struct {
	net.Listener
	sem      chan struct{}
	done     chan struct{}
	doneOnce sync.Once
	// silent and slow are the ages past which a connection that sends
	// nothing, or has not sent its whole request, may be evicted
	// (silentAge and slowAge unless set otherwise).
	silent, slow time.Duration

	mu    sync.Mutex
	conns map[*limitConn]trackedConn
}

type trackedConn struct {
	state http.ConnState
	since time.Time
	// read is set once the server has the whole request (headers and
	// body): from then on the connection is being served, possibly in a
	// long poll, and is never evicted.
	read bool
}

// silentAge is how long a new connection may send nothing before it can be
// evicted to make room.
const silentAge = 20 * time.Millisecond

// slowAge is how long a connection may take to send the rest of a request
// whose headers arrived before it can be evicted to make room. A local
// client sends a whole request (at most 64 KiB) in far less.
const slowAge = 250 * time.Millisecond

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{}), conns: map[*limitConn]trackedConn{},
		silent: silentAge, slow: slowAge}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for acquired := false; !acquired; {
		select {
		case l.sem <- struct{}{}:
			acquired = true
			continue
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		l.evictSilent()
		t := time.NewTimer(l.silent)
		select {
		case l.sem <- struct{}{}:
			acquired = true
		case <-t.C:
		case <-l.done:
			t.Stop()
			return nil, net.ErrClosed
		}
		t.Stop()
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[lc] = trackedConn{state: http.StateNew, since: time.Now()}
	l.mu.Unlock()
	return lc, nil
}

// track follows the state of the connections (http.Server.ConnState).
func (l *limitListener) track(c net.Conn, st http.ConnState) {
	lc, ok := limitConnOf(c)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.conns[lc]; !ok {
		return
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, lc)
	default:
		l.conns[lc] = trackedConn{state: st, since: time.Now()}
	}
}

// markRead records that the request of c has been read whole.
func (l *limitListener) markRead(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.conns[c]; ok {
		t.read = true
		l.conns[c] = t
	}
}

// evictSilent closes the oldest connection that is idle, new and silent for
// l.silent, or still sending a request after l.slow. An idle or new
// connection with bytes waiting to be read is not silent: its client has
// sent a request that the server has not read yet, which on a busy machine
// can take longer than l.silent; closing it would fail a client that did
// nothing wrong.
func (l *limitListener) evictSilent() {
	now := time.Now()
	type candidate struct {
		c       *limitConn
		since   time.Time
		waiting bool // idle or new: not silent if it has sent bytes
	}
	var cands []candidate
	l.mu.Lock()
	for c, t := range l.conns {
		switch {
		case t.state == http.StateIdle || (t.state == http.StateNew && now.Sub(t.since) >= l.silent):
			cands = append(cands, candidate{c, t.since, true})
		case t.state == http.StateActive && !t.read && now.Sub(t.since) >= l.slow:
			cands = append(cands, candidate{c, t.since, false})
		}
	}
	l.mu.Unlock()
	slices.SortFunc(cands, func(a, b candidate) int { return a.since.Compare(b.since) })
	for _, k := range cands {
		if k.waiting && k.c.pending() {
			continue
		}
		k.c.Close()
		return
	}
}

// shutdown makes a waiting Accept return.
func (l *limitListener) shutdown() {
	l.doneOnce.Do(func() { close(l.done) })
}

func (l *limitListener) Close() error {
	l.shutdown()
	return l.Listener.Close()
}

// limitConnOf returns the *limitConn of a connection of a limitListener,
// or of a TLS connection over one.
func limitConnOf(c net.Conn) (*limitConn, bool) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitConn)
	return lc, ok
}

// limitConn gives its slot back when closed.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

// pending reports whether bytes the client sent wait to be read (FIONREAD).
// A connection whose descriptor cannot be asked counts as having none.
func (c *limitConn) pending() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		return false
	}
	return n > 0
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.sem
	})
	return err
}
