package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Modes of the files the daemon keeps in its directories.
const (
	// FileMode is the mode of a file the daemon creates, whatever the
	// umask, and of one it finds wider than GroupFileMode.
	FileMode fs.FileMode = 0o600
	// GroupFileMode is the widest mode a file keeps: its group may read it
	// when the operator set it so (a backup group, say); nobody else may.
	GroupFileMode fs.FileMode = 0o640
)

// OpenFile opens the file name of the directory (one component, no slash)
// without following a symlink, and refuses anything but a regular file of
// the daemon's user with a single link: a symlink or a hard link planted
// there would make the daemon write to a file it did not create. flag may
// hold os.O_CREATE, which creates the file with perm (narrowed by the
// umask); the check is made before anything is written.
func (d *Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	full := filepath.Join(d.path, name)
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, fmt.Errorf("open %s: not a file name in %s", name, d.path)
	}
	// O_NONBLOCK: opening a FIFO planted there must not hang the daemon.
	fd, err := unix.Openat(int(d.f.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, uint32(perm.Perm()))
	if errors.Is(err, unix.ELOOP) {
		return nil, d.unsafe(full, "is a symlink: the daemon does not follow symlinks in its directories; remove it")
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: full, Err: err}
	}
	if err := d.checkFile(fd, full); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: full, Err: err}
	}
	return os.NewFile(uintptr(fd), full), nil
}

// checkFile refuses an opened file that is not a regular file of the
// daemon's user with one link.
func (d *Dir) checkFile(fd int, full string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: full, Err: err}
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return d.unsafe(full, "is not a regular file; remove it")
	case st.Uid != euid:
		return d.unsafe(full, fmt.Sprintf("is owned by %s, not by the daemon's user (uid %d): chown it, or remove it", owner(st.Uid), euid))
	case st.Nlink != 1:
		return d.unsafe(full, fmt.Sprintf("has %d hard links: another name could be a file the daemon must not write to; remove it", st.Nlink))
	}
	return nil
}

func (d *Dir) unsafe(path, reason string) error {
	return &UnsafeError{Role: d.role, Dir: d.path, Path: path, Reason: reason}
}

// LimitFileMode sets the mode of f to FileMode when it has any bit outside
// GroupFileMode (read for others, write for the group, execute, setuid...),
// through the handle. It returns the mode bits (as chmod(2) takes them) f
// had when it changed them, and 0 when it left them alone.
func LimitFileMode(f *os.File) (was uint32, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, &fs.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	mode := st.Mode & 0o7777
	if mode&^uint32(GroupFileMode) == 0 {
		return 0, nil
	}
	if err := unix.Fchmod(int(f.Fd()), uint32(FileMode)); err != nil {
		return 0, &fs.PathError{Op: "chmod", Path: f.Name(), Err: err}
	}
	return mode, nil
}
