package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/schedulerd/schedulerd/internal/safefs"
)

// stateDirRole names the database's directory in errors.
const stateDirRole = "state directory"

// dirMode is the mode of the directories Open makes.
const dirMode fs.FileMode = 0o750

// sideFiles are the suffixes of the files SQLite keeps next to the
// database: the WAL, its shared-memory index, and a rollback journal.
var sideFiles = []string{"-wal", "-shm", "-journal"}

// prepareFiles creates the database file name of dir 0600 when it is
// missing, before SQLite does: SQLite would make it 0644 whatever the umask
// allows, and it makes the WAL, shared-memory and journal files with the
// mode bits of the database file. The database file and the side files left
// by an earlier run are checked like the lock file (no symlink, a regular
// file of ours with one link), and those that others could read are made
// 0600 through their handle.
func prepareFiles(dir *safefs.Dir, name string, log *slog.Logger) error {
	if err := limitFile(dir, name, os.O_RDONLY|os.O_CREATE, log); err != nil {
		return err
	}
	for _, suffix := range sideFiles {
		if err := limitFile(dir, name+suffix, os.O_RDONLY, log); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// limitFile opens the file name of dir with flag and narrows its mode
// (safefs.LimitFileMode), saying so in the log.
func limitFile(dir *safefs.Dir, name string, flag int, log *slog.Logger) error {
	f, err := dir.OpenFile(name, flag, safefs.FileMode)
	if err != nil {
		return err
	}
	defer f.Close()
	was, err := safefs.LimitFileMode(f)
	if err != nil {
		return err
	}
	if was != 0 {
		log.Warn("a database file was readable by others; its mode is now 0600",
			"file", f.Name(), "was", fmt.Sprintf("%04o", was))
	}
	return nil
}
