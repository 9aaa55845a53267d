package sqlite

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/schedulerd/schedulerd/internal/safefs"
)

// secretFile makes a root-only file outside the state directory, as the
// target of a planted symlink, and returns a check that it is unchanged.
func secretFile(t *testing.T) (path string, unchanged func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		b, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || serr != nil || string(b) != "root only\n" || fi.Mode() != 0o600 {
			t.Errorf("the symlink's target changed: %q %v %v", b, fi.Mode(), errors.Join(err, serr))
		}
	}
}

// stateDir makes an empty state directory of mode 0700, ours.
func stateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// withUmask runs fn under the process umask mask. The tests that use it do
// not run in parallel with others.
func withUmask(mask int, fn func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	fn()
}

// TestPlantedSymlinksAreNotFollowed: a symlink left in the state directory
// as the lock file, the database or its WAL, pointing at a root-only file,
// makes Open fail with an error naming it, and the file is left as it was
// (the lock file was truncated and given the daemon's pid before).
func TestPlantedSymlinksAreNotFollowed(t *testing.T) {
	for _, name := range []string{"schedulerd.db.lock", "schedulerd.db", "schedulerd.db-wal", "schedulerd.db-shm"} {
		t.Run(name, func(t *testing.T) {
			secret, unchanged := secretFile(t)
			dir := stateDir(t)
			link := filepath.Join(dir, name)
			if err := os.Symlink(secret, link); err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.Context(), Options{Path: filepath.Join(dir, "schedulerd.db"), Lock: true})
			if err == nil {
				s.Close()
			}
			unchanged()
			if !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), link+" is a symlink") {
				t.Fatalf("Open: %v, want a refusal of the symlink %s", err, link)
			}
		})
	}
}

// TestUnsafeStateDirIsRefused: a state directory that another user could
// write to, swap or owns is refused at Open, with an error that names it and
// says why, before anything is created in it.
func TestUnsafeStateDirIsRefused(t *testing.T) {
	tests := []struct {
		name  string
		root  bool
		setup func(t *testing.T, base string) (dir string)
		want  string // the error: %s is the state directory
	}{
		{
			name: "a symlink to a directory",
			setup: func(t *testing.T, base string) string {
				real := filepath.Join(base, "real")
				if err := os.Mkdir(real, 0o700); err != nil {
					t.Fatal(err)
				}
				link := filepath.Join(base, "state")
				if err := os.Symlink(real, link); err != nil {
					t.Fatal(err)
				}
				return link
			},
			want: "state directory %s is a symlink",
		},
		{
			name: "writable by others",
			setup: func(t *testing.T, base string) string {
				return mkdirMode(t, filepath.Join(base, "state"), 0o777)
			},
			want: "state directory %s is writable by its group and others (mode 0777)",
		},
		{
			name: "writable by its group",
			setup: func(t *testing.T, base string) string {
				return mkdirMode(t, filepath.Join(base, "state"), 0o770)
			},
			want: "state directory %s is writable by its group",
		},
		{
			name: "sticky and writable by others",
			setup: func(t *testing.T, base string) string {
				return mkdirMode(t, filepath.Join(base, "state"), 0o777|fs.ModeSticky)
			},
			want: "state directory %s is writable by its group and others (mode 1777)",
		},
		{
			name: "under a directory writable by others",
			setup: func(t *testing.T, base string) string {
				open := mkdirMode(t, filepath.Join(base, "open"), 0o777)
				return mkdirMode(t, filepath.Join(open, "state"), 0o700)
			},
			want: "state directory %s: ",
		},
		{
			name: "owned by another user",
			root: true,
			setup: func(t *testing.T, base string) string {
				dir := mkdirMode(t, filepath.Join(base, "state"), 0o700)
				if err := os.Chown(dir, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				return dir
			},
			want: "state directory %s is owned by uid 65534",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("not checked: giving the directory to another user (nobody) needs root")
			}
			dir := tt.setup(t, t.TempDir())
			s, err := Open(t.Context(), Options{Path: filepath.Join(dir, "schedulerd.db"), Lock: true})
			if err == nil {
				s.Close()
			}
			want := strings.Replace(tt.want, "%s", dir, 1)
			if !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v, want %q", err, want)
			}
			if n := names(t, dir); len(n) != 0 {
				t.Errorf("files created in a refused state directory: %v", n)
			}
		})
	}
}

// mkdirMode makes dir with exactly mode, whatever the umask.
func mkdirMode(t *testing.T, dir string, mode fs.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// modes returns the permission bits of the files of dir, by name.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	for _, n := range names(t, dir) {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = fi.Mode()
	}
	return out
}

// TestFileModesWhateverTheUmask: under the umask 0, the database, its WAL
// and shared-memory files and the lock file are 0600 (SQLite made the
// database 0644 and gave the WAL and shared-memory files its mode), and the
// directory Open makes is 0750.
func TestFileModesWhateverTheUmask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	var s *Store
	withUmask(0, func() { s = openTest(t, filepath.Join(dir, "schedulerd.db"), true) })
	defer s.Close()
	got := modes(t, dir)
	for _, n := range []string{"schedulerd.db", "schedulerd.db-wal", "schedulerd.db-shm", "schedulerd.db.lock"} {
		if _, ok := got[n]; !ok {
			t.Errorf("no %s in the state directory: %v", n, got)
		}
	}
	for n, m := range got {
		if m != 0o600 {
			t.Errorf("%s has mode %v, want a regular file of mode 0600", n, m)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("state directory %v %v, want 0750", fi.Mode(), err)
	}
}

// TestWideFileModesAreNarrowed: files left readable by others by an earlier
// version (0644) are made 0600 through their handles, with a warning; a
// database the operator gave its group to read (0640) stays so, and SQLite
// gives its WAL and shared-memory files the same mode.
func TestWideFileModesAreNarrowed(t *testing.T) {
	dir := stateDir(t)
	path := filepath.Join(dir, "schedulerd.db")
	openTest(t, path, true).Close()
	// Leave every file as an earlier version made it, and a stale WAL.
	for _, n := range []string{"schedulerd.db", "schedulerd.db.lock", "schedulerd.db-wal", "schedulerd.db-shm"} {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	s, err := Open(t.Context(), Options{Path: path, Lock: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for n, m := range modes(t, dir) {
		if m != 0o600 {
			t.Errorf("%s has mode %v after Open, want 0600", n, m)
		}
	}
	if c := strings.Count(logs.String(), "readable by others"); c < 3 {
		t.Errorf("%d warnings about files readable by others, want one per file:\n%s", c, logs.String())
	}
	s.Close()

	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, true)
	defer s.Close()
	got := modes(t, dir)
	for _, n := range []string{"schedulerd.db", "schedulerd.db-wal", "schedulerd.db-shm"} {
		if got[n] != 0o640 {
			t.Errorf("%s has mode %v, want the database's 0640", n, got[n])
		}
	}
	if got["schedulerd.db.lock"] != 0o600 {
		t.Errorf("the lock file has mode %v, want 0600", got["schedulerd.db.lock"])
	}
}

// TestHardLinkedLockIsRefused: a lock file with another name (a hard link
// to a file the daemon must not write) is refused before it is truncated.
func TestHardLinkedLockIsRefused(t *testing.T) {
	dir := stateDir(t)
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(other, filepath.Join(dir, "schedulerd.db.lock")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), Options{Path: filepath.Join(dir, "schedulerd.db"), Lock: true})
	if !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), "has 2 hard links") {
		t.Fatalf("Open: %v, want a refusal of the hard link", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "keep\n" {
		t.Errorf("the linked file changed: %q", b)
	}
	if n := names(t, dir); !slices.Equal(n, []string{"other", "schedulerd.db.lock"}) {
		t.Errorf("files in the state directory: %v", n)
	}
}
