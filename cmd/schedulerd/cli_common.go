package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/control"
	"github.com/schedulerd/schedulerd/internal/safefs"
	"github.com/schedulerd/schedulerd/jobs"
)

// Exit codes of the commands that talk to the daemon, besides exitFailure
// (1) and exitUsage (2); the table exitCodes says what each means.
const (
	exitNotRunning    = 3
	exitPermission    = 4
	exitUnknownJob    = 5
	exitUnknownRun    = 6
	exitDuplicate     = 7
	exitInvalidWindow = 8
	exitRunFailed     = 9
)

// cliExitCode returns the exit code of an error of a socket command.
func cliExitCode(err error) (int, bool) {
	var rf runFailedError
	switch {
	case errors.As(err, &rf):
		return exitRunFailed, true
	case errors.Is(err, control.ErrDaemonNotRunning):
		return exitNotRunning, true
	case errors.Is(err, control.ErrPermissionDenied):
		return exitPermission, true
	case errors.Is(err, control.ErrUnknownJob), errors.Is(err, control.ErrNotExpected):
		return exitUnknownJob, true
	case errors.Is(err, control.ErrUnknownRun):
		return exitUnknownRun, true
	case errors.Is(err, control.ErrDuplicate):
		return exitDuplicate, true
	case errors.Is(err, control.ErrInvalidWindow):
		return exitInvalidWindow, true
	case errors.Is(err, control.ErrBadRequest), errors.Is(err, control.ErrReloadRejected):
		return exitUsage, true
	}
	return 0, false
}

// runFailedError is a followed run that finished but did not complete.
type runFailedError struct{ run *control.Run }

func (e runFailedError) Error() string {
	msg := fmt.Sprintf("run %s of %s ended %s", e.run.ID, e.run.Job, e.run.Status)
	if e.run.Reason != "" {
		msg += " (" + string(e.run.Reason) + ")"
	}
	if e.run.Error != "" {
		msg += ": " + e.run.Error
	}
	return msg
}

// systemdSocket is where the daemon listens under the unit file
// (RuntimeDirectory=schedulerd), which a client outside the unit cannot
// learn from the config.
const systemdSocket = "/run/schedulerd/" + config.SocketName

// clientFlags are the flags every client command takes.
type clientFlags struct {
	fs        *flag.FlagSet
	stderr    io.Writer // for warnings about the config and the token file
	socket    *string
	config    *string
	api       *string
	tokenFile *string
	json      *bool
}

func addClientFlags(fs *flag.FlagSet, stderr io.Writer) *clientFlags {
	return &clientFlags{
		fs:        fs,
		stderr:    stderr,
		socket:    fs.String("socket", "", "the control socket `PATH` (default: $SCHEDULERD_SOCKET, else the socket of --config)"),
		config:    fs.String("config", defaultConfig, "the config file `F` whose socket to use; without it, ./schedulerd.toml when the default does not exist"),
		api:       fs.String("api", "", "use the daemon's HTTP API at `URL`, such as https://host:8080, instead of the socket (default: $SCHEDULERD_API)"),
		tokenFile: fs.String("token-file", "", "read the API's token from the file `F`, which others may not read (default: $SCHEDULERD_TOKEN_FILE)"),
		json:      fs.Bool("json", false, "print one JSON object per line"),
	}
}

// client returns a client of the HTTP API when --api is given, else of
// the socket when --socket is, else of the API of $SCHEDULERD_API, else of
// the socket found from $SCHEDULERD_SOCKET or the config (socketClient).
func (cf *clientFlags) client() (*control.Client, error) {
	api := *cf.api
	switch {
	case api != "" && *cf.socket != "":
		return nil, usageError{errors.New("give --api or --socket, not both")}
	case api == "" && *cf.socket == "":
		api = os.Getenv("SCHEDULERD_API")
	}
	if api == "" {
		if *cf.tokenFile != "" {
			return nil, usageError{errors.New("--token-file is the token of the HTTP API: give --api URL too (or $SCHEDULERD_API)")}
		}
		return cf.socketClient()
	}
	tokenFile := cmp.Or(*cf.tokenFile, os.Getenv("SCHEDULERD_TOKEN_FILE"))
	if tokenFile == "" {
		return nil, usageError{fmt.Errorf("the HTTP API at %s needs a token: give --token-file F or $SCHEDULERD_TOKEN_FILE", api)}
	}
	token, err := readTokenFile(tokenFile, cf.stderr)
	if err != nil {
		return nil, err
	}
	c, err := control.NewAPIClient(api, token)
	if err != nil {
		return nil, usageError{fmt.Errorf("--api: %w", err)}
	}
	return c, nil
}

// maxTokenFile bounds a token file.
const maxTokenFile = 4096

// readTokenFile reads the API's token: the file's one line, spaces and
// line end trimmed. A file every user may read is refused (the token is a
// password); one its group may read draws a warning.
func readTokenFile(path string, stderr io.Writer) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", usageError{fmt.Errorf("token file: %w", err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", usageError{fmt.Errorf("token file: %w", err)}
	}
	perm := fi.Mode().Perm()
	switch {
	case !fi.Mode().IsRegular():
		return "", usageError{fmt.Errorf("token file %s is not a regular file", path)}
	case perm&0o006 != 0:
		return "", usageError{fmt.Errorf("token file %s may be read or written by every user (mode %04o): "+
			"the token is a password; chmod 600 %s, then use it", path, perm, path)}
	case perm&0o040 != 0:
		fmt.Fprintf(stderr, "schedulerd: warning: token file %s is readable by its group (mode %04o): every member can use the token; chmod 600 it unless that is meant\n", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", usageError{fmt.Errorf("token file: %w", err)}
	}
	token := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenFile:
		return "", usageError{fmt.Errorf("token file %s is larger than %d bytes: it should hold one token", path, maxTokenFile)}
	case token == "":
		return "", usageError{fmt.Errorf("token file %s is empty", path)}
	case strings.ContainsAny(token, " \t\r\n"):
		return "", usageError{fmt.Errorf("token file %s holds more than one word: it should hold the token alone", path)}
	}
	return token, nil
}

// socketClient returns a client of the socket found from --socket, else
// $SCHEDULERD_SOCKET, else the config's socket. When the config is the
// default one and names no reachable socket, the socket of the systemd
// unit is tried: the daemon's RUNTIME_DIRECTORY is not in our environment.
func (cf *clientFlags) socketClient() (*control.Client, error) {
	path, err := cf.socketPath()
	if err != nil {
		return nil, err
	}
	if err := checkSocketDir(path); err != nil {
		return nil, err
	}
	return control.NewClient(path), nil
}

// checkSocketDir refuses to connect through a directory that another user
// could have planted or re-pointed (a symlink, or a parent others can
// write to): a root client's payload must not reach their listener. A
// missing or unreadable directory is left to the connection, which says
// that no daemon runs or that the caller may not use the socket.
func checkSocketDir(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	err = safefs.CheckSocketDir(filepath.Dir(abs))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("refusing to connect to %s: %w", abs, err)
	}
	return nil
}

// socketPath finds the control socket: --socket, else $SCHEDULERD_SOCKET,
// else the config's (configPath: --config, the default config or
// ./schedulerd.toml), else the systemd unit's.
func (cf *clientFlags) socketPath() (string, error) {
	if *cf.socket != "" {
		return *cf.socket, nil
	}
	if s := os.Getenv("SCHEDULERD_SOCKET"); s != "" {
		return s, nil
	}
	configGiven := flagGiven(cf.fs, "config")
	path, err := configPath(*cf.config, configGiven)
	if err != nil {
		return "", err
	}
	d, past, err := config.LoadDaemonPast(path)
	if err == nil && past != nil {
		// The daemon runs its last good config; say that this one is not.
		fmt.Fprintf(cf.stderr, "schedulerd: warning: %v\nschedulerd: read [daemon] alone for the socket; the daemon keeps its running config until this file is fixed and reloaded\n", past)
	}
	fallback := !configGiven && os.Getenv("RUNTIME_DIRECTORY") == "" && exists(systemdSocket)
	switch {
	case err == nil && (exists(d.Socket) || !fallback):
		return d.Socket, nil
	case fallback:
		return systemdSocket, nil
	case !configGiven && errors.Is(err, fs.ErrNotExist):
		return "", usageError{fmt.Errorf("find the control socket: there is no %s, nor a ./%s here: give --config F, --socket PATH or $SCHEDULERD_SOCKET", defaultConfig, localConfig)}
	}
	return "", usageError{fmt.Errorf("find the control socket: give --socket or $SCHEDULERD_SOCKET, or a readable --config: %w", err)}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// when formats an API time for a table: RFC 3339 in UTC, "-" for none.
func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func exitCodeText(c *int) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprint(*c)
}

// oneArg checks that a command got exactly one positional argument.
func oneArg(pos []string, usage string) (string, error) {
	if len(pos) != 1 || pos[0] == "" {
		return "", usageError{fmt.Errorf("usage: %s", usage)}
	}
	return pos[0], nil
}

// actOnOne is the shape of the commands that act on one job or one run
// (trigger, rerun, cancel, pause, resume, forget): the client flags and
// the command's own, one argument, a client, one call, then the reply as
// JSON or as a line; with --wait, the run that the call made or stopped is
// followed until it finishes.
type actOnOne[R any] struct {
	name  string // the command
	usage string // its synopsis, for a wrong number of arguments
	// flags adds the command's own flags (nil for none); check reads them
	// once parsed, before any connection (nil for nothing to check).
	flags func(fs *flag.FlagSet)
	check func() error
	// call makes the request about arg (a method expression such as
	// (*control.Client).Pause); line says its reply.
	call func(c *control.Client, ctx context.Context, arg string) (R, error)
	line func(arg string, reply R) string
	// wait is the usage of --wait, for the commands whose reply is a run
	// (R is *control.Run), or "" for none. waitCompleted makes --wait exit
	// 9 unless the run completed (trigger, rerun); without it --wait waits
	// for the run to stop (cancel).
	wait          string
	waitCompleted bool
}

func (o actOnOne[R]) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(o.name)
	cf := addClientFlags(fs, stderr)
	if o.flags != nil {
		o.flags(fs)
	}
	wait := new(bool)
	if o.wait != "" {
		wait = fs.Bool("wait", false, o.wait)
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	arg, err := oneArg(pos, o.usage)
	if err != nil {
		return err
	}
	if o.check != nil {
		if err := o.check(); err != nil {
			return err
		}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	reply, err := o.call(c, ctx, arg)
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.name, arg, err)
	}
	switch {
	case !*cf.json:
		fmt.Fprintln(stdout, o.line(arg, reply))
	case !*wait:
		return printJSON(stdout, reply)
	}
	if !*wait {
		return nil
	}
	run, ok := any(reply).(*control.Run)
	if !ok {
		return fmt.Errorf("%s --wait: the reply is no run", o.name)
	}
	if o.waitCompleted {
		return followCompleted(ctx, c, run, *cf.json, stdout)
	}
	_, err = follow(ctx, c, run, *cf.json, stdout)
	return err
}

// describe is a one-line summary of a run's state.
func describe(r *control.Run) string {
	s := fmt.Sprintf("run %s of %s: %s", r.ID, r.Job, r.Status)
	switch r.Status {
	case jobs.StatusPending:
		if r.NotBefore != nil && r.NotBefore.After(time.Now()) {
			s += ", not before " + when(r.NotBefore)
		}
	case jobs.StatusRunning:
		s += fmt.Sprintf(" (attempt %d of %d on %s)", r.Attempt, r.MaxAttempts, r.Node)
		if r.CancelRequested {
			s += ", cancel requested"
		}
	case jobs.StatusRetrying:
		s += fmt.Sprintf(" (attempt %d of %d failed: %s), next attempt not before %s", r.Attempt, r.MaxAttempts, escapeText(r.Error, false), when(r.NotBefore))
	case jobs.StatusCompleted:
		s += " (exit code " + exitCodeText(r.ExitCode) + ")"
	default:
		if r.Reason != "" {
			s += " (" + string(r.Reason) + ")"
		}
		if r.Error != "" {
			s += ": " + escapeText(r.Error, false)
		}
	}
	return s
}

// follow waits for a run to finish, printing each status it moves through
// unless asJSON, in which case only the finished run is printed.
func follow(ctx context.Context, c *control.Client, run *control.Run, asJSON bool, stdout io.Writer) (*control.Run, error) {
	seen := run.Status
	final, err := c.Follow(ctx, run.ID, func(r *control.Run) {
		if !asJSON && r.Status != seen {
			fmt.Fprintln(stdout, describe(r))
		}
		seen = r.Status
	})
	if err != nil {
		return nil, fmt.Errorf("wait for run %s: %w", run.ID, err)
	}
	if asJSON {
		if err := printJSON(stdout, final); err != nil {
			return nil, err
		}
	}
	return final, nil
}

// followCompleted follows a run and fails with runFailedError unless it
// completes.
func followCompleted(ctx context.Context, c *control.Client, run *control.Run, asJSON bool, stdout io.Writer) error {
	final, err := follow(ctx, c, run, asJSON, stdout)
	if err != nil {
		return err
	}
	if final.Status != jobs.StatusCompleted {
		return runFailedError{final}
	}
	return nil
}
