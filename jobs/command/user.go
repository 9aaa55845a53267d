package command

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// defaultPath is the PATH every job starts with.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// defaultShell is the SHELL of a job whose passwd entry names no shell.
const defaultShell = "/bin/sh"

// passwdFile is where the login shell of a user is read from; os/user does
// not expose that field.
const passwdFile = "/etc/passwd"

// Identity is the set of credentials and passwd fields a job runs with.
type Identity struct {
	// UID and GID are the numeric user and primary group IDs.
	UID, GID uint32
	// Groups are the supplementary group IDs of the user.
	Groups []uint32
	// Name is the user's login name, Home its home directory and Shell its
	// login shell ("" when the passwd entry names none or cannot be read).
	Name, Home, Shell string
}

// LookupUser resolves a user name or numeric uid to the credentials a job
// would run with. A name is tried first; if no user has that name and name is
// a number, it is looked up as a uid. Config validation uses it to reject
// unknown users early.
func LookupUser(name string) (*Identity, error) {
	if name == "" {
		return nil, errors.New("unknown user: empty user name")
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return nil, fmt.Errorf("look up user %q: %w", name, err)
		}
		if _, perr := strconv.ParseUint(name, 10, 32); perr != nil {
			return nil, fmt.Errorf("unknown user %q", name)
		}
		u, err = user.LookupId(name)
		if err != nil {
			var unknownID user.UnknownUserIdError
			if errors.As(err, &unknownID) {
				return nil, fmt.Errorf("unknown user %q: no user has that name or uid", name)
			}
			return nil, fmt.Errorf("look up uid %q: %w", name, err)
		}
	}
	return identityOf(u)
}

// identityOf converts an os/user entry into an Identity.
func identityOf(u *user.User) (*Identity, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: bad uid %q", u.Username, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: bad gid %q", u.Username, u.Gid)
	}
	id := &Identity{
		UID:   uint32(uid),
		GID:   uint32(gid),
		Name:  u.Username,
		Home:  u.HomeDir,
		Shell: passwdShell(passwdFile, u.Username, u.Uid),
	}
	gids, err := u.GroupIds()
	if err != nil {
		// Without the group database the job gets only its primary group:
		// fewer privileges, never more.
		gids = nil
	}
	seen := map[uint32]bool{}
	for _, s := range append([]string{u.Gid}, gids...) {
		g, err := strconv.ParseUint(s, 10, 32)
		if err != nil || seen[uint32(g)] {
			continue
		}
		seen[uint32(g)] = true
		id.Groups = append(id.Groups, uint32(g))
	}
	return id, nil
}

// passwdShell returns the login shell field of the entry for name (or, when
// no entry has that name, for uid) in the passwd file at path, or "" if there
// is none.
func passwdShell(path, name, uid string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	byUID := ""
	foundUID := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Split(line, ":")
		if len(fields) != 7 {
			continue
		}
		if fields[0] == name {
			return fields[6]
		}
		if !foundUID && fields[2] == uid {
			byUID, foundUID = fields[6], true
		}
	}
	return byUID
}

// currentIdentity returns the identity of the daemon's own user. When the
// user database has no entry for it, the numeric IDs are used with "/" as the
// home directory.
func currentIdentity() *Identity {
	uid := strconv.Itoa(os.Getuid())
	if u, err := user.LookupId(uid); err == nil {
		if id, err := identityOf(u); err == nil {
			return id
		}
	}
	return &Identity{
		UID:    uint32(os.Getuid()),
		GID:    uint32(os.Getgid()),
		Groups: []uint32{uint32(os.Getgid())},
		Name:   uid,
		Home:   "/",
	}
}

// BaseEnv returns the minimal environment for a job run as id (nil means the
// daemon's own user): PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,
// and HOME, USER, LOGNAME and SHELL from the user's passwd entry. SHELL
// defaults to /bin/sh and HOME to / when the entry leaves them empty. Nothing
// is taken from the daemon's own environment. The returned map is new and
// owned by the caller.
func BaseEnv(id *Identity) map[string]string {
	if id == nil {
		id = currentIdentity()
	}
	home := id.Home
	if home == "" {
		home = "/"
	}
	shell := id.Shell
	if shell == "" {
		shell = defaultShell
	}
	return map[string]string{
		"PATH":    defaultPath,
		"HOME":    home,
		"USER":    id.Name,
		"LOGNAME": id.Name,
		"SHELL":   shell,
	}
}
