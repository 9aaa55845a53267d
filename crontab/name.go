package crontab

import (
	"path"
	"strings"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/config"
)

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
