package main

import (
	"fmt"
	"os"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/store/postgres"
)

// exposedSecret returns a warning when the config file holds a password
// (in a PostgreSQL store string) and other users may read the file, or "".
// The file's group may read it (0640 with socket_group is the installed
// mode); everyone else must not.
func exposedSecret(cfg *config.Config) string {
	d := cfg.Daemon
	if !d.IsPostgres() || postgres.RedactDSN(d.Store) == d.Store {
		return ""
	}
	st, err := os.Stat(cfg.Path)
	if err != nil || st.Mode().Perm()&0o004 == 0 {
		return ""
	}
	return fmt.Sprintf("%s holds the store's password and is readable by every user (mode %04o): chmod o-r it, or move the password to PGPASSFILE or a passfile= setting",
		cfg.Path, st.Mode().Perm())
}
