package config

import (
	"strings"
	"testing"
)

// TestStoreKeywordDSN: a libpq key=value DSN is PostgreSQL, never a SQLite
// file named after it; a string that is neither a URL, such a DSN nor a
// plain path is refused, and no message repeats what may be a password.
func TestStoreKeywordDSN(t *testing.T) {
	const secret = "S3cret-do-not-print"
	postgres := []string{
		"host=db user=sched password=" + secret + " dbname=sched",
		"dbname = sched  host = /run/postgresql",
		"host=db password='" + secret + " with spaces' dbname=sched",
		`host=db password='it\'s ` + secret + `' sslmode=require`,
		"service=sched",
		"host=db search_path=sched",
	}
	for _, s := range postgres {
		cfg, err := Parse("t.toml", []byte("[daemon]\nstate_dir = \"/state\"\nstore = "+tomlString(s)+"\n"))
		if err != nil {
			t.Errorf("store %q: %v", s, err)
			continue
		}
		if d := cfg.Daemon; !d.IsPostgres() || d.StorePath() != "" {
			t.Errorf("store %q: IsPostgres = %v, StorePath = %q; want PostgreSQL", s, d.IsPostgres(), d.StorePath())
		}
	}

	refused := []struct{ store, want string }{
		{"/var/lib/sd/a=b.db", "is neither a postgres:// URL"},
		{"data=" + secret + ".db", "is neither a postgres:// URL"},
		{"host=db password='" + secret, "has no closing quote"},
		{"host=db password='" + secret + "'x", "is followed by more than a space"},
		{"host=db " + secret, "has no \"=\""},
		{"mysql://u:" + secret + "@db/x", "unknown store"},
	}
	for _, tt := range refused {
		_, err := Parse("t.toml", []byte("[daemon]\nstore = "+tomlString(tt.store)+"\n"))
		if err == nil {
			t.Errorf("store %q: accepted, want an error", tt.store)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "t.toml:2: daemon.store: ") || !strings.Contains(msg, tt.want) {
			t.Errorf("store %q: error %q, want t.toml:2: daemon.store: ... %q", tt.store, msg, tt.want)
		}
		if strings.Contains(msg, secret) {
			t.Errorf("store %q: the error repeats the secret: %q", tt.store, msg)
		}
	}

	// An explicit sqlite: prefix may name a file with "=".
	cfg, err := Parse("t.toml", []byte("[daemon]\nstate_dir = \"/state\"\nstore = \"sqlite:/data/a=b.db\"\n"))
	if err != nil || cfg.Daemon.IsPostgres() || cfg.Daemon.StorePath() != "/data/a=b.db" {
		t.Errorf("sqlite:/data/a=b.db: err %v", err)
	}
}

// tomlString quotes s as a TOML literal string when it can, else basic.
func tomlString(s string) string {
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
