package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/schedulerd/schedulerd/internal/safefs"
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

// TestSymlinkedSocketDirIsRefused: a socket directory that is a symlink is
// refused, whether the daemon made it or systemd did (DirOwned): another
// user who planted it would get the socket in a directory of his (and
// clients' requests at his listener), or the mode and group of the
// directory it points at changed.
func TestSymlinkedSocketDirIsRefused(t *testing.T) {
	for _, owned := range []bool{false, true} {
		t.Run(fmt.Sprintf("DirOwned=%v", owned), func(t *testing.T) {
			base := socketDir(t)
			real := filepath.Join(base, "real")
			if err := os.Mkdir(real, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(real, 0o755); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(base, "run")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			before := modeGroup(t, real)
			err := listenRefused(t, ServerConfig{Path: filepath.Join(link, "s.sock"), DirOwned: owned, Group: testGroup()})
			if after := modeGroup(t, real); after != before {
				t.Errorf("the directory the symlink points at changed from %s to %s", before, after)
			}
			if des, _ := os.ReadDir(real); len(des) != 0 {
				t.Errorf("files made through the symlink: %v", des)
			}
			want := "control socket: socket directory " + link + " is a symlink"
			if !errors.Is(err, safefs.ErrUnsafe) || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Listen: %v, want %q", err, want)
			}
		})
	}
}

// TestUnsafeSocketDirIsRefused: a socket directory that others could write
// to (sticky or not), or that another user owns, is refused with its mode
// or owner, also when systemd made it for the daemon.
func TestUnsafeSocketDirIsRefused(t *testing.T) {
	tests := []struct {
		name  string
		mode  fs.FileMode
		owner int // -1: ours
		owned bool
		want  string
	}{
		{"writable by others", 0o777, -1, false, "is writable by its group and others (mode 0777)"},
		{"writable by its group", 0o770, -1, false, "is writable by its group"},
		{"sticky like /tmp", 0o777 | fs.ModeSticky, -1, false, "is writable by its group and others (mode 1777)"},
		{"made by systemd, writable by its group", 0o770, -1, true, "is writable by its group"},
		{"owned by another user", 0o755, 65534, false, "is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.owner >= 0 && os.Geteuid() != 0 {
				t.Skip("not checked: giving the directory to another user (nobody) needs root")
			}
			dir := filepath.Join(socketDir(t), "run")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tt.mode); err != nil {
				t.Fatal(err)
			}
			if tt.owner >= 0 {
				if err := os.Chown(dir, tt.owner, tt.owner); err != nil {
					t.Fatal(err)
				}
			}
			err := listenRefused(t, ServerConfig{Path: filepath.Join(dir, "s.sock"), DirOwned: tt.owned})
			if fi, err := os.Lstat(dir); err != nil || fi.Mode()&(fs.ModePerm|fs.ModeSticky) != tt.mode {
				t.Errorf("the refused directory changed: %v %v", fi.Mode(), err)
			}
			if des, _ := os.ReadDir(dir); len(des) != 0 {
				t.Errorf("files made in a refused directory: %v", des)
			}
			want := "socket directory " + dir + " " + tt.want
			if !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Listen: %v, want %q", err, want)
			}
		})
	}
}

// listenRefused calls Listen with cfg, a fake engine and a store, and
// returns its error; a server that it started anyway is closed.
func listenRefused(t *testing.T, cfg ServerConfig) error {
	t.Helper()
	cfg.Engine, cfg.Store = &fakeEngine{}, openStore(t)
	s, err := Listen(cfg)
	if err == nil {
		s.Close(context.Background())
	}
	return err
}

// testGroup is a group to give the socket to when the tests run as root
// (nogroup, if the host has it), else "".
func testGroup() string {
	if os.Geteuid() != 0 {
		return ""
	}
	if _, err := user.LookupGroup("nogroup"); err != nil {
		return ""
	}
	return "nogroup"
}

// modeGroup describes the mode and group of path.
func modeGroup(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("mode %v group %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid)
}
