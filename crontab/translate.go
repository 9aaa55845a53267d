package crontab

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// MaxSize is the size in bytes of the largest crontab Translate reads: its
// translation, a few times larger, must stay under config.MaxFileSize.
const MaxSize = config.MaxFileSize / 4

// ErrTooLarge is returned by Translate when the translation would have more
// jobs or bytes than a config may hold.
var ErrTooLarge = fmt.Errorf("the translation has more than %d jobs or %d MiB, more than a config may hold: split the crontab",
	config.MaxJobs, config.MaxFileSize>>20)

// Options say how to read a crontab.
type Options struct {
	// File names the crontab in the output's first comment; "-" is
	// standard input. /etc/crontab and the files of /etc/cron.d are read as
	// system crontabs, as cron reads them.
	File string
	// User, if set, reads the crontab as the crontab of this user: no user
	// column, and every job runs as User.
	User string
}

// Translation is a crontab translated.
type Translation struct {
	// TOML holds the [[job]] tables, with comments, to add to a config.
	TOML string
	// Jobs counts the [[job]] tables of TOML.
	Jobs int
	// Skipped counts the lines not translated; a comment in TOML says why
	// for each.
	Skipped int
	// Warnings are what the reader must not miss, one message each, for
	// standard error.
	Warnings []string
}

// CheckUser returns an error if name cannot be a user name.
func CheckUser(name string) error {
	if commentText(name) != name {
		return fmt.Errorf("%q is not a user name", name)
	}
	return nil
}

// Translate translates the crontab data, at most MaxSize bytes.
func Translate(data []byte, opts Options) (*Translation, error) {
	if opts.User != "" {
		if err := CheckUser(opts.User); err != nil {
			return nil, err
		}
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("the crontab is larger than %d MiB", MaxSize>>20)
	}
	tr := &translator{file: opts.File, user: opts.User}
	out := tr.translate(data)
	if tr.tooLarge {
		return nil, ErrTooLarge
	}
	t := &Translation{TOML: out, Jobs: tr.jobs, Skipped: tr.skipped, Warnings: tr.warnings}
	switch {
	case tr.skipped == 1:
		t.Warnings = append(t.Warnings, "1 line not translated; a comment in the output says why")
	case tr.skipped > 1:
		t.Warnings = append(t.Warnings, fmt.Sprintf("%d lines not translated; comments in the output say why", tr.skipped))
	}
	return t, nil
}

// defaultShell is the shell cron runs commands with when SHELL is not set,
// and the one shell jobs run with.
const defaultShell = "/bin/sh"

// cronBehaviour are the keys each imported job gets, so that it behaves as
// under cron.
var cronBehaviour = []string{`timeout = "none"`, `catchup = "none"`, `retry = { max_attempts = 1 }`}

// line is a line of a crontab.
type line struct {
	n           int    // line number, from 1
	text        string // without leading blanks
	env         bool   // a NAME=value line
	name, value string // of a NAME=value line
}

// translator translates one crontab.
type translator struct {
	file    string               // Options.File
	user    string               // Options.User
	checked map[[2]string]string // shell and command: checkSyntax's result

	system   bool     // lines have a user column
	byColumn []string // when the user column was guessed from the lines: the users it names

	env     []envVar // set so far, in order
	shell   string   // SHELL
	zone    string   // CRON_TZ; "" is the daemon's local zone
	loc     *time.Location
	zoneErr string // why the jobs after an unknown CRON_TZ are not translated

	names    map[string]bool
	users    []string // of the jobs, each once, in order
	mailLine int      // the line of the first MAILTO, whose comment has a [[notifier]]
	out      strings.Builder
	blank    bool // the last line written is blank
	jobs     int
	skipped  int
	warnings []string
	tooLarge bool // the translation stopped: a config could not hold it
}

type envVar struct{ name, value string }

func (tr *translator) translate(data []byte) string {
	tr.shell, tr.loc, tr.names, tr.checked = defaultShell, time.Local, map[string]bool{}, map[[2]string]string{}
	text := string(data)
	text = strings.TrimSuffix(text, "\n")
	var lines []line
	if text != "" {
		for i, raw := range strings.Split(text, "\n") {
			l := line{n: i + 1, text: strings.TrimLeft(raw, " \t")}
			if l.text != "" && l.text[0] != '#' {
				l.name, l.value, l.env = parseEnvLine(l.text)
			}
			lines = append(lines, l)
		}
	}
	format := tr.format(lines)
	tr.blank = true // the header ends with a blank line
	for _, l := range lines {
		if tr.out.Len() > config.MaxFileSize || tr.jobs > config.MaxJobs {
			tr.tooLarge = true
			break
		}
		switch {
		case l.text == "":
			tr.writeBlank()
		case l.text[0] == '#':
			c := strings.TrimRight(l.text, " \t")
			if commentText(c) != c {
				c = "# " + commentText(c)
			}
			tr.writeln(c)
		case l.env:
			tr.setEnv(l)
		default:
			tr.job(l)
		}
	}
	body := tr.out.String()
	tr.out.Reset()
	tr.header(format)
	tr.out.WriteString(body)
	return tr.out.String()
}

// format decides between the user and the system format, and returns the
// comment that says which.
func (tr *translator) format(lines []line) []string {
	switch clean := filepath.Clean(tr.file); {
	case tr.user != "":
		return []string{fmt.Sprintf("read as the crontab of %s: its jobs run as %s.", tr.user, tr.user)}
	case clean == "/etc/crontab" || filepath.Dir(clean) == "/etc/cron.d":
		tr.system = true
		return []string{"read as a system crontab, as cron reads this file: the field after",
			"the schedule is the user a job runs as."}
	}
	if users := userColumn(lines); users != nil {
		tr.system, tr.byColumn = true, users
		return []string{"read as a system crontab: on every job line, the field after the schedule",
			"names a user of this machine, the user the job runs as."}
	}
	return []string{"read as a user crontab: its jobs run as the daemon's user (--user NAME",
		"runs them as NAME)."}
}

// packagedUser is the user the packaged service runs the daemon as.
const packagedUser = "schedulerd"

// header writes the first comment: where the jobs come from, how the
// crontab was read, what the reader must not miss, and cron's behaviour.
func (tr *translator) header(format []string) {
	source, name := "the crontab "+tr.file, tr.file
	if tr.file == "-" {
		source, name = "a crontab on standard input", "the crontab on standard input"
	}
	tr.writeln("# Jobs imported by schedulerd import-crontab from " + commentText(source) + ",")
	for _, l := range format {
		tr.writeln("# " + commentText(l))
	}
	var warnings []string
	if tr.byColumn != nil {
		tr.writeln("# WARNING: if this is a user crontab (as crontab -l prints it), that field is")
		tr.writeln("# the first word of each command, not a user: import it with --user NAME.")
		warnings = append(warnings, warning("%s is read as a system crontab, its jobs run as the users its lines name (%s), because on every job line the field after the schedule names a user of this machine; if it is a user crontab, that field is the first word of each command: import it with --user NAME",
			name, listed(tr.byColumn)))
	}
	var others []string
	for _, u := range tr.users {
		if u != packagedUser {
			others = append(others, u)
		}
	}
	if len(others) > 0 {
		tr.writeln("# WARNING: the jobs below run as " + commentText(listed(others)) + ".")
		tr.writeln("# Only a daemon running as root runs jobs as other users: the packaged")
		tr.writeln("# service runs as the user " + packagedUser + " and refuses them, at start and on")
		tr.writeln("# reload. Run it as root with its drop-in root.conf (schedulerd(8);")
		tr.writeln("# docs/operations.md, \"Running jobs as other users\"):")
		tr.writeln("#   install -D -m 0644 /usr/share/schedulerd/root.conf /etc/systemd/system/schedulerd.service.d/root.conf")
		tr.writeln("#   systemctl daemon-reload && systemctl restart schedulerd")
		warnings = append(warnings, warning("the jobs run as %s: the packaged service, which runs as the user %s, refuses them until it runs as root with its drop-in root.conf (schedulerd(8); docs/operations.md, \"Running jobs as other users\")",
			listed(others), packagedUser))
	}
	tr.writeln("# As under cron, each job has no timeout, no retry and no catch-up of ticks")
	tr.writeln("# missed while no node ran: " + strings.Join(cronBehaviour, ", ") + ".")
	tr.writeln("# Drop those keys for schedulerd's defaults.")
	tr.writeBlank()
	tr.warnings = append(warnings, tr.warnings...) // before those of the lines
}

// warning returns a warning for standard error.
func warning(format string, args ...any) string {
	return commentText(fmt.Sprintf(format, args...))
}

// listed returns names as a list, its first five and how many more.
func listed(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// mailVars are cron's variables about mailing a job's output.
var mailVars = map[string]bool{"MAILTO": true, "MAILFROM": true, "CONTENT_TYPE": true, "CONTENT_TRANSFER_ENCODING": true}

// setEnv applies a NAME=value line to the jobs after it.
func (tr *translator) setEnv(l line) {
	note := func(format string, args ...any) {
		tr.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
		tr.writeln("#   " + commentText(fmt.Sprintf(format, args...)))
	}
	skip := func(format string, args ...any) {
		tr.skipped++
		note("not translated: "+format, args...)
	}
	switch {
	case l.name == "CRON_TZ" && l.value == "":
		tr.zone, tr.loc, tr.zoneErr = "", time.Local, ""
		note("the jobs below follow the daemon's local time zone")
	case l.name == "CRON_TZ":
		loc, err := time.LoadLocation(l.value)
		if err != nil || strings.ContainsAny(l.value, "\x00\n") {
			tr.zoneErr = fmt.Sprintf("CRON_TZ %q on line %d is no time zone known here", l.value, l.n)
			skip("%q is no time zone known here: the jobs below are not translated until the next CRON_TZ", l.value)
			return
		}
		tr.zone, tr.loc, tr.zoneErr = l.value, loc, ""
		note("the jobs below get timezone = %s", tomlString(l.value))
	case l.name == "MAILTO" && l.value == "":
		note("cron mails no output; schedulerd mails none either (it keeps the output with each run)")
	case l.name == "MAILTO":
		tr.mailto(l)
	case mailVars[l.name]:
		skip("cron mails a job's output with this; schedulerd sends no mail yet, and tells a [[notifier]] when a job fails (docs/notifications.md)")
	case l.name == "RANDOM_DELAY":
		skip("cron delays each job by up to %s minutes; schedulerd has no counterpart yet", l.value)
	case l.name == "LOGNAME" || l.name == "USER":
		note("cron sets %s itself, whatever the crontab says, and so does schedulerd: ignored", l.name)
	case !config.ValidEnvName(l.name):
		skip("%q is not a variable name a job's env may set", l.name)
	case !utf8.ValidString(l.value) || strings.IndexByte(l.value, 0) >= 0:
		skip("the value is not text a config can hold")
	default:
		if l.name == "SHELL" {
			tr.shell = l.value
			note("the jobs below run with this shell, and get it in their env")
		} else {
			note("in the env of the jobs below")
		}
		for i := range tr.env {
			if tr.env[i].name == l.name {
				tr.env[i].value = l.value
				return
			}
		}
		tr.env = append(tr.env, envVar{l.name, l.value})
	}
}

// mailto says that a MAILTO line is not translated, and what schedulerd
// does instead: the first time, with a [[notifier]] to uncomment that mails
// each event to MAILTO's addresses.
func (tr *translator) mailto(l line) {
	tr.skipped++
	tr.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
	tr.writeln("#   " + commentText("not translated yet: schedulerd sends no mail; cron mails the output of the jobs below to "+l.value+"."))
	if tr.mailLine != 0 {
		tr.writeln("#   See the [[notifier]] at line " + strconv.Itoa(tr.mailLine) + ".")
		return
	}
	tr.mailLine = l.n
	var to []string
	for _, a := range strings.FieldsFunc(l.value, func(c rune) bool { return c == ',' || c == ' ' || c == '\t' }) {
		to = append(to, shellWord(a))
	}
	if len(to) == 0 {
		to = []string{"ADDRESS"}
	}
	tr.writeln("#   schedulerd keeps the output with each run (schedulerd runs show ID), and")
	tr.writeln("#   tells a [[notifier]] when a job fails, is overdue or recovers")
	tr.writeln("#   (docs/notifications.md). This one mails each event, its JSON as the body:")
	tr.writeln("#   uncomment it and add notify = [\"mail\"] to the jobs, or to [defaults].")
	tr.writeln("#")
	tr.writeln("# [[notifier]]")
	tr.writeln(`# name = "mail"`)
	tr.writeln("# " + commentText("shell = "+tomlString("mail -s 'schedulerd: a job event' "+strings.Join(to, " "))))
	tr.writeBlank()
}

// descriptors are the @ schedules of crontab(5) that schedulerd reads too.
var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// posixShells are the shells that read the printf pipe and the quoting
// that a job's standard input becomes.
var posixShells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ash": true, "ksh": true, "ksh93": true,
	"mksh": true, "pdksh": true, "zsh": true, "yash": true, "posh": true,
}

// job translates a job line.
func (tr *translator) job(l line) {
	skip := func(format string, args ...any) {
		tr.skipped++
		tr.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
		tr.writeln("#   not translated: " + commentText(fmt.Sprintf(format, args...)))
		tr.writeBlank()
	}
	n := 5
	if strings.HasPrefix(l.text, "@") {
		n = 1
		first, _ := cutFields(l.text, 1)
		switch {
		case first[0] == "@reboot":
			skip("@reboot runs a job when cron starts; schedulerd keeps its ticks across restarts and has no such tick (run schedulerd trigger JOB from a systemd unit instead)")
			return
		case !descriptors[first[0]]:
			skip("%s is not a schedule", first[0])
			return
		}
	}
	nf := n // fields before the command
	if tr.system {
		nf++
	}
	fields, rest := cutFields(l.text, nf)
	if len(fields) < nf || strings.TrimSpace(rest) == "" {
		if tr.system {
			skip("a job line of a system crontab is a schedule, a user and a command")
		} else {
			skip("a job line is a schedule (5 fields or a descriptor such as @daily) and a command")
		}
		return
	}
	spec := strings.Join(fields[:n], " ")
	user := tr.user
	if tr.system {
		user = fields[n]
	}
	if tr.zoneErr != "" {
		skip("%s", tr.zoneErr)
		return
	}
	if _, err := schedule.Parse(spec, tr.loc); err != nil {
		skip("%v", err)
		return
	}
	cmd, stdin, hasStdin := splitPercent(rest)
	for _, s := range []string{cmd, stdin, user} {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			skip("the line is not text a config can hold")
			return
		}
	}
	if strings.TrimSpace(cmd) == "" {
		skip("the command is empty")
		return
	}
	script := cmd
	if hasStdin {
		if !posixShells[path.Base(tr.shell)] {
			skip("the text after %% is the command's standard input, which a job can feed only through a POSIX shell, not %s", tr.shell)
			return
		}
		// cron runs SHELL -c COMMAND with the text on its standard input,
		// without a newline at the end: the job does the same behind
		// printf '%s', which writes it just so. The command stays one
		// quoted argument, so the shell reads it alone, as cron's does: a
		// line that is no valid shell fails there, and none of its text
		// can end the pipe or run after it.
		script = "printf '%s' " + shellQuote(stdin) + " | " + shellWord(tr.shell) + " -c " + shellQuote(cmd)
	}

	tr.jobs++
	tr.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
	if msg := tr.checkOnce(tr.shell, cmd); msg != "" {
		// As under cron, the job fails at each run: translated, with a word.
		sh := path.Base(tr.shell)
		tr.writeln("#   WARNING: the command does not parse as " + commentText(sh) + " (" + commentText(sh) + " -n): it fails at each")
		tr.writeln("#   run, as it did under cron.")
		hint := ""
		if hasStdin {
			tr.writeln("#   Cron ends the command at the first unescaped %: write \\% for a %.")
			hint = `; cron ends the command at the first unescaped %: write \% for a %`
		}
		tr.warnings = append(tr.warnings, warning("line %d: the command does not parse as %s (%s): it fails at each run, as it did under cron%s", l.n, sh, msg, hint))
	}
	tr.writeln("[[job]]")
	tr.writeln("name = " + tomlString(tr.uniqueName(jobName(cmd))))
	tr.writeln("schedule = " + tomlString(spec))
	if tr.zone != "" {
		tr.writeln("timezone = " + tomlString(tr.zone))
	}
	if user != "" {
		tr.writeln("user = " + tomlString(user))
		if !slices.Contains(tr.users, user) {
			tr.users = append(tr.users, user)
		}
	}
	if tr.shell == defaultShell {
		tr.writeln("shell = " + tomlString(script))
	} else {
		tr.writeln("command = [" + tomlString(tr.shell) + `, "-c", ` + tomlString(script) + "]")
	}
	for _, kv := range cronBehaviour {
		tr.writeln(kv)
	}
	if len(tr.env) > 0 {
		tr.writeln("[job.env]")
		for _, v := range tr.env {
			tr.writeln(v.name + " = " + tomlString(v.value))
		}
	}
	tr.writeBlank()
}

// checkOnce returns checkSyntax(shell, cmd), checking each command once.
func (tr *translator) checkOnce(shell, cmd string) string {
	key := [2]string{shell, cmd}
	msg, ok := tr.checked[key]
	if !ok {
		msg = checkSyntax(shell, cmd)
		tr.checked[key] = msg
	}
	return msg
}

// uniqueName returns name, or name-2, name-3... if it is taken.
func (tr *translator) uniqueName(name string) string {
	n := name
	for i := 2; tr.names[n]; i++ {
		n = name + "-" + strconv.Itoa(i)
	}
	tr.names[n] = true
	return n
}

func (tr *translator) writeln(s string) {
	tr.out.WriteString(s)
	tr.out.WriteByte('\n')
	tr.blank = false
}

func (tr *translator) writeBlank() {
	if !tr.blank {
		tr.out.WriteByte('\n')
		tr.blank = true
	}
}
