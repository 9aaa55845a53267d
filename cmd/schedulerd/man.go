package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/docs"
	"github.com/schedulerd/schedulerd/internal/manpage"
)

// cmdMan prints a man page in roff: schedulerd(8), made from the command
// table and the flags each command parses, or schedulerd.toml(5), made
// from the configuration reference (docs/configuration.md).
func cmdMan(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("man")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("usage: schedulerd man 8|5")}
	}
	var page string
	switch pos[0] {
	case "8":
		page, err = commandPage()
	case "5":
		page = configPage()
	default:
		return usageError{fmt.Errorf("man: no page in section %q: the pages are schedulerd(8) and schedulerd.toml(5)", pos[0])}
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, page)
	return err
}

// pageSource and pageDate are the footer of a page: the version, and the
// day of the build's commit (so that a build is reproducible), or none.
func pageSource() string { return "schedulerd " + currentBuild().Version }

func pageDate() string {
	t, err := time.Parse(time.RFC3339, currentBuild().BuildDate)
	if err != nil {
		return ""
	}
	return t.UTC().Format(time.DateOnly)
}

// A manEntry is a tagged paragraph whose text is Markdown inline markup.
type manEntry struct{ tag, text string }

func writeEntries(w *manpage.Writer, entries []manEntry) {
	for _, e := range entries {
		w.Tagged(manpage.Inline(e.tag), manpage.Inline(e.text))
	}
}

var commandPageDescription = []string{
	"schedulerd runs commands on cron schedules, once at a given time, or when triggered, with retries, time windows, bounded output and a history of every run. `schedulerd run` is the daemon; the state lives in an embedded SQLite database, or in PostgreSQL for a cluster of nodes in which each cron tick fires once.",
	"The other commands talk to the local daemon over its control socket (HTTP with JSON), except those that work offline: `check-config`, `next`, `migrate`, `version`, `completion`, `man` and `help`. Flags may come before or after the arguments, and the client flags (`--socket`, `--config`, `--api`, `--token-file`, `--json`) before the command too. A client finds the socket from `--socket`, else `$SCHEDULERD_SOCKET`, else the `socket` of the config given by `--config` (default `/etc/schedulerd/schedulerd.toml`, or where that does not exist `./schedulerd.toml`, if it is yours or root's), else `/run/schedulerd/schedulerd.sock`. `run` and `migrate` never read `./schedulerd.toml` unasked.",
	"With `--api URL --token-file F` (or `$SCHEDULERD_API` and `$SCHEDULERD_TOKEN_FILE`) a client command uses the daemon's HTTP API (`api_listen`) instead, with a bearer token that `token new` makes; `--api` and `--socket` given as flags come before the environment.",
	"Members of `socket_group` may use the socket, and so run any declared job: treat the group like sudo rights for those jobs. A token of the HTTP API does what its role allows: `read`, `operate` (trigger, cancel, rerun, pause, resume, forget) or `admin` (reload).",
}

var commandPageService = []string{
	"The unit `schedulerd.service` runs the daemon as the system user `schedulerd`, without capabilities: its jobs run as that user, and a job whose `user` is another user is refused at start and on reload, since only root runs jobs as other users. To run such jobs, run the daemon as root with the drop-in `root.conf` (the packages install it in `/usr/share/schedulerd`): copy it to `/etc/systemd/system/schedulerd.service.d/`, then `systemctl daemon-reload` and `systemctl restart schedulerd`.",
	"`systemctl stop` and `restart` send SIGTERM to the daemon alone (`KillMode=mixed`): running attempts may finish for `shutdown_grace`, then are stopped and recorded as stopped by shutdown, so they run again after the restart. A package upgrade restarts a running service the same way (`systemctl try-restart`).",
}

var commandPageSignals = []manEntry{
	{"SIGHUP", "Re-read the config, as `schedulerd reload` does. A config that does not load is rejected whole and the running one stays; `[daemon]` settings take effect at the next restart."},
	{"SIGTERM, SIGINT", "Shut down: stop claiming runs, let running attempts finish for `shutdown_grace`, then stop their process groups (SIGTERM, SIGKILL after `kill_grace`) and record them as stopped by shutdown, through the retry flow."},
}

var commandPageEnvironment = []manEntry{
	{"SCHEDULERD_SOCKET", "The control socket of the client commands, unless `--socket` or `--api` is given or `SCHEDULERD_API` is set. The daemon sets it for every job."},
	{"SCHEDULERD_API", "The URL of the daemon's HTTP API for the client commands, unless `--api` or `--socket` is given: `https://host:8080`, or `http://` to a loopback address."},
	{"SCHEDULERD_TOKEN_FILE", "The file holding the HTTP API's token, unless `--token-file` is given. A file every user may read is refused."},
	{"SSL_CERT_FILE, SSL_CERT_DIR", "The certificates a client trusts for an `https://` API besides the system's: point them at a self-signed certificate or your own authority."},
	{"STATE_DIRECTORY", "The default `state_dir` (set by systemd's `StateDirectory=`)."},
	{"RUNTIME_DIRECTORY", "The default directory of the socket (set by systemd's `RuntimeDirectory=`)."},
	{"NOTIFY_SOCKET, WATCHDOG_USEC", "systemd's readiness notification and watchdog, used by `run`; no job sees them."},
}

var commandPageFiles = []manEntry{
	{"/etc/schedulerd/schedulerd.toml", "The config: see schedulerd.toml(5)."},
	{"/var/lib/schedulerd/schedulerd.db", "The SQLite database of the service, with its WAL and its lock file `schedulerd.db.lock`."},
	{"/run/schedulerd/schedulerd.sock", "The control socket of the service."},
	{"/usr/lib/systemd/system/schedulerd.service", "The unit, as the packages install it (`make install`: `/etc/systemd/system`)."},
	{"/usr/share/schedulerd/root.conf", "The drop-in for the unit that runs the daemon as root, for jobs with `user`."},
}

// commandPage renders schedulerd(8).
func commandPage() (string, error) {
	var w manpage.Writer
	w.Header("SCHEDULERD", "8", pageDate(), pageSource(), "System Administration")
	w.Section("NAME")
	w.Line(`schedulerd \- cron and deferred\-job scheduler daemon`)
	w.Section("SYNOPSIS")
	for i, c := range commands {
		for j, f := range c.forms {
			if i+j > 0 {
				w.Break()
			}
			w.Line(synopsisRoff(f.synopsis))
		}
	}
	w.Section("DESCRIPTION")
	for _, p := range commandPageDescription {
		w.Para(manpage.Inline(p))
	}

	w.Section("COMMANDS")
	for _, c := range commands {
		fs, err := commandFlags(c)
		if err != nil {
			return "", err
		}
		for _, f := range c.forms {
			w.Tagged(synopsisRoff(f.synopsis), manpage.Text(strings.ReplaceAll(f.summary, "\n", " "))+".")
		}
		if c.about != "" {
			w.More(manpage.Inline(c.about))
		}
		if docs := flagDocs(fs, c.client); len(docs) > 0 {
			w.Indent()
			writeFlagEntries(&w, docs)
			w.Outdent()
		}
	}
	w.Section("CLIENT OPTIONS")
	w.Para("Every command that talks to the daemon takes these:")
	writeFlagEntries(&w, clientFlagDocs())

	w.Section("EXIT STATUS")
	for _, e := range exitCodes {
		w.Tagged(manpage.Bold(fmt.Sprint(e.code)), manpage.Text(e.long)+".")
	}
	w.Section("SIGNALS")
	writeEntries(&w, commandPageSignals)
	w.Section("SERVICE")
	for _, p := range commandPageService {
		w.Para(manpage.Inline(p))
	}
	w.Section("ENVIRONMENT")
	writeEntries(&w, commandPageEnvironment)
	w.Para(manpage.Inline("What a job's environment holds: schedulerd.toml(5)."))
	w.Section("FILES")
	writeEntries(&w, commandPageFiles)
	w.Section("SEE ALSO")
	w.Para(`\fBschedulerd.toml\fR(5), \fBsystemctl\fR(1), \fBsystemd.exec\fR(5), \fBcrontab\fR(5); the guides in /usr/share/doc/schedulerd.`)
	return w.String(), nil
}

func writeFlagEntries(w *manpage.Writer, docs []flagDoc) {
	for _, d := range docs {
		tag := manpage.Bold(d.spelled())
		if d.metavar != "" {
			tag += " " + manpage.Italic(d.metavar)
		}
		text := manpage.Text(d.usage)
		if d.def != "" {
			text += " (default " + manpage.Text(d.def) + ")"
		}
		w.Tagged(tag, text+".")
	}
}

// synopsisToken splits a synopsis: flags and words typed as they are,
// upper-case placeholders, and anything else one byte at a time.
var synopsisToken = regexp.MustCompile(`--?[a-z][a-z-]*|[a-z][a-z0-9-]*|[A-Z][A-Z_]*|.`)

// synopsisRoff renders "schedulerd " + a synopsis: typed words in bold,
// placeholders in italic.
func synopsisRoff(synopsis string) string {
	var b strings.Builder
	b.WriteString(manpage.Bold("schedulerd") + " ")
	for _, tok := range synopsisToken.FindAllString(synopsis, -1) {
		switch {
		case tok[0] >= 'A' && tok[0] <= 'Z':
			b.WriteString(manpage.Italic(tok))
		case len(tok) > 1 || tok[0] >= 'a' && tok[0] <= 'z':
			b.WriteString(manpage.Bold(tok))
		default:
			b.WriteString(manpage.Text(tok))
		}
	}
	return b.String()
}

// configPage renders schedulerd.toml(5) from the configuration reference.
func configPage() string {
	var w manpage.Writer
	w.Header("SCHEDULERD.TOML", "5", pageDate(), pageSource(), "File Formats")
	w.Section("NAME")
	w.Line(`schedulerd.toml \- configuration file of schedulerd`)
	w.Section("SYNOPSIS")
	w.Line("/etc/schedulerd/schedulerd.toml")
	w.Section("DESCRIPTION")
	w.Markdown(docs.Configuration)
	w.Section("SEE ALSO")
	w.Para(`\fBschedulerd\fR(8); the guides in /usr/share/doc/schedulerd.`)
	return w.String()
}
