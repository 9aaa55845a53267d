package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/schedulerd/schedulerd/control"
)

// cmdProgress reports the progress of the run that the calling job
// executes: it reads SCHEDULERD_RUN_ID, SCHEDULERD_ATTEMPT and
// SCHEDULERD_ATTEMPT_TOKEN from the environment the daemon gave the job,
// and talks to its socket, never to the HTTP API.
// The daemon takes the report only with the attempt's token, and fences
// the write by the attempt and its own incarnation (a stale attempt is
// refused).
func cmdProgress(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("progress")
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	const usage = "usage: schedulerd progress PERCENT [MESSAGE], from inside a job"
	if len(pos) < 1 {
		return usageError{fmt.Errorf("%s", usage)}
	}
	percent, err := strconv.Atoi(strings.TrimSuffix(pos[0], "%"))
	if err != nil || percent < 0 || percent > 100 {
		return usageError{fmt.Errorf("progress: PERCENT must be a number from 0 to 100, got %q", pos[0])}
	}
	msg := strings.Join(pos[1:], " ")
	if len(msg) > control.MaxProgressMessage {
		return usageError{fmt.Errorf("progress: MESSAGE is longer than %d bytes", control.MaxProgressMessage)}
	}
	runID := os.Getenv("SCHEDULERD_RUN_ID")
	attempt, aerr := strconv.Atoi(os.Getenv("SCHEDULERD_ATTEMPT"))
	token := os.Getenv("SCHEDULERD_ATTEMPT_TOKEN")
	if runID == "" || aerr != nil || attempt < 1 || token == "" {
		return usageError{fmt.Errorf("progress: SCHEDULERD_RUN_ID, SCHEDULERD_ATTEMPT and SCHEDULERD_ATTEMPT_TOKEN are not set: run it from inside a job")}
	}
	// A job reports on the socket it was given: the HTTP API takes no
	// attempt tokens.
	if *cf.api != "" {
		return usageError{fmt.Errorf("progress: a job reports its progress on the control socket (SCHEDULERD_SOCKET), not the HTTP API: leave out --api")}
	}
	c, err := cf.socketClient()
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetAttemptToken(attempt, token)
	if err := c.Progress(ctx, runID, control.ProgressRequest{Attempt: attempt, Percent: percent, Message: msg}); err != nil {
		return fmt.Errorf("progress of run %s attempt %d: %w", runID, attempt, err)
	}
	return nil
}
