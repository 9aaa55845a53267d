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
	"strings"
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		writeUsage(stderr)
		return usageError{errors.New("no command given")}
	}
	switch args[0] {
	case "--version":
		args[0] = "version"
	case "-h", "--help":
		args[0] = "help"
	}
	// The client flags may come before the command too: they are handed
	// to it ahead of its own arguments.
	lead, leadNames, name, rest, err := leadingFlags(args)
	if err != nil {
		return err
	}
	if name == "" {
		return usageError{fmt.Errorf("no command after %s: schedulerd help lists them", strings.Join(lead, " "))}
	}
	c := lookupCommand(name)
	if c == nil {
		writeUsage(stderr)
		return usageError{fmt.Errorf("unknown command %q", name)}
	}
	if err := checkLeadingFlags(c, leadNames); err != nil {
		return err
	}
	err = c.run(ctx, append(lead, rest...), stdout, stderr)
	var h helpRequest
	if errors.As(err, &h) {
		writeCommandHelp(stdout, c, h.fs)
		return nil
	}
	return err
}
