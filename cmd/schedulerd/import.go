package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/jobs/command"
	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// import-crontab reads a crontab as crontab(5) describes it and prints
// [[job]] tables that mean the same. The format:
//
//   - A user crontab has 5 time fields (or a descriptor such as @daily) and
//     a command; a system crontab (/etc/crontab, /etc/cron.d) has a user
//     between them. --user NAME reads FILE as NAME's crontab: every job
//     runs as NAME. Otherwise FILE is a system crontab when it is
//     /etc/crontab or in /etc/cron.d, as cron reads them, or when on every
//     job line the field after the time fields names a user of this
//     machine and a command follows; else a user crontab, whose jobs run as
//     the daemon's user.
//   - "NAME=value" lines set the environment of the jobs after them; the
//     value may be quoted. SHELL picks the shell (a job runs /bin/sh -c, or
//     command = [SHELL, "-c", ...]); CRON_TZ the timezone; LOGNAME and USER
//     are set by cron and by the daemon alike, and ignored. MAILTO,
//     MAILFROM, CONTENT_TYPE, CONTENT_TRANSFER_ENCODING and RANDOM_DELAY
//     have no counterpart: a comment says so.
//   - In a command, an unescaped % ends the command; the text after it, each
//     further % a newline, is its standard input, which the job feeds it
//     with printf. \% is a %.
//   - Each job gets cron's behaviour where schedulerd's default differs:
//     no timeout, no retry, no catch-up of missed ticks.
//   - A line that cannot be translated (@reboot, a schedule schedulerd
//     refuses, an unknown CRON_TZ) becomes a comment saying why.

// maxCrontabSize bounds the crontab read: its translation, a few times
// larger, must stay under config.MaxFileSize.
const maxCrontabSize = config.MaxFileSize / 4

// defaultShell is the shell cron runs commands with when SHELL is not set,
// and the one shell jobs run with.
const defaultShell = "/bin/sh"

// cronBehaviour are the keys each imported job gets, so that it behaves as
// under cron.
var cronBehaviour = []string{`timeout = "none"`, `catchup = "none"`, `retry = { max_attempts = 1 }`}

func cmdImportCrontab(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import-crontab")
	user := fs.String("user", "", "read FILE as the crontab of the user `NAME` (no user column); its jobs run as NAME")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{errors.New("import-crontab: give one crontab FILE, or - for standard input")}
	}
	if commentText(*user) != *user {
		return usageError{fmt.Errorf("import-crontab: --user: %q is not a user name", *user)}
	}
	data, err := readCrontab(pos[0])
	if err != nil {
		return err
	}
	im := &crontabImport{file: pos[0], user: *user}
	out := im.translate(data)
	if im.tooLarge {
		return usageError{fmt.Errorf("import-crontab: the translation has more than %d jobs or %d MiB, more than a config may hold: split the crontab",
			config.MaxJobs, config.MaxFileSize>>20)}
	}
	if _, err := io.WriteString(stdout, out); err != nil {
		return err
	}
	switch {
	case im.skipped == 1:
		fmt.Fprintln(stderr, "schedulerd: warning: import-crontab: 1 line not translated; a comment in the output says why")
	case im.skipped > 1:
		fmt.Fprintf(stderr, "schedulerd: warning: import-crontab: %d lines not translated; comments in the output say why\n", im.skipped)
	}
	return nil
}

func readCrontab(file string) ([]byte, error) {
	r := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("import-crontab: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxCrontabSize+1))
	if err != nil {
		return nil, fmt.Errorf("import-crontab: read %s: %w", file, err)
	}
	if len(data) > maxCrontabSize {
		return nil, usageError{fmt.Errorf("import-crontab: %s is larger than %d MiB", file, maxCrontabSize>>20)}
	}
	return data, nil
}

// crontabLine is a line of a crontab.
type crontabLine struct {
	n           int    // line number, from 1
	text        string // without leading blanks
	env         bool   // a NAME=value line
	name, value string // of a NAME=value line
}

// crontabImport translates one crontab.
type crontabImport struct {
	file string // as given; "-" is standard input
	user string // --user

	system bool // lines have a user column

	env     []envVar // set so far, in order
	shell   string   // SHELL
	zone    string   // CRON_TZ; "" is the daemon's local zone
	loc     *time.Location
	zoneErr string // why the jobs after an unknown CRON_TZ are not translated

	names    map[string]bool
	out      strings.Builder
	blank    bool // the last line written is blank
	jobs     int
	skipped  int
	tooLarge bool // the translation stopped: a config could not hold it
}

type envVar struct{ name, value string }

func (im *crontabImport) translate(data []byte) string {
	im.shell, im.loc, im.names = defaultShell, time.Local, map[string]bool{}
	text := string(data)
	text = strings.TrimSuffix(text, "\n")
	var lines []crontabLine
	if text != "" {
		for i, raw := range strings.Split(text, "\n") {
			l := crontabLine{n: i + 1, text: strings.TrimLeft(raw, " \t")}
			if l.text != "" && l.text[0] != '#' {
				l.name, l.value, l.env = parseEnvLine(l.text)
			}
			lines = append(lines, l)
		}
	}
	im.header(lines)
	for _, l := range lines {
		if im.out.Len() > config.MaxFileSize || im.jobs > config.MaxJobs {
			im.tooLarge = true
			break
		}
		switch {
		case l.text == "":
			im.writeBlank()
		case l.text[0] == '#':
			c := strings.TrimRight(l.text, " \t")
			if commentText(c) != c {
				c = "# " + commentText(c)
			}
			im.writeln(c)
		case l.env:
			im.setEnv(l)
		default:
			im.job(l)
		}
	}
	return im.out.String()
}

// header decides between the user and the system format and says so.
func (im *crontabImport) header(lines []crontabLine) {
	source := "the crontab " + im.file
	if im.file == "-" {
		source = "a crontab on standard input"
	}
	var format []string
	switch clean := filepath.Clean(im.file); {
	case im.user != "":
		format = []string{fmt.Sprintf("read as the crontab of %s: its jobs run as %s.", im.user, im.user)}
	case clean == "/etc/crontab" || filepath.Dir(clean) == "/etc/cron.d":
		im.system = true
		format = []string{"read as a system crontab, as cron reads this file: the field after",
			"the schedule is the user a job runs as."}
	case hasUserColumn(lines):
		im.system = true
		format = []string{"read as a system crontab: on every job line, the field after the schedule",
			"names a user of this machine, the user the job runs as (--user NAME reads",
			"it as the crontab of NAME)."}
	default:
		format = []string{"read as a user crontab: its jobs run as the daemon's user (--user NAME",
			"runs them as NAME)."}
	}
	im.writeln("# Jobs imported by schedulerd import-crontab from " + commentText(source) + ",")
	for _, l := range format {
		im.writeln("# " + commentText(l))
	}
	im.writeln("# As under cron, each job has no timeout, no retry and no catch-up of ticks")
	im.writeln("# missed while no node ran: " + strings.Join(cronBehaviour, ", ") + ".")
	im.writeln("# Drop those keys for schedulerd's defaults.")
	im.writeBlank()
}

// hasUserColumn reports whether every job line has a user of this machine
// and a command after its schedule.
func hasUserColumn(lines []crontabLine) bool {
	users := map[string]bool{}
	found := false
	for _, l := range lines {
		if l.text == "" || l.text[0] == '#' || l.env {
			continue
		}
		n := 5
		if strings.HasPrefix(l.text, "@") {
			n = 1
		}
		fields, rest := cutFields(l.text, n+1)
		if len(fields) < n+1 || strings.TrimSpace(rest) == "" {
			return false
		}
		name := fields[n]
		known, ok := users[name]
		if !ok {
			_, err := command.LookupUser(name)
			known = err == nil
			users[name] = known
		}
		if !known {
			return false
		}
		found = true
	}
	return found
}

// parseEnvLine reads a "NAME = value" line as cron does: NAME and value may
// be quoted (single or double quotes, matching), blanks around "=" are
// allowed, and an unquoted value runs to the end of the line, without its
// trailing blanks.
func parseEnvLine(s string) (name, value string, ok bool) {
	quoted := func(s string) (inner, rest string, ok bool) {
		q := s[0]
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return "", "", false
		}
		return s[1 : end+1], s[end+2:], true
	}
	if s == "" {
		return "", "", false
	}
	rest := s
	if s[0] == '"' || s[0] == '\'' {
		if name, rest, ok = quoted(s); !ok {
			return "", "", false
		}
	} else {
		end := strings.IndexAny(s, "= \t")
		if end < 0 {
			return "", "", false
		}
		name, rest = s[:end], s[end:]
	}
	rest = strings.TrimLeft(rest, " \t")
	if name == "" || !strings.HasPrefix(rest, "=") {
		return "", "", false
	}
	rest = strings.TrimLeft(rest[1:], " \t")
	if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
		v, after, ok := quoted(rest)
		if !ok || strings.TrimRight(after, " \t") != "" {
			return "", "", false
		}
		return name, v, true
	}
	return name, strings.TrimRight(rest, " \t"), true
}

// mailVars are cron's variables about mailing a job's output.
var mailVars = map[string]bool{"MAILTO": true, "MAILFROM": true, "CONTENT_TYPE": true, "CONTENT_TRANSFER_ENCODING": true}

// setEnv applies a NAME=value line to the jobs after it.
func (im *crontabImport) setEnv(l crontabLine) {
	note := func(format string, args ...any) {
		im.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
		im.writeln("#   " + commentText(fmt.Sprintf(format, args...)))
	}
	skip := func(format string, args ...any) {
		im.skipped++
		note("not translated: "+format, args...)
	}
	switch {
	case l.name == "CRON_TZ" && l.value == "":
		im.zone, im.loc, im.zoneErr = "", time.Local, ""
		note("the jobs below follow the daemon's local time zone")
	case l.name == "CRON_TZ":
		loc, err := time.LoadLocation(l.value)
		if err != nil || strings.ContainsAny(l.value, "\x00\n") {
			im.zoneErr = fmt.Sprintf("CRON_TZ %q on line %d is no time zone known here", l.value, l.n)
			skip("%q is no time zone known here: the jobs below are not translated until the next CRON_TZ", l.value)
			return
		}
		im.zone, im.loc, im.zoneErr = l.value, loc, ""
		note("the jobs below get timezone = %s", tomlString(l.value))
	case l.name == "MAILTO" && l.value == "":
		note("cron mails no output; schedulerd mails none either (it keeps the output with each run)")
	case mailVars[l.name]:
		skip("cron mails a job's output; schedulerd has no notifications yet (it keeps the output with each run: schedulerd runs show ID)")
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
			im.shell = l.value
			note("the jobs below run with this shell, and get it in their env")
		} else {
			note("in the env of the jobs below")
		}
		for i := range im.env {
			if im.env[i].name == l.name {
				im.env[i].value = l.value
				return
			}
		}
		im.env = append(im.env, envVar{l.name, l.value})
	}
}

// descriptors are the @ schedules of crontab(5) that schedulerd reads too.
var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// posixShells are the shells that read the printf pipe a job's standard
// input becomes.
var posixShells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ash": true, "ksh": true, "ksh93": true,
	"mksh": true, "pdksh": true, "zsh": true, "yash": true, "posh": true,
}

// job translates a job line.
func (im *crontabImport) job(l crontabLine) {
	skip := func(format string, args ...any) {
		im.skipped++
		im.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
		im.writeln("#   not translated: " + commentText(fmt.Sprintf(format, args...)))
		im.writeBlank()
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
	if im.system {
		nf++
	}
	fields, rest := cutFields(l.text, nf)
	if len(fields) < nf || strings.TrimSpace(rest) == "" {
		if im.system {
			skip("a job line of a system crontab is a schedule, a user and a command")
		} else {
			skip("a job line is a schedule (5 fields or a descriptor such as @daily) and a command")
		}
		return
	}
	spec := strings.Join(fields[:n], " ")
	user := im.user
	if im.system {
		user = fields[n]
	}
	if im.zoneErr != "" {
		skip("%s", im.zoneErr)
		return
	}
	if _, err := schedule.Parse(spec, im.loc); err != nil {
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
		if !posixShells[path.Base(im.shell)] {
			skip("the text after %% is the command's standard input, which a job can feed only through a POSIX shell, not %s", im.shell)
			return
		}
		// cron writes the text to the command's standard input, without a
		// newline at the end: printf '%s' writes it just so.
		script = "printf '%s' " + shellQuote(stdin) + " | (\n" + cmd + "\n)"
	}

	im.jobs++
	im.writeln("# line " + strconv.Itoa(l.n) + ": " + commentText(strings.TrimRight(l.text, " \t")))
	im.writeln("[[job]]")
	im.writeln("name = " + tomlString(im.uniqueName(jobName(cmd))))
	im.writeln("schedule = " + tomlString(spec))
	if im.zone != "" {
		im.writeln("timezone = " + tomlString(im.zone))
	}
	if user != "" {
		im.writeln("user = " + tomlString(user))
	}
	if im.shell == defaultShell {
		im.writeln("shell = " + tomlString(script))
	} else {
		im.writeln("command = [" + tomlString(im.shell) + `, "-c", ` + tomlString(script) + "]")
	}
	for _, kv := range cronBehaviour {
		im.writeln(kv)
	}
	if len(im.env) > 0 {
		im.writeln("[job.env]")
		for _, v := range im.env {
			im.writeln(v.name + " = " + tomlString(v.value))
		}
	}
	im.writeBlank()
}

// cutFields returns the first n blank-separated fields of s (fewer if s has
// fewer) and the rest of s after them and the blanks that follow.
func cutFields(s string, n int) (fields []string, rest string) {
	rest = strings.TrimLeft(s, " \t")
	for len(fields) < n && rest != "" {
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		fields = append(fields, rest[:end])
		rest = strings.TrimLeft(rest[end:], " \t")
	}
	return fields, rest
}

// splitPercent splits a crontab command at its first unescaped %, as cron
// does: before it, \% is %; after it, the command's standard input, \% is
// % and each other % a newline. Other backslashes stay.
func splitPercent(s string) (cmd, stdin string, hasStdin bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && s[i+1] == '%':
			b.WriteByte('%')
			i++
		case c == '%' && !hasStdin:
			cmd, hasStdin = b.String(), true
			b.Reset()
		case c == '%':
			b.WriteByte('\n')
		default:
			b.WriteByte(c)
		}
	}
	if !hasStdin {
		return b.String(), "", false
	}
	return cmd, b.String(), true
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// uniqueName returns name, or name-2, name-3... if it is taken.
func (im *crontabImport) uniqueName(name string) string {
	n := name
	for i := 2; im.names[n]; i++ {
		n = name + "-" + strconv.Itoa(i)
	}
	im.names[n] = true
	return n
}

// Words of a command line that name no job: tests, guards and shell syntax
// (skipped), and programs that run another one (looked through).
var (
	guardPrograms = map[string]bool{
		"test": true, "[": true, "[[": true, "cd": true, "true": true, "false": true,
		":": true, "exit": true, "return": true, "set": true, "export": true, "umask": true,
		"sleep": true, "type": true, "hash": true, "which": true, "wait": true, ".": true,
		"source": true, "ulimit": true, "for": true, "case": true, "select": true, "shift": true,
	}
	shellKeywords = map[string]bool{
		"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true,
		"done": true, "while": true, "until": true, "!": true, "{": true, "}": true,
		"time": true, "esac": true,
	}
	// wrapperPrograms run the rest of their arguments; the number is how
	// many arguments besides options they take first (timeout's duration).
	wrapperPrograms = map[string]int{
		"exec": 0, "nice": 0, "ionice": 0, "nohup": 0, "env": 0, "chronic": 0,
		"setsid": 0, "stdbuf": 0, "timeout": 1, "flock": 1,
	}
	// runnerPrograms run a script named by their first argument, which the
	// job's name then includes ("run-parts-cron.daily", "php-artisan").
	runnerPrograms = map[string]bool{
		"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "perl": true,
		"php": true, "ruby": true, "node": true, "nodejs": true, "run-parts": true,
		"python": true, "python2": true, "python3": true, "lua": true, "Rscript": true,
	}
)

// jobName derives a job name from a command line: the base name of the
// first program it runs that is not a test or a guard, with the script a
// runner runs.
func jobName(cmd string) string {
	var first string
	for _, words := range simpleCommands(cmd) {
		prog, args := program(words)
		if prog == "" {
			continue
		}
		if first == "" {
			first = prog
		}
		if guardPrograms[prog] || prog == "command" && len(args) > 0 && (args[0] == "-v" || args[0] == "-V") {
			continue
		}
		name := path.Base(prog)
		if runnerPrograms[name] {
			for _, a := range args {
				if strings.HasPrefix(a, "-") {
					continue
				}
				if strings.ContainsAny(a, "/.") && !strings.ContainsAny(a, " \t") {
					name += "-" + path.Base(a)
				}
				break
			}
		}
		return jobNameFrom(name)
	}
	if first != "" {
		return jobNameFrom(path.Base(first))
	}
	return "job"
}

// program returns the program a simple command runs and its arguments,
// past variable assignments and wrappers.
func program(words []string) (string, []string) {
	for len(words) > 0 && (isAssignment(words[0]) || shellKeywords[words[0]]) {
		words = words[1:]
	}
	for len(words) > 0 {
		prog := words[0]
		if prog == "command" && len(words) > 1 && !strings.HasPrefix(words[1], "-") {
			words = words[1:]
			continue
		}
		skip, ok := wrapperPrograms[path.Base(prog)]
		if !ok {
			return prog, words[1:]
		}
		words = words[1:]
		for len(words) > 0 && (strings.HasPrefix(words[0], "-") || isAssignment(words[0]) || isDigits(words[0])) {
			words = words[1:]
		}
		for ; skip > 0 && len(words) > 0; skip-- {
			words = words[1:]
		}
	}
	return "", nil
}

// isAssignment reports whether w is a shell variable assignment, NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	return strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// jobNameFrom makes a valid job name of s: letters, digits, '.', '_' and
// '-', starting with a letter or digit, at most 60 bytes.
func jobNameFrom(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range s {
		ok := c < utf8.RuneSelf && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
		switch {
		case ok:
			b.WriteRune(c)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimLeft(b.String(), "._-")
	if len(name) > 60 {
		name = name[:60]
	}
	name = strings.TrimRight(name, "._-")
	if !config.ValidJobName(name) {
		return "job"
	}
	return name
}

// simpleCommands splits a shell command line into its simple commands,
// each a list of words with quotes removed and redirections dropped; enough
// to find the programs it runs, not a shell parser.
func simpleCommands(s string) [][]string {
	var (
		cmds  [][]string
		cur   []string
		word  strings.Builder
		inWd  bool
		redir bool // the next word is a redirection's target
	)
	endWord := func() {
		if !inWd {
			return
		}
		if redir {
			redir = false
		} else {
			cur = append(cur, word.String())
		}
		word.Reset()
		inWd = false
	}
	endCmd := func() {
		endWord()
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			endWord()
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			endCmd()
		case c == '<' || c == '>':
			if inWd && isDigits(word.String()) { // 2>&1: the 2 is no word
				word.Reset()
				inWd = false
			}
			endWord()
			for i+1 < len(s) && strings.IndexByte("<>&|", s[i+1]) >= 0 {
				i++
			}
			redir = true
		case c == '#' && !inWd:
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case c == '\\' && i+1 < len(s):
			i++
			word.WriteByte(s[i])
			inWd = true
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				end = len(s) - i - 1
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWd = true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				word.WriteByte(s[j])
			}
			i = j
			inWd = true
		case c == '$' && i+1 < len(s) && s[i+1] == '(' || c == '`':
			// A command substitution stays inside its word.
			j := skipSubstitution(s, i)
			word.WriteString(s[i:j])
			i = j - 1
			inWd = true
		default:
			word.WriteByte(c)
			inWd = true
		}
	}
	endCmd()
	return cmds
}

// skipSubstitution returns the index just past the $(...) or `...` that
// starts at s[i].
func skipSubstitution(s string, i int) int {
	if s[i] == '`' {
		if end := strings.IndexByte(s[i+1:], '`'); end >= 0 {
			return i + end + 2
		}
		return len(s)
	}
	depth := 0
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return j + 1
			}
		}
	}
	return len(s)
}

// tomlString writes s as a TOML string: "s" when s needs no escapes, else
// 's' (a literal string, for commands with quotes and backslashes) when s
// has no ' and no control character, else "s" with escapes. s must be valid
// UTF-8.
func tomlString(s string) string {
	control := strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f })
	switch {
	case !control && !strings.ContainsAny(s, `"\`):
		return `"` + s + `"`
	case !control && !strings.Contains(s, "'"):
		return "'" + s + "'"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, c)
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// commentText returns s as a TOML comment may hold it: as is, or quoted
// with escapes when it holds control characters or is not UTF-8.
func commentText(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 && c != '\t' || c == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}

func (im *crontabImport) writeln(s string) {
	im.out.WriteString(s)
	im.out.WriteByte('\n')
	im.blank = false
}

func (im *crontabImport) writeBlank() {
	if !im.blank {
		im.out.WriteByte('\n')
		im.blank = true
	}
}
