package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/schedulerd/schedulerd/store"
)

// TestKeywordDSNIsPostgres: a libpq key=value DSN, as docs/cluster.md writes it,
// makes a node of the PostgreSQL cluster: check-config says postgres, the
// daemon's runs land in that database, and the password is printed nowhere
// (check-config, the log) and names no file.
func TestKeywordDSNIsPostgres(t *testing.T) {
	pg.Require(t)
	url := pg.NewDatabase(t)
	kv, secret := keywordDSN(t, url)

	e := newEnv(t)
	e.writeConfigWith(2, fmt.Sprintf("store = '%s'\n", kv), "[[job]]\nname = \"a\"\ncommand = [\"/bin/true\"]\n")
	check := e.cli("check-config")
	if check.code != 0 || !strings.Contains(check.stdout, "store postgres ") || strings.Contains(check.stdout+check.stderr, secret) {
		t.Errorf("check-config with a key=value DSN: exit %d, %q; want store postgres and no password", check.code, check.stdout+check.stderr)
	}
	// The config is 0644 and holds a password: both warn.
	const warning = "holds the store's password and is readable by every user (mode 0644)"
	if !strings.Contains(check.stderr, warning) {
		t.Errorf("check-config of a 0644 config with a password: stderr %q, want %q", check.stderr, warning)
	}

	d := e.start(true)
	out := e.ok("trigger", "a", "--wait")
	d.stop()
	log := d.logText()
	if strings.Contains(log, secret) {
		t.Errorf("the daemon's log holds the password:\n%s", log)
	}
	if !strings.Contains(log, warning) {
		t.Errorf("the daemon did not warn of its 0644 config with a password:\n%s", log)
	}
	if err := os.Chmod(e.config, 0o640); err != nil {
		t.Fatal(err)
	}
	if r := e.cli("check-config"); strings.Contains(r.stderr, "readable by every user") {
		t.Errorf("check-config warns of a 0640 config: %q", r.stderr)
	}
	if strings.Contains(out, secret) {
		t.Errorf("trigger printed the password: %q", out)
	}
	st := openPostgres(t, url)
	runs, err := st.RunsList(context.Background(), store.RunFilter{Job: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("%d runs of a in PostgreSQL, want 1: the node did not use the database", len(runs))
	}
	assertNoFileNamed(t, e.dir, secret, "password=")
}

// TestStoreNeitherURLNorDSNNorPath: a store string with "=" that is not a
// key=value DSN is refused by check-config and run alike, without
// repeating it and before any file is made.
func TestStoreNeitherURLNorDSNNorPath(t *testing.T) {
	const secret = "S3cret-in-a-typo"
	e := newEnv(t)
	e.writeConfig("")
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(cfg), "[daemon]\n", "[daemon]\nstore = 'hots=db usr=sched pasword="+secret+"'\n", 1)
	if err := os.WriteFile(e.config, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"check-config", "run"} {
		r := e.cli(cmd)
		if r.code != exitUsage || !strings.Contains(r.stderr, "daemon.store: is neither a postgres:// URL") {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and the store refused", cmd, r.code, r.stderr, exitUsage)
		}
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("%s repeats the password: %q", cmd, r.stdout+r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "state")); !os.IsNotExist(err) {
		t.Errorf("the refused config made its state directory: %v", err)
	}
	assertNoFileNamed(t, e.dir, secret, "pasword=")
}

// keywordDSN turns the test database's URL into key=value settings with a
// password: the server's own when it has one, else a made-up one that
// trust authentication ignores. It returns the DSN and the password.
func keywordDSN(t *testing.T, url string) (dsn, password string) {
	t.Helper()
	c, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	password = c.Password
	if password == "" {
		password = "S3cret-key-value-password"
	}
	dsn = fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=disable", c.Host, c.Port, c.User, password, c.Database)
	return dsn, password
}

// assertNoFileNamed fails when a file under dir has a name holding any of
// the words.
func assertNoFileNamed(t *testing.T, dir string, words ...string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		for _, w := range words {
			if err == nil && strings.Contains(filepath.Base(path), w) {
				t.Errorf("file named after the store string: %s", path)
			}
		}
		return nil
	})
}
