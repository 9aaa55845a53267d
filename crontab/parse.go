package crontab

import (
	"strings"

	"github.com/schedulerd/schedulerd/jobs/command"
)

// userColumn returns the users named on the job lines, each once, if on
// every job line a user of this machine and a command follow the schedule;
// else nil.
func userColumn(lines []line) []string {
	known := map[string]bool{}
	var users []string
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
			return nil
		}
		name := fields[n]
		ok, seen := known[name]
		if !seen {
			_, err := command.LookupUser(name)
			ok = err == nil
			known[name] = ok
			if ok {
				users = append(users, name)
			}
		}
		if !ok {
			return nil
		}
	}
	return users
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
