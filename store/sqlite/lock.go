package sqlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/schedulerd/schedulerd/internal/procfs"
	"github.com/schedulerd/schedulerd/internal/safefs"
	"github.com/schedulerd/schedulerd/store"
)

// lockFile is an exclusive flock on the database's lock file. The kernel
// drops it when the process dies, so a killed daemon never blocks a restart.
type lockFile struct{ f *os.File }

// lockedError says which process holds the database.
type lockedError struct {
	path string
	pid  string
	// lingering: the daemon of pid is gone, yet its lock was still held
	// after procfs.Linger.
	lingering bool
}

func (e *lockedError) Error() string {
	if e.lingering {
		return fmt.Sprintf("database %s is still locked %s after the schedulerd that held it (pid %s) ended: find the process that holds %s.lock (fuser)",
			e.path, procfs.Linger, e.pid, e.path)
	}
	return fmt.Sprintf("database %s is in use by another schedulerd (pid %s)", e.path, e.pid)
}

// lockHolder reads the pid written in the lock file, or "unknown".
func lockHolder(f *os.File) string {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return "unknown"
	}
	p := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(p); err != nil {
		return "unknown"
	}
	return p
}

func (e *lockedError) Unwrap() error { return store.ErrLocked }

// acquireLock locks the file name (the database's name plus ".lock") of
// the checked directory dir and writes our pid into it, or fails with an
// error wrapping store.ErrLocked that names the holder's pid. path is the
// database, for errors. The file is opened without following a symlink
// and must be a regular file of ours (dir.OpenFile); it is created 0600,
// and nothing is written to it before the lock is held.
func acquireLock(dir *safefs.Dir, name, path string) (*lockFile, error) {
	f, err := dir.OpenFile(name, os.O_RDWR|os.O_CREATE, safefs.FileMode)
	if err != nil {
		return nil, fmt.Errorf("lock database %s: %w", path, err)
	}
	// A lock held while the daemon whose pid the file names is gone is
	// held by a child that daemon forked and that has not yet run its
	// job's program: it lets go when its exec closes the descriptor
	// (procfs.Linger).
	pid := "unknown"
	held := procfs.WaitWhile(func() bool {
		err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return false
		}
		pid = lockHolder(f)
		n, perr := strconv.Atoi(pid)
		return perr == nil && procfs.Gone(n)
	})
	if err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if held {
				return nil, &lockedError{path: path, pid: pid, lingering: true}
			}
			return nil, &lockedError{path: path, pid: pid}
		}
		return nil, fmt.Errorf("lock database %s: %w", path, err)
	}
	if _, err := safefs.LimitFileMode(f); err != nil {
		_ = flock(f, syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("lock database %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		_ = flock(f, syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("lock database %s: %w", path, err)
	}
	return &lockFile{f: f}, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// release unlocks and closes the lock file. The file stays: removing it
// would let two processes lock two different files of the same name.
func (l *lockFile) release() error {
	err := flock(l.f, syscall.LOCK_UN)
	return errors.Join(err, l.f.Close())
}
