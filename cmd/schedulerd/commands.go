package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A subcommand is one command of schedulerd. The table commands is the one
// source of the usage text, of `schedulerd COMMAND --help`, of the man page
// schedulerd(8) and of the shell completions; the flags they list are read
// from the flag set the command itself parses (commandFlags), so none of
// them can name a command or a flag that the binary does not have.
type subcommand struct {
	name string
	// forms are the command's synopses after "schedulerd", each with a
	// summary of a line or two ("\n" breaks it). A synopsis names every
	// flag of the command but the client flags.
	forms []form
	// client: the command talks to the daemon over the control socket or
	// its HTTP API and takes the client flags (--socket, --config, --api,
	// --token-file, --json).
	client bool
	// about is a paragraph more for --help and the man page, or "".
	about string
	// args says, for completion, what each positional argument is:
	// argJob, argRun, argCommand, or the words to offer, space-separated
	// ("" for nothing to offer).
	args []string
	// run runs the command. It parses its flags with parseFlags before it
	// does anything else: commandFlags runs it with --help to learn them.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// form is one synopsis of a command and what it does.
type form struct{ synopsis, summary string }

// What a positional argument completes to, besides literal words.
const (
	argJob = "<job>" // a job the daemon declares
	argRun = "<run>" // a run id the daemon knows
	// argJobOrRun is a job, or a run id.
	argJobOrRun = "<job-or-run>"
	argCommand  = "<command>" // a command of this table
)

// commands is filled by init: the help, man and completion commands read
// the table they are in.
var commands []*subcommand

func init() {
	commands = []*subcommand{
		{name: "run", run: func(ctx context.Context, args []string, _, stderr io.Writer) error { return cmdRun(ctx, args, stderr) },
			forms: []form{{"run [--config F]", "run the daemon"}},
			about: "The daemon: it loads the config, opens and migrates the store, registers the node, listens on the control socket and runs the jobs until SIGTERM or SIGINT. A bad config stops it before anything starts (exit 2)."},
		{name: "check-config", run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
			return cmdCheckConfig(args, stdout, stderr)
		},
			forms: []form{{"check-config [--config F] [-n N]", "validate the config, print jobs and next fire times"}},
			about: "Offline: it reads the file and says what is wrong with it, with file, line and key, or prints each job with its next fire times. It checks the notifiers' secret files as the daemon does at start, as the user that runs it. It opens no store and needs no daemon."},
		{name: "next", run: func(_ context.Context, args []string, stdout, _ io.Writer) error { return cmdNext(args, stdout) },
			forms: []form{
				{"next --schedule SPEC [--timezone TZ] [--job NAME --jitter D] [--from TIME] [-n N] [--json]", "preview fire times"},
				{"next --job NAME [--config F] [--from TIME] [-n N] [--json]", "preview a job's fire times, its jitter included"},
			},
			about: "Offline: it prints the fire times of a cron spec with the daemon's own code, daylight saving time included. With a jitter, each line is the start of a tick's run, then the tick and the delay (\"+2m13.5s\"), a function of the job's name and the tick; --json prints the tick and the start."},
		{name: "migrate", run: func(ctx context.Context, args []string, stdout, _ io.Writer) error {
			return cmdMigrate(ctx, args, stdout)
		},
			forms: []form{{"migrate [--config F]", "apply store migrations"}},
			about: "Offline: `run` applies them at start too. Run it as the daemon's user, or the files it makes in the state directory belong to another."},
		{name: "import-crontab", run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
			return cmdImportCrontab(args, stdout, stderr)
		},
			forms: []form{{"import-crontab [--user NAME] FILE|-", "print [[job]] tables equivalent to a crontab"}},
			about: "Offline: it reads a user crontab (with --user) or a system one (/etc/crontab, /etc/cron.d, or a file whose lines name a user), and prints jobs that mean the same, with a comment for each line it cannot translate. Review them, add them to the config and run check-config."},
		{name: "token", run: cmdToken, args: []string{"new"},
			forms: []form{{"token new NAME --role ROLE [--out FILE]", "make a token of the HTTP API; print its [[token]] table"}},
			about: "Offline: it makes a random token of 256 bits and prints the [[token]] table that declares it in the config by its SHA-256; add the table and reload. With --out, the token goes to FILE alone, a new file of mode 0600, and stdout has the table alone (token new ci --role operate --out ci.token >> schedulerd.toml); without it, the token is printed this once, on the line before the table. ROLE is read (listings, runs, output, metrics), operate (read, and trigger, cancel, rerun, backfill, pause, resume, forget) or admin (operate, and reload). Keep the token in a file only its user can read, for --token-file."},
		{name: "version", run: func(_ context.Context, args []string, stdout, _ io.Writer) error { return cmdVersion(args, stdout) },
			forms: []form{{"version [--json]", "print version, commit, build date and Go version"}}},
		{name: "completion", run: cmdCompletion, args: []string{"bash zsh fish"},
			forms: []form{{"completion bash|zsh|fish", "print a shell completion script"}},
			about: "The script completes commands, flags, the jobs of the running daemon and its recent run ids. Load it with `source <(schedulerd completion bash)`; the packages install it for each shell."},
		{name: "man", run: cmdMan, args: []string{"8 5"},
			forms: []form{{"man 8|5", "print the man page schedulerd(8) or schedulerd.toml(5)"}},
			about: "The pages are made from this binary's commands and flags and from the configuration reference; read one with `schedulerd man 8 | man -l -`."},
		{name: "help", run: cmdHelp, args: []string{argCommand},
			forms: []form{{"help [COMMAND]", "print the usage, or a command's usage and flags"}}},

		{name: "trigger", run: cmdTrigger, client: true, args: []string{argJob},
			forms: []form{{"trigger JOB [--dedup-id ID] [--not-before T] [--not-after T] [--payload S | --payload-file F|-] [--wait]",
				"make a run now; T is RFC 3339 or +30m"}},
			about: "A trigger with --dedup-id is refused (exit 7) while an unfinished run of the job has that id. With --wait it follows the run and exits 0 only if it completed (9 otherwise)."},
		{name: "jobs", run: cmdJobs, client: true,
			forms: []form{{"jobs", "declared jobs, next fire time, paused, last run"}},
			about: "After the declared jobs come those that no config of this node declares but that the cluster still expects to succeed (expect_success_within; a reload removed them): SCHEDULE says \"not declared\", and --json gives \"declared\": false. `schedulerd forget` ends their expectation."},
		{name: "runs", run: cmdRuns, client: true, args: []string{"show", argRun},
			forms: []form{
				{"runs [--job J] [--status S] [--since T] [--until T] [--before ID] [--limit N]", "runs, newest first"},
				{"runs [--job J] [--since T] [--until T] --stats", "runs by outcome, success ratio,\np50/p95/max duration of the completed"},
				{"runs show ID [--raw]", "one run with its attempts, output and events;\n--raw prints them unescaped"},
			},
			about: "Runs are listed newest first by when they were made, a page at a time: when more follow, the text says so on stderr with the --before that shows the next page (the id of the page's last run; with --json, take it from the last line). --since and --until take RFC 3339, a date (its midnight in UTC) or a duration before now (7d, 36h, 1d12h). --stats is computed by the daemon's store in one statement over the runs made in the range, whatever their number; success ratio is completed / (completed + dead_letter + expired)."},
		{name: "logs", run: cmdLogs, client: true, args: []string{argJobOrRun},
			forms: []form{{"logs [-f] [--raw] RUN|JOB", "the output of a run, or of a job's newest run;\n-f follows it as it is written, then the next runs"}},
			about: "A run id prints the output of the run's current attempt, a job's name that of the job's newest run that has started. With -f the output is printed as the attempt writes it, then, after a header line, that of each next attempt of the run and, for a job, of each run that starts after it, until interrupted; a job with no run yet is waited for. An attempt running on another node (a cluster) is printed when it ends. The output is escaped as by runs show unless --raw, and bounded as stored: a follower that falls too far behind gets a line saying how many bytes it missed. --json prints a line per attempt, per piece of output and per state of the run."},
		{name: "cancel", run: cmdCancel, client: true, args: []string{argRun},
			forms: []form{{"cancel ID [--wait]", "cancel a run, or stop its running attempt"}},
			about: "A waiting run is cancelled at once; a running attempt gets SIGTERM on its process group, SIGKILL after kill_grace."},
		{name: "rerun", run: cmdRerun, client: true, args: []string{argRun},
			forms: []form{{"rerun ID [--wait]", "make a new run linked to an earlier one"}}},
		{name: "backfill", run: cmdBackfill, client: true, args: []string{argJob},
			forms: []form{{"backfill JOB --from T --to T [--dry-run] [--max-parallel N] [--yes]",
				"make runs of a cron job's past ticks that have none;\n--dry-run lists them"}},
			about: "The ticks are those of the job's schedule from --from to --to, both included; T is RFC 3339 or a date in the job's time zone (--from its first instant, --to its last), and --to is not in the future. A tick that has a run, the scheduler's or an earlier backfill's, gets none, so a backfill repeated or interrupted makes no duplicate. At most --max-parallel (default 1) of the backfill's runs are active at once, also across restarts; the job's own concurrency limit holds besides. More than 10,000 ticks are refused without --yes. The runs show trigger backfill in runs. See docs/backfill.md."},
		{name: "pause", run: cmdPause, client: true, args: []string{argJob},
			forms: []form{{"pause JOB", "stop a job's schedule; triggers still work"}}},
		{name: "resume", run: cmdResume, client: true, args: []string{argJob},
			forms: []form{{"resume JOB", "restart a paused schedule from its next tick"}}},
		{name: "forget", run: cmdForget, client: true, args: []string{argJob},
			forms: []form{{"forget JOB", "end the expectation of a job no config declares"}},
			about: "A job with expect_success_within that a reload removed is still expected: it becomes overdue, once in the cluster, if no run of it completes within its window. forget ends that, and its overdue state with it (no one is told). It is refused (exit 1) when this node declares the job: remove expect_success_within from its [[job]] instead; and exits 5 when the cluster does not expect the job."},
		{name: "nodes", run: cmdNodes, client: true,
			forms: []form{{"nodes", "nodes with last heartbeat and state"}}},
		{name: "notifications", run: cmdNotifications, client: true,
			forms: []form{{"notifications [--job J] [--state S] [--limit N]", "notifications with their delivery state, newest first"}},
			about: "S is pending, delivered or failed. A failed notification stays listed with its last error until the history prunes it."},
		{name: "health", run: cmdHealth, client: true,
			forms: []form{{"health", "exit 0 when this node is healthy"}}},
		{name: "reload", run: cmdReload, client: true,
			forms: []form{{"reload", "re-read the config (same as SIGHUP)"}},
			about: "A config that does not load is rejected whole (exit 2) and the running one stays."},
		{name: "progress", run: cmdProgress, client: true,
			forms: []form{{"progress PERCENT [MESSAGE]", "report progress from inside a job"}}},
	}
}

// lookupCommand returns the command called name, or nil.
func lookupCommand(name string) *subcommand {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// helpRequest is what parseFlags returns for -h or --help: the command's
// flag set, which run prints and commandFlags returns.
type helpRequest struct{ fs *flag.FlagSet }

func (helpRequest) Error() string { return "help requested" }

// commandFlags returns the flag set that c parses, by running it with
// --help, which every command answers before it does anything else.
func commandFlags(c *subcommand) (*flag.FlagSet, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.run(ctx, []string{"--help"}, io.Discard, io.Discard)
	var h helpRequest
	if !errors.As(err, &h) {
		return nil, fmt.Errorf("%s --help: want its flags, got %v", c.name, err)
	}
	return h.fs, nil
}

// flagDoc is one flag as --help, the man page and completion show it.
type flagDoc struct {
	name    string // without dashes
	metavar string // "" for a boolean flag
	usage   string
	def     string // the default worth printing, or ""
}

// spelled is the flag as typed: -n for one letter, --name otherwise.
func (f flagDoc) spelled() string {
	if len(f.name) == 1 {
		return "-" + f.name
	}
	return "--" + f.name
}

// clientFlagNames are the flags every client command takes.
var clientFlagNames = []string{"socket", "config", "api", "token-file", "json"}

// flagDocs lists the flags of fs in order of name; own leaves out the
// client flags.
func flagDocs(fs *flag.FlagSet, own bool) []flagDoc {
	var docs []flagDoc
	fs.VisitAll(func(f *flag.Flag) {
		if own && isClientFlag(f.Name) {
			return
		}
		metavar, usage := flag.UnquoteUsage(f)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			metavar = ""
		}
		def := f.DefValue
		if def == "false" || def == "0" {
			def = ""
		}
		docs = append(docs, flagDoc{name: f.Name, metavar: metavar, usage: usage, def: def})
	})
	return docs
}

func isClientFlag(name string) bool { return slices.Contains(clientFlagNames, name) }

// clientFlagDocs are the client flags, as every client command has them.
func clientFlagDocs() []flagDoc {
	fs := newFlags("client")
	addClientFlags(fs, io.Discard)
	return flagDocs(fs, false)
}

// Exit codes, in the order the usage text, the docs and the man page list
// them.
var exitCodes = []struct {
	code        int
	short, long string
}{
	{0, "ok", "success"},
	{exitFailure, "failure", "any other failure; health when the node is unhealthy"},
	{exitUsage, "bad input or rejected reload", "bad flags, arguments or config; a request the daemon rejects as malformed; a reload whose config is rejected (the running config stays)"},
	{exitNotRunning, "daemon not running", "the daemon is not running: no socket, or nothing listens on it"},
	{exitPermission, "permission denied", "permission denied: the socket is for root, the daemon's user and members of socket_group; the HTTP API refused the token, or its role does not allow the request"},
	{exitUnknownJob, "unknown job", "unknown job; forget: the cluster does not expect the job"},
	{exitUnknownRun, "unknown run", "unknown run"},
	{exitDuplicate, "duplicate dedup id", "duplicate: an unfinished run of the job already has the dedup id"},
	{exitInvalidWindow, "invalid window", "invalid window: not_after is not after not_before, or has passed"},
	{exitRunFailed, "a waited-for run did not complete", "trigger, rerun or cancel --wait: the run finished but did not complete (dead_letter or cancelled)"},
}

// summaryColumn is where summaries start in the usage text.
const summaryColumn = 41

// writeForms writes the synopses of cs and their summaries, aligned.
func writeForms(w io.Writer, cs []*subcommand) {
	pad := strings.Repeat(" ", summaryColumn)
	for _, c := range cs {
		for _, f := range c.forms {
			line := "  schedulerd " + f.synopsis
			summary := strings.ReplaceAll(f.summary, "\n", "\n"+pad)
			if len(line) < summaryColumn-1 {
				fmt.Fprintf(w, "%-*s%s\n", summaryColumn, line, summary)
			} else {
				fmt.Fprintf(w, "%s\n%s%s\n", line, pad, summary)
			}
		}
	}
}

// writeUsage writes the usage text of `schedulerd help`.
func writeUsage(w io.Writer) {
	var offline, client []*subcommand
	for _, c := range commands {
		if c.client {
			client = append(client, c)
		} else {
			offline = append(offline, c)
		}
	}
	fmt.Fprint(w, "schedulerd: a cron and deferred-job scheduler\n\nUsage:\n")
	writeForms(w, offline)
	fmt.Fprint(w, "\nCommands that talk to the running daemon over its control socket or HTTP API:\n")
	writeForms(w, client)
	var codes []string
	for _, e := range exitCodes {
		codes = append(codes, fmt.Sprintf("%d %s", e.code, e.short))
	}
	fmt.Fprintf(w, `
They take --json (one JSON object per line), --socket PATH and --config F,
before or after the command; the socket is --socket, else $SCHEDULERD_SOCKET,
else the socket of the config. With --api URL and --token-file F (or
$SCHEDULERD_API and $SCHEDULERD_TOKEN_FILE) they use the daemon's HTTP API.
%s.

%s
"schedulerd COMMAND --help" prints a command's flags.
`, wrap("Exit codes: "+strings.Join(codes, ", "), 79),
		wrap(fmt.Sprintf("The default config is %s; where it does not exist, every command but run and migrate reads ./%s.", defaultConfig, localConfig), 79))
}

// writeCommandHelp writes what `schedulerd COMMAND --help` prints.
func writeCommandHelp(w io.Writer, c *subcommand, fs *flag.FlagSet) {
	fmt.Fprint(w, "Usage:\n")
	writeForms(w, []*subcommand{c})
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(c.about, 79))
	}
	docs := flagDocs(fs, c.client)
	if len(docs) > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		writeFlagDocs(w, docs)
	}
	if c.client {
		fmt.Fprint(w, "\nFlags of every command that talks to the daemon:\n")
		writeFlagDocs(w, clientFlagDocs())
	}
}

func writeFlagDocs(w io.Writer, docs []flagDoc) {
	for _, d := range docs {
		head := "  " + d.spelled()
		if d.metavar != "" {
			head += " " + d.metavar
		}
		text := d.usage
		if d.def != "" {
			text += " (default " + d.def + ")"
		}
		fmt.Fprintf(w, "%s\n%s\n", head, indent(wrap(text, 73), "      "))
	}
}

// wrap breaks text into lines of at most width bytes, between words.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

func indent(text, prefix string) string {
	return prefix + strings.ReplaceAll(text, "\n", "\n"+prefix)
}

// cmdHelp prints the usage text, or the help of one command.
func cmdHelp(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("help")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		writeUsage(stdout)
		return nil
	case len(pos) > 1:
		return usageError{errors.New("usage: schedulerd help [COMMAND]")}
	}
	c := lookupCommand(pos[0])
	if c == nil {
		return usageError{fmt.Errorf("help: unknown command %q", pos[0])}
	}
	cfs, err := commandFlags(c)
	if err != nil {
		return err
	}
	writeCommandHelp(stdout, c, cfs)
	return nil
}
