package safefs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the uid and gid that the tests run as root give files to, as
// another local user.
const nobody = 65534

// mkdir makes dir with exactly mode, whatever the umask.
func mkdir(t *testing.T, dir string, mode fs.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// symlink makes link point at target.
func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// giveToNobody makes another user own path (not following a symlink); it
// needs root.
func giveToNobody(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

// withUmask runs fn under the process umask mask. Tests of this package do
// not run in parallel, so no other test sees it.
func withUmask(mask int, fn func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	fn()
}

// unsafeError asserts that err is an *UnsafeError about path whose message
// contains want.
func unsafeError(t *testing.T, err error, path, want string) {
	t.Helper()
	var ue *UnsafeError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnsafe) {
		t.Fatalf("got %v, want an UnsafeError about %s", err, path)
	}
	if ue.Path != path || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q about %s, want %q about %s", err, ue.Path, want, path)
	}
}

func TestOpenDirMakesMissingDirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "state")
	var d *Dir
	var err error
	withUmask(0, func() { d, err = OpenDir(dir, "state directory", 0o750) })
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Created() || d.Path() != dir {
		t.Errorf("Created %v Path %s, want true and %s", d.Created(), d.Path(), dir)
	}
	for _, p := range []string{dir, filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: %v %v, want a directory of mode 0750 under umask 0", p, fi.Mode(), err)
		}
	}
	// The handle is the directory's.
	fi, err := d.File().Stat()
	if err != nil || !fi.IsDir() {
		t.Fatalf("Stat of the handle: %v %v", fi, err)
	}
	again, err := OpenDir(dir, "state directory", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Created() {
		t.Error("an existing directory reported as created")
	}
}

// TestOpenDirRefuses: each row is a way in which another local user could
// plant or swap what the daemon creates in a directory; OpenDir refuses it
// with the component at fault and why, and creates nothing.
func TestOpenDirRefuses(t *testing.T) {
	tests := []struct {
		name  string
		root  bool // needs root, to give a file to another user
		setup func(t *testing.T, base string) (dir, culprit string)
		want  string
	}{
		{
			name: "the directory is a symlink",
			setup: func(t *testing.T, base string) (string, string) {
				real := mkdir(t, filepath.Join(base, "real"), 0o700)
				link := symlink(t, real, filepath.Join(base, "state"))
				return link, link
			},
			want: "is a symlink",
		},
		{
			name: "the directory is writable by others",
			setup: func(t *testing.T, base string) (string, string) {
				d := mkdir(t, filepath.Join(base, "state"), 0o777)
				return d, d
			},
			want: "is writable by its group and others (mode 0777)",
		},
		{
			name: "the directory is writable by its group",
			setup: func(t *testing.T, base string) (string, string) {
				d := mkdir(t, filepath.Join(base, "state"), 0o770)
				return d, d
			},
			want: "is writable by its group",
		},
		{
			name: "the directory is sticky and writable by others, like /tmp",
			setup: func(t *testing.T, base string) (string, string) {
				d := mkdir(t, filepath.Join(base, "state"), 0o777|fs.ModeSticky)
				return d, d
			},
			want: "(mode 1777)",
		},
		{
			name: "an ancestor is writable by others and not sticky",
			setup: func(t *testing.T, base string) (string, string) {
				open := mkdir(t, filepath.Join(base, "open"), 0o777)
				return mkdir(t, filepath.Join(open, "state"), 0o700), open
			},
			want: "and not sticky: they could replace what is below it",
		},
		{
			name: "a missing directory under an ancestor writable by others is not made",
			setup: func(t *testing.T, base string) (string, string) {
				open := mkdir(t, filepath.Join(base, "open"), 0o777)
				return filepath.Join(open, "new", "state"), open
			},
			want: "is writable by its group and others (mode 0777) and not sticky",
		},
		{
			name: "a file where a directory should be",
			setup: func(t *testing.T, base string) (string, string) {
				f := filepath.Join(base, "file")
				if err := os.WriteFile(f, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(f, "state"), f
			},
			want: "is not a directory",
		},
		{
			name: "the directory is owned by another user",
			root: true,
			setup: func(t *testing.T, base string) (string, string) {
				d := mkdir(t, filepath.Join(base, "state"), 0o700)
				giveToNobody(t, d)
				return d, d
			},
			want: "is owned by uid 65534",
		},
		{
			name: "an ancestor is owned by another user",
			root: true,
			setup: func(t *testing.T, base string) (string, string) {
				home := mkdir(t, filepath.Join(base, "home"), 0o755)
				d := mkdir(t, filepath.Join(home, "state"), 0o700)
				giveToNobody(t, home)
				return d, home
			},
			want: "not by root or the daemon's user",
		},
		{
			name: "a symlink of another user in a sticky directory",
			root: true,
			setup: func(t *testing.T, base string) (string, string) {
				sticky := mkdir(t, filepath.Join(base, "tmp"), 0o777|fs.ModeSticky)
				real := mkdir(t, filepath.Join(base, "real"), 0o755)
				mkdir(t, filepath.Join(real, "state"), 0o700)
				link := symlink(t, real, filepath.Join(sticky, "link"))
				giveToNobody(t, link)
				return filepath.Join(link, "state"), link
			},
			want: "is owned by uid 65534",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			dir, culprit := tt.setup(t, t.TempDir())
			before := entries(t, culprit)
			d, err := OpenDir(dir, "state directory", 0o750)
			if err == nil {
				d.Close()
			}
			unsafeError(t, err, culprit, tt.want)
			if !strings.HasPrefix(err.Error(), "state directory "+dir) {
				t.Errorf("%q does not start with the role and the directory", err)
			}
			if after := entries(t, culprit); after != before {
				t.Errorf("%s changed from %q to %q", culprit, before, after)
			}
			if err := CheckDir(dir, "socket directory"); !errors.Is(err, ErrUnsafe) {
				t.Errorf("CheckDir: %v, want the same refusal", err)
			}
		})
	}
}

// entries lists what is in dir, or "" when it is not a directory.
func entries(t *testing.T, dir string) string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return strings.Join(names, ",")
}

// TestOpenDirFollowsSafeSymlinks: a symlink above the directory is followed
// when it lives where only root or the daemon's user can replace it
// (/var/run -> /run is common); so is a sticky directory like /tmp above
// it, which t.TempDir uses.
func TestOpenDirFollowsSafeSymlinks(t *testing.T) {
	base := t.TempDir()
	real := mkdir(t, filepath.Join(base, "real"), 0o755)
	state := mkdir(t, filepath.Join(real, "state"), 0o750)
	sticky := mkdir(t, filepath.Join(base, "tmp"), 0o777|fs.ModeSticky)
	mkdir(t, filepath.Join(sticky, "mine"), 0o700)
	symlink(t, real, filepath.Join(base, "abs"))
	symlink(t, "real", filepath.Join(base, "rel"))
	symlink(t, "../real/.", filepath.Join(real, "up"))
	symlink(t, filepath.Join(base, "abs"), filepath.Join(base, "chain"))
	for _, dir := range []string{
		filepath.Join(base, "abs", "state"),
		filepath.Join(base, "rel", "state"),
		filepath.Join(real, "up", "state"),
		filepath.Join(base, "chain", "state"),
		filepath.Join(sticky, "mine"),
	} {
		d, err := OpenDir(dir, "state directory", 0o750)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		if !strings.HasSuffix(dir, "mine") && !sameFile(t, d.File(), state) {
			t.Errorf("%s opened another directory than %s", dir, state)
		}
		d.Close()
	}
	loop := symlink(t, "loop", filepath.Join(base, "loop"))
	if _, err := OpenDir(filepath.Join(loop, "state"), "state directory", 0o750); !errors.Is(err, ErrUnsafe) ||
		!strings.Contains(err.Error(), "too many levels of symlinks") {
		t.Errorf("a symlink loop: %v", err)
	}
	if _, err := OpenDir("relative/state", "state directory", 0o750); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative path: %v", err)
	}
	if err := CheckDir(filepath.Join(base, "missing"), "socket directory"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckDir of a missing directory: %v, want ErrNotExist", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("CheckDir made a directory")
	}
}

// sameFile reports whether the open f is the file at path.
func sameFile(t *testing.T, f *os.File, path string) bool {
	t.Helper()
	a, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(a, b)
}

// openState returns a checked directory of the test.
func openState(t *testing.T) *Dir {
	t.Helper()
	d, err := OpenDir(filepath.Join(t.TempDir(), "state"), "state directory", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestOpenFileRefuses: a symlink, a hard link, a FIFO or a directory at a
// file's name, or a file of another user, is refused before anything is
// written, and what it points at is left as it was.
func TestOpenFileRefuses(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		root  bool
		plant func(t *testing.T, path string)
		want  string
	}{
		{"a symlink", false, func(t *testing.T, p string) { symlink(t, secret, p) }, "is a symlink"},
		{"a dangling symlink", false, func(t *testing.T, p string) { symlink(t, secret+"-new", p) }, "is a symlink"},
		{"a hard link", false, func(t *testing.T, p string) {
			if err := os.Link(secret, p); err != nil {
				t.Fatal(err)
			}
		}, "has 2 hard links"},
		{"a FIFO", false, func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
		{"a file of another user", true, func(t *testing.T, p string) {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			giveToNobody(t, p)
		}, "is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			d := openState(t)
			path := filepath.Join(d.Path(), "schedulerd.db.lock")
			tt.plant(t, path)
			f, err := d.OpenFile("schedulerd.db.lock", os.O_RDWR|os.O_CREATE, FileMode)
			if err == nil {
				f.Close()
			}
			unsafeError(t, err, path, tt.want)
			if b, err := os.ReadFile(secret); err != nil || string(b) != "root only\n" {
				t.Errorf("the target changed: %q %v", b, err)
			}
			if _, err := os.Lstat(secret + "-new"); !errors.Is(err, fs.ErrNotExist) {
				t.Error("the target of a dangling symlink was created")
			}
		})
	}
}

func TestOpenFileCreates0600(t *testing.T) {
	d := openState(t)
	var f *os.File
	var err error
	withUmask(0, func() { f, err = d.OpenFile("db", os.O_RDWR|os.O_CREATE, FileMode) })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := os.Lstat(filepath.Join(d.Path(), "db"))
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("created %v %v, want a regular file of mode 0600", fi.Mode(), err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatalf("write through the handle: %v", err)
	}
	if _, err := d.OpenFile("../db", os.O_RDONLY, 0); err == nil {
		t.Error("a name with a slash was opened")
	}
}

// TestLimitFileMode: a mode that lets others read (or the group write) is
// made 0600; a mode the operator narrowed to group read stays.
func TestLimitFileMode(t *testing.T) {
	tests := []struct {
		mode     fs.FileMode
		want     fs.FileMode
		narrowed bool
	}{
		{0o644, 0o600, true},
		{0o666, 0o600, true},
		{0o660, 0o600, true},
		{0o700, 0o600, true},
		{0o640, 0o640, false},
		{0o600, 0o600, false},
		{0o400, 0o400, false},
	}
	d := openState(t)
	for _, tt := range tests {
		p := filepath.Join(d.Path(), "db")
		os.Remove(p)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
		f, err := d.OpenFile("db", os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		was, err := LimitFileMode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != tt.want || (was != 0) != tt.narrowed || (tt.narrowed && was != uint32(tt.mode)) {
			t.Errorf("%04o: now %04o, was %04o; want %04o, narrowed %v", tt.mode, fi.Mode().Perm(), was, tt.want, tt.narrowed)
		}
	}
}
