package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of daemon settings.
const (
	// MaxConcurrency bounds concurrency.
	MaxConcurrency = 10000
	// MinHistory is the shortest history.
	MinHistory = time.Hour
	// maxSocketPath is the longest path a unix socket address holds
	// (sun_path is 108 bytes with its NUL).
	maxSocketPath = 107
)

var daemonKeys = []string{
	"node_id", "store", "state_dir", "socket", "socket_group", "concurrency",
	"heartbeat_interval", "inactive_threshold", "shutdown_grace", "history",
	"health_listen", "api_listen", "api_tls_cert", "api_tls_key", "log_format", "log_level",
}

// daemon reads the [daemon] table (nil when absent) and applies defaults.
func (p *parser) daemon(m map[string]any) Daemon {
	sc := scope{path: "daemon", label: "daemon."}
	d := Daemon{
		HeartbeatInterval: DefaultHeartbeatInterval,
		InactiveThreshold: DefaultInactiveThreshold,
		ShutdownGrace:     DefaultShutdownGrace,
		History:           DefaultHistory,
		LogFormat:         "text",
		LogLevel:          "info",
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p.daemonKey(sc, &d, k, m[k])
	}
	p.checkDaemon(sc, m, &d)
	p.daemonDefaults(sc, &d)
	return d
}

// daemonKey sets the key k of [daemon] in d.
func (p *parser) daemonKey(sc scope, d *Daemon, k string, v any) {
	switch k {
	case "node_id":
		if s, ok := p.str(sc, k, v); ok {
			if s != "" && !namePattern.MatchString(s) {
				p.errorf(sc, k, "%s is not a valid node id: use up to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", clip(strconv.Quote(s)))
			}
			d.NodeID = s
		}
	case "store":
		if s, ok := p.str(sc, k, v); ok {
			if msg := checkStore(s); msg != "" {
				p.errorf(sc, k, "%s", msg)
			}
			d.Store = s
		}
	case "state_dir":
		d.StateDir, _ = p.str(sc, k, v)
	case "socket":
		d.Socket, _ = p.str(sc, k, v)
	case "socket_group":
		if s, ok := p.str(sc, k, v); ok && s != "" {
			if err := lookupGroup(s); err != nil {
				p.errorf(sc, k, "%v", err)
			}
			d.SocketGroup = s
		}
	case "concurrency":
		d.Concurrency, _ = p.integer(sc, k, v, 0, MaxConcurrency)
	case "heartbeat_interval":
		d.HeartbeatInterval, _ = p.duration(sc, k, v, positive)
	case "inactive_threshold":
		d.InactiveThreshold, _ = p.duration(sc, k, v, positive)
	case "shutdown_grace":
		d.ShutdownGrace, _ = p.duration(sc, k, v, nonNegative)
	case "history":
		if h, ok := p.duration(sc, k, v, positive); ok {
			if h < MinHistory {
				p.errorf(sc, k, "must be at least %s, got %s", MinHistory, h)
			}
			d.History = h
		}
	case "health_listen":
		if s, ok := p.str(sc, k, v); ok && s != "" {
			if msg := checkListen(s); msg != "" {
				p.errorf(sc, k, "%s", msg)
			}
			d.HealthListen = s
		}
	case "api_listen":
		if s, ok := p.str(sc, k, v); ok && s != "" {
			if msg := checkListen(s); msg != "" {
				p.errorf(sc, k, "%s", msg)
			}
			d.APIListen = s
		}
	case "api_tls_cert":
		if s, ok := p.str(sc, k, v); ok && s != "" {
			d.APITLSCert = p.absolute(sc, k, s)
		}
	case "api_tls_key":
		if s, ok := p.str(sc, k, v); ok && s != "" {
			d.APITLSKey = p.absolute(sc, k, s)
		}
	case "log_format":
		d.LogFormat, _ = p.oneOf(sc, k, v, "text", "json")
	case "log_level":
		d.LogLevel, _ = p.oneOf(sc, k, v, "debug", "info", "warn", "error")
	default:
		if slices.Contains(settingKeys, k) || slices.Contains(jobOnlyKeys, k) {
			p.errorf(sc, k, "unknown key in [daemon]; %s is a job setting: put it in [defaults] or a [[job]]", k)
		} else {
			p.unknown(sc, k, daemonKeys)
		}
	}
}

// checkDaemon checks what the keys of [daemon] (m) say together.
func (p *parser) checkDaemon(sc scope, m map[string]any, d *Daemon) {
	switch {
	case (d.APITLSCert == "") != (d.APITLSKey == ""):
		set, unset := "api_tls_cert", "api_tls_key"
		if d.APITLSCert == "" {
			set, unset = unset, set
		}
		p.errorf(sc, set, "is set without %s: give both files, or neither for plain HTTP", unset)
	case d.APITLSCert != "" && d.APIListen == "":
		p.errorf(sc, "api_tls_cert", "is set but api_listen is not: the certificate is for the HTTP API, which is off")
	}

	_, hasInactive := m["inactive_threshold"]
	_, hasHeartbeat := m["heartbeat_interval"]
	// inactive > 2*heartbeat, written so that it cannot overflow.
	if hb, in := d.HeartbeatInterval, d.InactiveThreshold; hb > 0 && in > 0 && in-hb <= hb {
		key := "inactive_threshold"
		if !hasInactive && hasHeartbeat {
			key = "heartbeat_interval"
		}
		p.errAt(p.line(joinPath(sc.path, key)), sc.label+"inactive_threshold",
			"must be more than twice heartbeat_interval (%s), got %s", hb, in)
	}
}

// daemonDefaults fills in what [daemon] left unset and depends on the
// machine: node id, concurrency, state directory and socket.
func (p *parser) daemonDefaults(sc scope, d *Daemon) {
	if d.NodeID == "" {
		host, err := os.Hostname()
		switch {
		case err != nil:
			p.errorf(sc, "node_id", "is not set and the hostname is unknown (%v); set node_id", err)
		case !namePattern.MatchString(host):
			p.errorf(sc, "node_id", "is not set and the hostname %s is not a valid node id; set node_id", clip(strconv.Quote(host)))
		}
		d.NodeID = host
	}
	if d.Concurrency == 0 {
		d.Concurrency = min(runtime.NumCPU(), MaxConcurrency)
	}

	if d.StateDir == "" {
		d.StateDir = DefaultStateDir
		if dir, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":"); dir != "" {
			d.StateDir = dir
		}
	}
	d.StateDir = p.absolute(sc, "state_dir", d.StateDir)
	if d.Socket == "" {
		if dir, _, _ := strings.Cut(os.Getenv("RUNTIME_DIRECTORY"), ":"); dir != "" {
			d.Socket = filepath.Join(dir, SocketName)
		} else {
			d.Socket = filepath.Join(d.StateDir, SocketName)
		}
	}
	d.Socket = p.absolute(sc, "socket", d.Socket)
	if len(d.Socket) > maxSocketPath {
		p.errorf(sc, "socket", "the path %s is %d bytes; a unix socket path has at most %d", clip(strconv.Quote(d.Socket)), len(d.Socket), maxSocketPath)
	}
}

// absolute makes path absolute, against the directory of the config file:
// a system service's working directory (/ under systemd) never moves the
// state, and `make run`'s ./var is beside its config whatever the working
// directory.
func (p *parser) absolute(sc scope, k, path string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(p.file), path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		p.errorf(sc, k, "cannot make %s absolute: %v", clip(strconv.Quote(path)), err)
		return path
	}
	return abs
}

// checkStore returns what is wrong with a store setting, or "". It never
// repeats the setting, which may hold a password.
func checkStore(s string) string {
	switch classifyStore(s) {
	case storeInvalid:
		if scheme, _, ok := strings.Cut(s, "://"); ok {
			return fmt.Sprintf("unknown store %s; use postgres://..., a key=value DSN (host=... dbname=...), sqlite:PATH or a file path", clip(strconv.Quote(scheme+"://")))
		}
		return "is neither a postgres:// URL, a key=value DSN (host=... dbname=...) nor a file path: " +
			"it holds \"=\" but does not start with a keyword and \"=\"; a file path with \"=\" must be written sqlite:PATH (the value is not shown: it may hold a password)"
	case storePostgres:
		if strings.Contains(s, "://") {
			if _, err := url.Parse(s); err != nil {
				return "is not a valid postgres:// URL (the value is not shown: it may hold a password)"
			}
			return ""
		}
		return checkKeywordDSN(s)
	}
	switch {
	case s != "" && sqlitePath(s) == "":
		return "sqlite: needs a file path, such as sqlite:/var/lib/schedulerd/schedulerd.db"
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain a NUL byte"
	}
	return ""
}

// checkListen returns what is wrong with a host:port, or "".
func checkListen(s string) string {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("must be host:port such as \"127.0.0.1:9464\": %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("the port must be a number from 1 to 65535, got %s", clip(strconv.Quote(port)))
	}
	return ""
}

// lookupGroup checks that a group (a name or a numeric id) exists.
func lookupGroup(name string) error {
	_, err := user.LookupGroup(name)
	if err != nil {
		if _, convErr := strconv.Atoi(name); convErr == nil {
			_, err = user.LookupGroupId(name)
		}
	}
	if err != nil {
		return fmt.Errorf("unknown group %s", clip(strconv.Quote(name)))
	}
	return nil
}
