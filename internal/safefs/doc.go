// Package safefs owns the checks of the directories that schedulerd
// creates files in (the state directory, the socket directory) and the
// opening of files in them without following symlinks.
//
// The rules, which OpenDir and CheckDir apply to every directory on the way
// to the one named, resolving the path one component at a time through
// opened handles:
//
//   - The directory itself is not a symlink, is owned by root or the
//     daemon's effective user, and is writable by neither its group nor
//     others: a sticky bit does not make it acceptable, since the daemon
//     creates files in it.
//   - Every ancestor is owned by root or the daemon's user, and is not
//     writable by its group or others unless it is sticky (like /tmp); in
//     a sticky one, an entry followed (a directory or a symlink) must
//     itself be owned by root or the daemon's user. Symlinks among the
//     ancestors are followed, since only their owner can replace them.
//   - A missing component is made with the mode given (the umask may
//     narrow it), once its parent passed the checks.
//
// Files are then opened relative to the directory's handle with O_NOFOLLOW
// (Dir.OpenFile) and must be regular files of the daemon's user with one
// link; their modes are narrowed through the handle (LimitFileMode).
// A refusal is an *UnsafeError naming the directory, the component at fault
// and why.
package safefs
