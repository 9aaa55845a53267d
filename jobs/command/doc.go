// Package command owns running one job attempt as a contained operating
// system process: it builds the job's environment from scratch, resolves the
// user it runs as, starts it in its own process group, captures its combined
// output within fixed bounds, and makes sure nothing of the job outlives the
// attempt.
//
// # Containment
//
// The environment of a job starts empty: it is exactly [BaseEnv] for the
// job's identity plus [Spec.Env]. Nothing of the daemon's own environment
// (sockets, credentials, store addresses) is passed on.
//
// A job gets three descriptors: /dev/null as standard input and one pipe as
// standard output and error. A descriptor that the calling process holds
// without close-on-exec (one it inherited from its own parent) would reach
// the job as well; the daemon marks all of those close-on-exec when it
// starts, and a program that embeds this package should do the same.
//
// Every job runs as the leader of a new session, and so of a new process
// group whose ID is its pid. The session has no controlling terminal: a job
// cannot open /dev/tty, so it cannot type into the terminal of whoever
// started the daemon (TIOCSTI). When the context given to [Run] is done, the
// whole group receives SIGTERM and, if the main process has not exited or
// the output pipe is still held open [Spec.KillGrace] later, SIGKILL.
// When the job's main process exits on its own, background processes it left
// behind get a short, bounded time to close the output pipe; then whatever
// remains of the group is killed with SIGKILL and reading stops, so a
// background process holding the pipe open can never hang a run.
//
// The main process is not reaped until the group has been dealt with, so its
// process ID, which is also the group ID, cannot be reused while the group is
// being signalled.
//
// # Output
//
// Standard output and standard error share one pipe, so their bytes arrive
// interleaved in the order the job wrote them. The first [Spec.OutputLimit]
// bytes and the last [Spec.OutputLimit] bytes are kept; everything in between
// is counted and dropped. Memory use per run is bounded by twice the limit
// plus one fixed-size read buffer, whatever the job writes.
package command
