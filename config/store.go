package config

import (
	"regexp"
	"slices"
	"strings"
)

// storeKind is what a store setting names.
type storeKind int

const (
	storeSQLite   storeKind = iota // "" , "sqlite:PATH" or a plain file path
	storePostgres                  // a postgres:// URL or a key=value DSN
	storeInvalid                   // neither: refused by checkStore
)

// keywordStart is the start of a libpq key=value DSN: a keyword, optional
// spaces, and "=" ("host=db dbname=sched", "dbname = sched").
var keywordStart = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_.]*\s*=`)

// classifyStore tells what the store setting s names. A string that holds
// "=" but is not a key=value DSN is invalid rather than a file path: a DSN
// with a typo must not become a SQLite file named after its password, and
// a node meant for a cluster must not run alone on a file of its own.
func classifyStore(s string) storeKind {
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "postgres", "postgresql":
			return storePostgres
		case "sqlite":
			return storeSQLite
		}
		return storeInvalid
	}
	if hasSQLitePrefix(s) {
		return storeSQLite
	}
	if keywordStart.MatchString(s) {
		// A key=value DSN names at least one of libpq's connection
		// keywords; "data=1.db" is refused, not sent to a default server.
		keys, msg := parseKeywordDSN(s)
		if msg != "" || slices.ContainsFunc(keys, isConnKeyword) {
			return storePostgres
		}
		return storeInvalid
	}
	if strings.Contains(s, "=") {
		return storeInvalid
	}
	return storeSQLite
}

// hasSQLitePrefix reports whether s starts with "sqlite:", in any case.
func hasSQLitePrefix(s string) bool {
	return len(s) >= len("sqlite:") && strings.EqualFold(s[:len("sqlite:")], "sqlite:")
}

// connKeywords are libpq's connection keywords. A key=value DSN may hold
// other keywords too (pgx passes them to the server as run-time settings,
// such as search_path), but it names at least one of these.
var connKeywords = []string{
	"host", "hostaddr", "port", "dbname", "user", "password", "passfile",
	"service", "sslmode", "sslcert", "sslkey", "sslrootcert", "sslpassword",
	"connect_timeout", "target_session_attrs", "application_name",
}

func isConnKeyword(k string) bool { return slices.Contains(connKeywords, strings.ToLower(k)) }

// checkKeywordDSN returns what is wrong with the syntax of a libpq
// key=value DSN, or "".
func checkKeywordDSN(s string) string {
	_, msg := parseKeywordDSN(s)
	return msg
}

// parseKeywordDSN returns the keywords of a libpq key=value DSN, and what
// is wrong with its syntax or "". Its messages name keywords, never
// values: a value may be the password.
//
// The syntax is libpq's (and pgx's): settings "keyword = value" separated
// by spaces; a value is a run of non-space characters or a single-quoted
// string, with \' and \\ as escapes in both.
func parseKeywordDSN(s string) (keys []string, msg string) {
	i := 0
	skipSpace := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skipSpace()
		if i == len(s) {
			return keys, ""
		}
		start := i
		for i < len(s) && (isKeywordByte(s[i]) || (i > start && (s[i] == '.' || (s[i] >= '0' && s[i] <= '9')))) {
			i++
		}
		key := s[start:i]
		keys = append(keys, key)
		if key == "" {
			return keys, "is not a valid key=value DSN: a setting must start with a keyword such as host or dbname (values are not shown)"
		}
		skipSpace()
		if i == len(s) || s[i] != '=' {
			return keys, "is not a valid key=value DSN: keyword " + quoteKey(key) + " has no \"=\" (values are not shown)"
		}
		i++
		skipSpace()
		if i < len(s) && s[i] == '\'' {
			i++
			closed := false
			for i < len(s) {
				switch s[i] {
				case '\\':
					i += 2
					continue
				case '\'':
					closed = true
				}
				i++
				if closed {
					break
				}
			}
			if !closed {
				return keys, "is not a valid key=value DSN: the quoted value of " + quoteKey(key) + " has no closing quote"
			}
			if i < len(s) && !isSpace(s[i]) {
				return keys, "is not a valid key=value DSN: the quoted value of " + quoteKey(key) + " is followed by more than a space"
			}
			continue
		}
		for i < len(s) && !isSpace(s[i]) {
			if s[i] == '\\' {
				i++
			}
			i++
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isKeywordByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
