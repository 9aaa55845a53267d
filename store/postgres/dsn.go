package postgres

import (
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces a password wherever one is shown.
const redacted = "xxxxx"

// DSN is a connection string whose String and LogValue hide the password, so
// that it can be logged and printed as it is.
type DSN string

// String returns the DSN with its password replaced.
func (d DSN) String() string { return RedactDSN(string(d)) }

// LogValue implements slog.LogValuer.
func (d DSN) LogValue() slog.Value { return slog.StringValue(RedactDSN(string(d))) }

var (
	// userinfoPassword is the password of a URL's userinfo: the text
	// between the colon after the user name and the last @ of the word.
	// Used when the URL does not parse; it may hide more than the password,
	// never less.
	userinfoPassword = regexp.MustCompile(`(://[^:/?#@\s]*:)\S*@`)
	// keywordPassword is a password setting of a key=value DSN, quoted or
	// not, or a password query parameter of a URL.
	keywordPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)`)
)

// RedactDSN returns dsn (a postgres:// URL or key=value settings) with its
// password replaced by "xxxxx". It also scrubs free text that contains a DSN,
// such as an error message.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil && !strings.ContainsAny(dsn, " \t\n") {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), redacted)
			}
			q := u.Query()
			for k := range q {
				if strings.EqualFold(k, "password") {
					q[k] = []string{redacted}
					u.RawQuery = q.Encode()
				}
			}
			return u.String()
		}
	}
	s := userinfoPassword.ReplaceAllString(dsn, "${1}"+redacted+"@")
	return keywordPassword.ReplaceAllString(s, "${1}"+redacted)
}
