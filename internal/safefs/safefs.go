package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is wrapped by every *UnsafeError, for callers that only need
// to know that a path was refused.
var ErrUnsafe = errors.New("unsafe path")

// UnsafeError says why a directory, or a file in it, is refused.
type UnsafeError struct {
	// Role is what the daemon uses the directory for, as the operator
	// knows it: "state directory", "socket directory".
	Role string
	// Dir is the directory as given.
	Dir string
	// Path is what is at fault: Dir, one of its ancestors, or a file in it.
	Path string
	// Reason says what is wrong with Path and what to do about it.
	Reason string
}

func (e *UnsafeError) Error() string {
	if e.Path == e.Dir {
		return fmt.Sprintf("%s %s %s", e.Role, e.Dir, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s %s", e.Role, e.Dir, e.Path, e.Reason)
}

func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// maxSymlinks bounds the symlinks followed on one path, like the kernel's
// limit before ELOOP.
const maxSymlinks = 40

// Dir is a directory that passed the checks, held open: its mode and owner
// are changed, and files in it opened, through the handle, so that nothing
// done after the check depends on what the path names by then.
type Dir struct {
	f       *os.File
	role    string
	path    string
	created bool
}

// File is the directory's handle, open for reading: Stat, Chmod and Chown
// act on the directory that was checked.
func (d *Dir) File() *os.File { return d.f }

// Path is the directory as given to OpenDir.
func (d *Dir) Path() string { return d.path }

// Created reports whether OpenDir made the directory itself.
func (d *Dir) Created() bool { return d.created }

// Close closes the handle.
func (d *Dir) Close() error { return d.f.Close() }

// OpenDir checks the directory at the absolute path and every directory on
// the way to it (see the package doc), making the missing ones with mode
// perm, and returns it open. role names the directory in errors.
func OpenDir(path, role string, perm fs.FileMode) (*Dir, error) {
	w, err := walk(path, role, perm, true)
	if err != nil {
		return nil, err
	}
	defer w.close()
	top := w.top()
	// "." relative to the O_PATH handle reopens the very directory that
	// was checked, now readable, so that it can be fchmod-ed and used as
	// the base of openat.
	fd, err := unix.Openat(top.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", role, path, &fs.PathError{Op: "open", Path: top.path, Err: err})
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), role: role, path: path, created: top.created}, nil
}

// CheckDir applies the rules of OpenDir to an existing directory without
// making or keeping anything open: for a client about to trust what it
// finds there.
func CheckDir(path, role string) error {
	w, err := walk(path, role, 0, false)
	if err != nil {
		return err
	}
	w.close()
	return nil
}

// CheckSocketDir applies the rules of CheckDir for a client about to
// connect to a socket in the directory at path, with one difference: the
// directory itself may belong to any user (the daemon may run as a user
// of its own), since its parent, owned by root or the caller and writable
// by nobody else, shows who put it there. A directory that another user
// planted, a symlink in its place, or a parent that others can write to
// is refused as it is for the daemon.
func CheckSocketDir(path string) error {
	w, err := walkWith(&walker{role: "socket directory", lastAnyOwner: true}, path)
	if err != nil {
		return err
	}
	w.close()
	return nil
}

// walker resolves a path one component at a time from /, holding each
// directory on the way open (O_PATH) and checking it before it looks up a
// name in it.
type walker struct {
	role, dir string
	euid      uint32
	perm      fs.FileMode
	create    bool
	// lastAnyOwner accepts any owner of the directory asked for (not of
	// its ancestors): CheckSocketDir.
	lastAnyOwner bool
	stack        []node // from / to the current directory
}

// node is a directory on the way, open with O_PATH.
type node struct {
	fd      int
	path    string
	st      unix.Stat_t
	created bool
}

// walk resolves path, checking every directory on the way, and leaves the
// directory it names at the top of the stack. create makes missing
// components with perm; without it a missing one is an error.
func walk(path, role string, perm fs.FileMode, create bool) (*walker, error) {
	return walkWith(&walker{role: role, perm: perm, create: create}, path)
}

// walkWith is walk with the walker's settings given.
func walkWith(w *walker, path string) (*walker, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s %s is not an absolute path", w.role, path)
	}
	w.dir, w.euid = path, uint32(os.Geteuid())
	if err := w.push(unix.AT_FDCWD, "/", "/", false, false); err != nil {
		w.close()
		return nil, err
	}
	rest := components(path)
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			w.pop()
			continue
		}
		target, err := w.step(name, len(rest) == 0)
		if err != nil {
			w.close()
			return nil, err
		}
		if target == "" {
			continue
		}
		if links++; links > maxSymlinks {
			w.close()
			return nil, w.unsafe(path, "has too many levels of symlinks")
		}
		if filepath.IsAbs(target) {
			for len(w.stack) > 1 {
				w.pop()
			}
		}
		rest = append(components(target), rest...)
	}
	if err := w.checkTarget(w.top()); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// components splits a path into its names, leaving out empty ones.
func components(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// step looks name up in the current directory, after checking that the
// directory is safe to look up in. A directory is pushed; a symlink's
// target is returned for the caller to resolve. last says that name is
// the directory asked for, which must not be a symlink.
func (w *walker) step(name string, last bool) (target string, err error) {
	parent := w.top()
	if err := w.checkAncestor(parent); err != nil {
		return "", err
	}
	full := filepath.Join(parent.path, name)
	var st unix.Stat_t
	err = unix.Fstatat(parent.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	created := false
	if errors.Is(err, unix.ENOENT) && w.create {
		err = unix.Mkdirat(parent.fd, name, uint32(w.perm.Perm()))
		created = err == nil
		if err == nil || errors.Is(err, unix.EEXIST) {
			err = unix.Fstatat(parent.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", w.role, w.dir, &fs.PathError{Op: "lstat", Path: full, Err: err})
	}
	if writable(parent.st) && !w.trusted(st.Uid) {
		return "", w.unsafe(full, fmt.Sprintf("is owned by %s in %s, which others can write to: only root's or the daemon's entries are followed there",
			owner(st.Uid), parent.path))
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "", w.push(parent.fd, name, full, created, last)
	case unix.S_IFLNK:
		if last {
			return "", w.unsafe(full, "is a symlink: the daemon does not follow one to a directory it creates files in; "+
				"set the path of the real directory")
		}
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(parent.fd, name, buf)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", w.role, w.dir, &fs.PathError{Op: "readlink", Path: full, Err: err})
		}
		return string(buf[:n]), nil
	default:
		return "", w.unsafe(full, "is not a directory")
	}
}

// push opens the directory name in dirfd without following a symlink and
// checks its owner.
func (w *walker) push(dirfd int, name, full string, created, last bool) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.role, w.dir, &fs.PathError{Op: "open", Path: full, Err: err})
	}
	n := node{fd: fd, path: full, created: created}
	w.stack = append(w.stack, n)
	if err := unix.Fstat(fd, &w.stack[len(w.stack)-1].st); err != nil {
		return fmt.Errorf("%s %s: %w", w.role, w.dir, &fs.PathError{Op: "fstat", Path: full, Err: err})
	}
	if uid := w.top().st.Uid; !w.trusted(uid) && !(last && w.lastAnyOwner) {
		return w.unsafe(full, fmt.Sprintf("is owned by %s, not by root or the daemon's user (uid %d): chown it, or use another directory",
			owner(uid), w.euid))
	}
	return nil
}

// checkAncestor refuses a directory that its group or others can write to,
// unless it is sticky: they could rename what is below it and put their own
// in its place.
func (w *walker) checkAncestor(n *node) error {
	if writable(n.st) && n.st.Mode&unix.S_ISVTX == 0 {
		return w.unsafe(n.path, fmt.Sprintf("is writable by %s (mode %04o) and not sticky: they could replace what is below it; "+
			"chmod go-w it, or use another directory", writers(n.st), n.st.Mode&0o7777))
	}
	return nil
}

// checkTarget refuses the directory asked for when its group or others can
// write to it, sticky or not: they could plant files or symlinks where the
// daemon creates its own.
func (w *walker) checkTarget(n *node) error {
	if !writable(n.st) {
		return nil
	}
	advice := "chmod go-w it, or use another directory"
	if n.st.Mode&unix.S_ISVTX != 0 {
		advice = "a shared directory is no place for the daemon's files; use a directory of its own"
	}
	return w.unsafe(n.path, fmt.Sprintf("is writable by %s (mode %04o): they could plant or replace files in it; %s",
		writers(n.st), n.st.Mode&0o7777, advice))
}

// trusted reports whether uid is root or the daemon's user.
func (w *walker) trusted(uid uint32) bool { return uid == 0 || uid == w.euid }

func (w *walker) unsafe(path, reason string) error {
	return &UnsafeError{Role: w.role, Dir: w.dir, Path: path, Reason: reason}
}

func (w *walker) top() *node { return &w.stack[len(w.stack)-1] }

// pop goes up to the parent directory; / is its own parent.
func (w *walker) pop() {
	if len(w.stack) > 1 {
		unix.Close(w.top().fd)
		w.stack = w.stack[:len(w.stack)-1]
	}
}

func (w *walker) close() {
	for _, n := range w.stack {
		unix.Close(n.fd)
	}
	w.stack = nil
}

// writable reports whether the group or others may write to st.
func writable(st unix.Stat_t) bool { return st.Mode&0o022 != 0 }

// writers names who besides the owner may write to st.
func writers(st unix.Stat_t) string {
	switch st.Mode & 0o022 {
	case 0o022:
		return "its group and others"
	case 0o020:
		return fmt.Sprintf("its group (gid %d)", st.Gid)
	default:
		return "others"
	}
}

// owner names uid, with its user name when it has one.
func owner(uid uint32) string {
	s := "uid " + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}
