package main

import (
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestClientRefusesPlantedSocketDir: a client does not send its request
// (a root operator's trigger with a secret payload) through a socket
// directory that another user planted or re-pointed: a symlink in place of
// the directory, or a directory of another user in a place others can
// write to. A directory of another user in a parent only root can write to
// (the daemon running as a user of its own under systemd) is trusted.
func TestClientRefusesPlantedSocketDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting directories of another user needs root; CI runs these tests as root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	e := newEnv(t)
	e.writeConfig("[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n")

	// listen serves a socket in dir that counts the connections it gets.
	listen := func(dir string) (path string, conns *atomic.Int32) {
		path = filepath.Join(dir, "schedulerd.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		conns = new(atomic.Int32)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				c.Close()
			}
		}()
		return path, conns
	}
	mkdir := func(path string, mode os.FileMode, owner int) string {
		if err := os.Mkdir(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, owner, gid); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// A directory of nobody, and a symlink to it where the socket
	// directory should be.
	evil := mkdir(filepath.Join(e.dir, "evil"), 0o755, uid)
	sock, conns := listen(evil)
	link := filepath.Join(e.dir, "run")
	if err := os.Symlink(evil, link); err != nil {
		t.Fatal(err)
	}
	// A world-writable sticky directory, like /tmp, with nobody's
	// directory in it.
	shared := mkdir(filepath.Join(e.dir, "shared"), os.ModeSticky|0o777, 0)
	planted := mkdir(filepath.Join(shared, "schedulerd"), 0o755, uid)
	plantedSock, plantedConns := listen(planted)

	for _, tt := range []struct {
		socket, want string
		conns        *atomic.Int32
	}{
		{filepath.Join(link, "schedulerd.sock"), "is a symlink", conns},
		{plantedSock, "which others can write to", plantedConns},
	} {
		r := e.cli("trigger", "a", "--payload", "s3cret", "--socket", tt.socket)
		if r.code == 0 || !strings.Contains(r.stderr, "refusing to connect") || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("trigger through %s: exit %d, stderr %q; want a refusal that says %q", tt.socket, r.code, r.stderr, tt.want)
		}
		if n := tt.conns.Load(); n != 0 {
			t.Errorf("trigger through %s: the planted listener got %d connections", tt.socket, n)
		}
	}

	// nobody's directory in a parent only root writes to: the daemon's
	// own, under a user of its own. The client connects (and the fake
	// listener hangs up on it).
	e.cli("health", "--socket", sock)
	if conns.Load() == 0 {
		t.Errorf("the client refused a socket directory of another user in a parent only root can write to")
	}
}
