package main

import (
	"fmt"
	"net"
	"os"
	"strings"

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

// exposedAPI returns a warning when api_listen is set to an address that
// is not a loopback one and the API has no TLS, or "": its tokens would
// cross the network in clear. A host name other than localhost counts as
// not loopback (it is not resolved). The daemon warns again when it binds.
func exposedAPI(d config.Daemon) string {
	if d.APIListen == "" || d.APITLSCert != "" {
		return ""
	}
	host, _, err := net.SplitHostPort(d.APIListen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback()) {
		return ""
	}
	return fmt.Sprintf("api_listen %q is not a loopback address and the API has no TLS: tokens and replies would cross the network in clear; "+
		"set api_tls_cert and api_tls_key, or bind 127.0.0.1 behind a reverse proxy that does TLS", d.APIListen)
}
