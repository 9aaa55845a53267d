package sqlite

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/procfs"
	"github.com/schedulerd/schedulerd/store"
)

// TestLockHeldAfterItsDaemonEnded: the lock file names a daemon that is
// gone, yet its lock is still held, as by a child that daemon forked and
// that had not yet run its job's program when the daemon was killed. The
// next Open waits for the lock to be let go instead of refusing; a lock
// whose daemon is alive is refused at once.
func TestLockHeldAfterItsDaemonEnded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "schedulerd.db")
	s := openTest(t, path, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if !procfs.Gone(dead.Process.Pid) {
		t.Fatalf("pid %d is not gone", dead.Process.Pid)
	}

	// Hold the lock on another open file, the file naming the dead pid.
	hold := func(pid int) *os.File {
		f, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0); err != nil {
			t.Fatal(err)
		}
		return f
	}
	held := hold(dead.Process.Pid)
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(time.Second) // the orphan's instant before its exec, drawn out
		released <- time.Now()
		held.Close()
	}()
	s, err := Open(t.Context(), Options{Path: path, Lock: true})
	if err != nil {
		t.Fatalf("Open while the lock of a daemon that is gone is still held: %v", err)
	}
	select {
	case <-released:
	default:
		t.Error("Open took the lock before it was let go")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A lock whose daemon is alive (this process) is refused at once.
	live := hold(os.Getpid())
	defer live.Close()
	start := time.Now()
	_, err = Open(t.Context(), Options{Path: path, Lock: true})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Open with the lock held by a live daemon: %v, want ErrLocked", err)
	}
	if took := time.Since(start); took > procfs.Linger/2 {
		t.Errorf("refusing a live daemon's lock took %s", took)
	}
}
