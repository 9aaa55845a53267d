// Command schedulerd is the cron and deferred-job scheduler daemon and its
// command-line client. main is thin: it wires flags to the packages and maps
// errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

// Exit codes.
const (
	exitFailure = 1 // anything else
	exitUsage   = 2 // bad flags, bad config, bad schedule: fix the input
)

// usageError marks errors that exit with exitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "schedulerd: %v\n", err)
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if code, ok := cliExitCode(err); ok {
		return code
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

const usage = `schedulerd: a cron and deferred-job scheduler

Usage:
  schedulerd run [--config F]            run the daemon
  schedulerd check-config [--config F]   validate the config, print jobs and next fire times
  schedulerd next --schedule SPEC [--timezone TZ] [--from TIME] [-n N]
                                         preview fire times
  schedulerd migrate [--config F]        apply store migrations
  schedulerd import-crontab [--user NAME] FILE|-
                                         print [[job]] tables equivalent to a crontab
  schedulerd version [--json]            print version, commit, build date and Go version

Commands that talk to the running daemon over its control socket:
  schedulerd trigger JOB [--dedup-id ID] [--not-before T] [--not-after T] [--payload S | --payload-file F|-] [--wait]
                                         make a run now; T is RFC 3339 or +30m
  schedulerd jobs                        declared jobs, next fire time, paused, last run
  schedulerd runs [--job J] [--status S] [--limit N]
                                         runs, newest first
  schedulerd runs show ID [--raw]        one run with its attempts, output and events;
                                         --raw prints them unescaped
  schedulerd cancel ID [--wait]          cancel a run, or stop its running attempt
  schedulerd rerun ID [--wait]           make a new run linked to an earlier one
  schedulerd pause JOB / resume JOB      stop / restart a job's schedule
  schedulerd nodes                       nodes with last heartbeat and state
  schedulerd health                      exit 0 when this node is healthy
  schedulerd reload                      re-read the config (same as SIGHUP)
  schedulerd progress PERCENT [MESSAGE]  report progress from inside a job

They take --json (one JSON object per line), --socket PATH, and --config F;
the socket is --socket, else $SCHEDULERD_SOCKET, else the socket of the config.
Exit codes: 0 ok, 1 failure, 2 bad input or rejected reload, 3 daemon not
running, 4 permission denied, 5 unknown job, 6 unknown run, 7 duplicate
dedup id, 8 invalid window, 9 a waited-for run did not complete.

The default config is /etc/schedulerd/schedulerd.toml.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("no command given")}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, rest, stderr)
	case "check-config":
		return cmdCheckConfig(rest, stdout, stderr)
	case "next":
		return cmdNext(rest, stdout)
	case "migrate":
		return cmdMigrate(ctx, rest, stdout)
	case "import-crontab":
		return cmdImportCrontab(rest, stdout, stderr)
	case "version", "--version":
		return cmdVersion(rest, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if f, ok := socketCommands[cmd]; ok {
		return f(ctx, rest, stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Errorf("unknown command %q", cmd)}
}
