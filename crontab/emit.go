package crontab

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord returns s as one word for sh: as is when no character of it is
// special to sh, else quoted.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+,:@") == "" {
		return s
	}
	return shellQuote(s)
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
