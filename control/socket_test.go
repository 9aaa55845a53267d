package control

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestSocketPermissions(t *testing.T) {
	ts := startServer(t, nil)
	dir := filepath.Dir(ts.Path())
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o750 {
		t.Errorf("socket directory mode %v, want 0750", got)
	}
	fi, err = os.Lstat(ts.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want a socket of mode 0660", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("socket owner %d, want the daemon's uid %d", st.Uid, os.Geteuid())
	}
	if _, err := ts.c.Jobs(context.Background()); err != nil {
		t.Fatalf("a request over the socket: %v", err)
	}
	// The umask of the process is back.
	old := syscall.Umask(0o22)
	syscall.Umask(old)
	if old == 0o117 {
		t.Error("the umask was not restored")
	}
}

func TestSocketGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another group needs root")
	}
	g, err := user.LookupGroup("nogroup")
	if err != nil {
		t.Skip("no group nogroup on this host")
	}
	ts := startServer(t, func(c *ServerConfig) { c.Group = "nogroup" })
	for _, p := range []string{ts.Path(), filepath.Dir(ts.Path())} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; strconv.Itoa(int(gid)) != g.Gid {
			t.Errorf("%s has group %d, want nogroup (%s)", p, gid, g.Gid)
		}
	}
	// A directory made for the daemon by systemd (RuntimeDirectory) is given
	// to the group too; members could not reach the socket otherwise.
	rt := filepath.Join(socketDir(t), "runtime")
	if err := os.Mkdir(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	startServer(t, func(c *ServerConfig) { c.Path, c.Group, c.DirOwned = filepath.Join(rt, "s.sock"), "nogroup", true })
	fi, err := os.Stat(rt)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; strconv.Itoa(int(gid)) != g.Gid || fi.Mode().Perm() != 0o750 {
		t.Errorf("owned directory: group %d mode %v, want nogroup and 0750", gid, fi.Mode().Perm())
	}

	// Any other existing directory keeps its mode and group; a warning
	// says that members cannot get through it.
	closed := filepath.Join(socketDir(t), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, func(c *ServerConfig) { c.Path, c.Group = filepath.Join(closed, "s.sock"), "nogroup" })
	if fi, err := os.Stat(closed); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("an existing directory was changed: %v %v", fi.Mode(), err)
	}
	if len(ts.logs.records("members of socket_group cannot reach the socket")) != 1 {
		t.Error("no warning about a directory the group cannot search")
	}

	if _, err := Listen(ServerConfig{Path: filepath.Join(socketDir(t), "s.sock"), Group: "no-such-group-here",
		Engine: ts.eng, Store: ts.st}); err == nil || !strings.Contains(err.Error(), "unknown group") {
		t.Errorf("an unknown group: %v", err)
	}
}

func TestExistingDirectoryKeepsItsMode(t *testing.T) {
	dir := filepath.Join(socketDir(t), "mine")
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *ServerConfig) { c.Path = filepath.Join(dir, "s.sock") })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o711 {
		t.Errorf("an existing directory changed mode to %v", fi.Mode().Perm())
	}
	if _, err := ts.c.Jobs(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// staleSocket leaves a socket file that nothing listens on, as a killed
// daemon does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the stale socket is gone: %v", err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	path := filepath.Join(socketDir(t), "run", "s.sock")
	staleSocket(t, path)
	// A client sees that no daemon runs.
	_, err := NewClient(path).Jobs(context.Background())
	if !errors.Is(err, ErrDaemonNotRunning) {
		t.Fatalf("client on a stale socket: %v, want ErrDaemonNotRunning", err)
	}
	ts := startServer(t, func(c *ServerConfig) { c.Path = path })
	if _, err := ts.c.Jobs(context.Background()); err != nil {
		t.Fatalf("a request after replacing the stale socket: %v", err)
	}
	if len(ts.logs.records("removed a stale control socket")) != 1 {
		t.Error("the removal of the stale socket was not logged")
	}
}

func TestLiveServerRefusesSecond(t *testing.T) {
	ts := startServer(t, nil)
	_, err := Listen(ServerConfig{Path: ts.Path(), Engine: ts.eng, Store: ts.st})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "another schedulerd is listening on "+ts.Path()) {
		t.Fatalf("second Listen: %v", err)
	}
	if _, err := ts.c.Jobs(context.Background()); err != nil {
		t.Fatalf("the first server stopped serving: %v", err)
	}
}

func TestSymlinkAtPathIsRefused(t *testing.T) {
	dir := socketDir(t)
	target := filepath.Join(dir, "target.sock")
	staleSocket(t, target)
	link := filepath.Join(dir, "s.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(ServerConfig{Path: link, Engine: &fakeEngine{}, Store: openStore(t)})
	if err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Fatalf("Listen on a symlink: %v", err)
	}
	for _, p := range []string{link, target} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

func TestNonSocketAtPathIsRefused(t *testing.T) {
	path := filepath.Join(socketDir(t), "s.sock")
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(ServerConfig{Path: path, Engine: &fakeEngine{}, Store: openStore(t)})
	if err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("Listen on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Error("the file was changed")
	}
}

func TestCloseRemovesOnlyItsOwnSocket(t *testing.T) {
	st := openStore(t)
	path := filepath.Join(socketDir(t), "s.sock")
	s, err := Listen(ServerConfig{Path: path, Engine: &fakeEngine{st: st}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
	// A server whose file was replaced leaves the new one alone.
	s, err = Listen(ServerConfig{Path: path, Engine: &fakeEngine{st: st}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	staleSocket(t, path)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("Close removed a socket it did not make: %v", err)
	}
}
