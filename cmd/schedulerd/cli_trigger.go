package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/control"
)

const triggerUsage = "schedulerd trigger JOB [--dedup-id ID] [--not-before T] [--not-after T] [--payload S | --payload-file F|-] [--wait] [--json]"

// stdin is where --payload-file - reads; a variable for tests.
var stdin io.Reader = os.Stdin

// cmdTrigger makes a run of a declared job now.
func cmdTrigger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		dedup, notBefore, notAfter, payload, payloadFile *string
		req                                              control.TriggerRequest
	)
	return actOnOne[*control.Run]{
		name: "trigger", usage: triggerUsage,
		flags: func(fs *flag.FlagSet) {
			dedup = fs.String("dedup-id", "", "refuse the trigger while an unfinished run of the job has the dedup `ID`")
			notBefore = fs.String("not-before", "", "the earliest start `T`: RFC 3339, or +DURATION from now such as +30m")
			notAfter = fs.String("not-after", "", "the latest start `T`: RFC 3339, or +DURATION from now; the run is cancelled (expired) if not started by then")
			payload = fs.String("payload", "", "the text `S` passed to the job as $SCHEDULERD_PAYLOAD (visible in ps: use --payload-file for secrets)")
			payloadFile = fs.String("payload-file", "", "read the payload from the file `F`, or from standard input for -, byte for byte")
		},
		check: func() (err error) {
			if *payloadFile != "" {
				if *payload != "" {
					return usageError{fmt.Errorf("trigger: give --payload or --payload-file, not both")}
				}
				if *payload, err = readPayload(*payloadFile); err != nil {
					return err
				}
			}
			now := time.Now()
			req = control.TriggerRequest{DedupID: *dedup, Payload: *payload}
			if req.NotBefore, err = parseWhen("--not-before", *notBefore, now); err != nil {
				return err
			}
			req.NotAfter, err = parseWhen("--not-after", *notAfter, now)
			return err
		},
		call: func(c *control.Client, ctx context.Context, job string) (*control.Run, error) {
			return c.Trigger(ctx, job, req)
		},
		line:          func(_ string, run *control.Run) string { return describe(run) },
		wait:          "wait until the run finishes; exit 0 only if it completed",
		waitCompleted: true,
	}.run(ctx, args, stdout, stderr)
}

// readPayload reads --payload-file: a file, or standard input for "-", at
// most control.MaxPayload bytes.
func readPayload(name string) (string, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", usageError{fmt.Errorf("trigger: --payload-file: %w", err)}
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, control.MaxPayload+1))
	if err != nil {
		return "", usageError{fmt.Errorf("trigger: --payload-file: %w", err)}
	}
	if len(b) > control.MaxPayload {
		return "", usageError{fmt.Errorf("trigger: --payload-file: the payload is larger than %d bytes", control.MaxPayload)}
	}
	return string(b), nil
}

// parseWhen reads a time flag: RFC 3339, or "+DURATION" from now.
func parseWhen(name, s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return nil, usageError{fmt.Errorf("%s: want RFC 3339 such as 2026-05-01T03:00:00Z or +DURATION such as +30m, got %q", name, s)}
		}
		t := now.Add(d).UTC()
		return &t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: want RFC 3339 such as 2026-05-01T03:00:00Z or +DURATION such as +30m, got %q", name, s)}
	}
	t = t.UTC()
	return &t, nil
}

// cmdRerun makes a new run of the job of a run, linked to it.
func cmdRerun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return actOnOne[*control.Run]{
		name: "rerun", usage: "schedulerd rerun ID [--wait] [--json]",
		call: (*control.Client).Rerun,
		line: func(id string, run *control.Run) string {
			return fmt.Sprintf("%s, rerun of %s", describe(run), id)
		},
		wait:          "wait until the new run finishes; exit 0 only if it completed",
		waitCompleted: true,
	}.run(ctx, args, stdout, stderr)
}

// cmdCancel cancels a waiting run at once, or asks the node that runs it to
// stop the attempt (SIGTERM to its process group, SIGKILL after kill_grace).
func cmdCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return actOnOne[*control.Run]{
		name: "cancel", usage: "schedulerd cancel ID [--wait] [--json]",
		call: (*control.Client).Cancel,
		line: func(_ string, run *control.Run) string { return describe(run) },
		wait: "wait until the run has stopped",
	}.run(ctx, args, stdout, stderr)
}
