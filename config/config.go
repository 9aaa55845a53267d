package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/schedulerd/schedulerd/jobs"
)

// Bounds of a config file.
const (
	// MaxFileSize is the size of the largest config file accepted, in bytes.
	MaxFileSize = 16 << 20
	// MaxJobs is the largest number of [[job]] tables in one config.
	MaxJobs = 100000
	// MaxErrors is the number of problems reported; a last *Error counts
	// the others.
	MaxErrors = 200
)

// Config is a validated config file.
type Config struct {
	// Path is the file the config was read from, as given to Load or Parse.
	Path   string
	Daemon Daemon
	// Jobs are in file order. Each has had WithDefaults applied and has
	// passed Validate.
	Jobs []*jobs.Definition
	// Tokens are the [[token]] tables, in file order: the bearer tokens of
	// the HTTP API (api_listen), each known by its SHA-256 alone.
	Tokens []Token
	// Notifiers are the [[notifier]] tables, in file order: where the
	// events of the jobs that name them in notify are sent.
	Notifiers []Notifier
}

// Notifier returns the notifier named name, or nil.
func (c *Config) Notifier(name string) *Notifier {
	for i := range c.Notifiers {
		if c.Notifiers[i].Name == name {
			return &c.Notifiers[i]
		}
	}
	return nil
}

// Daemon holds the settings of the [daemon] section, with defaults applied.
type Daemon struct {
	// NodeID names this node in the store; unique per cluster. Default
	// (also for ""): the hostname.
	NodeID string
	// Store is where the state lives: "" for SQLite in StateDir; a
	// "postgres://" or "postgresql://" URL or a libpq key=value DSN for
	// PostgreSQL; "sqlite:PATH" or a plain file path (without "=") for
	// SQLite. StorePath gives the SQLite file.
	Store string
	// StateDir is an absolute directory (a relative state_dir is taken
	// from the directory of the config file, never from the working
	// directory). Default: the first entry of $STATE_DIRECTORY, else ./var
	// beside the config file.
	StateDir string
	// Socket is the absolute path of the control socket. Default:
	// $RUNTIME_DIRECTORY/schedulerd.sock, else <StateDir>/schedulerd.sock.
	Socket string
	// SocketGroup is a group allowed to use the socket besides its owner
	// and root; "" for none. It exists on this host.
	SocketGroup string
	// Concurrency is the number of runs at once on this node, 1..10000.
	// Default (also when the file says 0): the number of CPUs.
	Concurrency       int
	HeartbeatInterval time.Duration // default 30s
	// InactiveThreshold is how long a node may be silent before others
	// recover its runs; more than twice HeartbeatInterval. Default 2m.
	InactiveThreshold time.Duration
	// ShutdownGrace is how long running attempts may finish after
	// SIGTERM; 0 stops them at once. Default 30s.
	ShutdownGrace time.Duration
	// History is how long finished runs are kept; at least 1h. Default 720h.
	History time.Duration
	// HealthListen is the host:port of the health and metrics listener; ""
	// for none.
	HealthListen string
	// APIListen is the host:port of the HTTP API (the /v1 routes of the
	// socket, for bearer tokens); "" for none.
	APIListen string
	// APITLSCert and APITLSKey are the absolute paths of the API's
	// certificate (PEM, its chain after it) and key; both or neither. The
	// files are read at start and again on every reload.
	APITLSCert, APITLSKey string
	LogFormat             string // "text" (default) or "json"
	LogLevel              string // "info" (default), "debug", "warn" or "error"
}

// Defaults of the [daemon] settings that are not computed from the host.
const (
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultInactiveThreshold = 2 * time.Minute
	DefaultShutdownGrace     = 30 * time.Second
	DefaultHistory           = 720 * time.Hour
	// DefaultStateDir is the state directory outside systemd, relative to
	// the working directory.
	DefaultStateDir = "./var"
	// SocketName is the file name of the socket in the default directories.
	SocketName = "schedulerd.sock"
	// DatabaseName is the file name of the SQLite database in StateDir.
	DatabaseName = "schedulerd.db"
)

// IsPostgres reports whether Store names PostgreSQL: a postgres:// or
// postgresql:// URL, or a libpq key=value DSN ("host=db dbname=sched").
func (d Daemon) IsPostgres() bool { return classifyStore(d.Store) == storePostgres }

// StorePath returns the SQLite database file: the path of Store (relative
// paths are in StateDir), or <StateDir>/schedulerd.db when Store is empty.
// It returns "" for PostgreSQL.
func (d Daemon) StorePath() string {
	if d.IsPostgres() {
		return ""
	}
	p := sqlitePath(d.Store)
	if p == "" {
		return filepath.Join(d.StateDir, DatabaseName)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.StateDir, p)
	}
	return filepath.Clean(p)
}

// sqlitePath strips the "sqlite:" (or "sqlite://") prefix of a store.
func sqlitePath(store string) string {
	if hasSQLitePrefix(store) {
		store = store[len("sqlite:"):]
		store = strings.TrimPrefix(store, "//")
	}
	return store
}

// Error is one problem in a config file.
type Error struct {
	File string
	Line int // 1-based; 0 when unknown
	// Key names the setting: "daemon.heartbeat_interval",
	// `job "backup": retry.max_attempts`, or "job[2].name" (0-based) for a
	// job whose name is not known. Empty for a problem of the whole file.
	Key string
	Msg string
}

// Error returns "file:line: key: msg", leaving out the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and parses the config file at path.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// readFile reads the config file at path, up to one byte past MaxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return data, nil
}

// Parse parses and validates data, which came from the file path (path is
// used in messages and stored in the Config). On failure it returns no
// config and every problem found (up to MaxErrors): an errors.Join of
// *Error sorted by line.
func Parse(path string, data []byte) (*Config, error) {
	p, tree := parseTOML(path, data)
	if tree == nil {
		return nil, p.err()
	}
	cfg := &Config{Path: path}
	cfg.Daemon, cfg.Jobs, cfg.Tokens, cfg.Notifiers = p.top(tree)
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	compact(cfg)
	return cfg, nil
}

// LoadDaemon reads the config file at path for its [daemon] table alone, as
// a client does to find the daemon's socket: the jobs are neither checked
// nor built, so a mistake in a job being edited does not keep a client from
// reaching the daemon, which runs its last good config. (It still reads the
// whole TOML, which is what it costs with many jobs: what it skips is
// building and checking them.) The daemon section's problems are reported
// as Load reports them. A file that is not valid TOML is read again with
// only its lines before the first table and those of its [daemon] table: a
// TOML mistake in a job does not keep the client away either.
func LoadDaemon(path string) (*Daemon, error) {
	d, _, err := LoadDaemonPast(path)
	return d, err
}

// LoadDaemonPast is LoadDaemon that also returns the TOML mistake
// outside [daemon] that it read past (nil when the file is valid TOML),
// for a client to mention.
func LoadDaemonPast(path string) (d *Daemon, past, err error) {
	data, err := readFile(path)
	if err != nil {
		return nil, nil, err
	}
	return parseDaemon(path, data)
}

// ParseDaemon is Parse of the [daemon] table alone; see LoadDaemon.
func ParseDaemon(path string, data []byte) (*Daemon, error) {
	d, _, err := parseDaemon(path, data)
	return d, err
}

func parseDaemon(path string, data []byte) (_ *Daemon, past, err error) {
	p, tree := parseTOML(path, data)
	if tree == nil {
		past = p.err()
		// Read past a TOML mistake in a line of another table only.
		var pe *Error
		if errors.As(past, &pe) && pe.Line > 0 {
			if only, blankedBad, ok := daemonLines(data, pe.Line); ok && blankedBad {
				if q, t := parseTOML(path, only); t != nil {
					p, tree = q, t
				}
			}
		}
		if tree == nil {
			return nil, nil, past
		}
	}
	var table map[string]any
	if v, ok := tree["daemon"]; ok {
		table, _ = p.table(scope{}, "daemon", v, "[daemon]")
	}
	d := p.daemon(table)
	if len(p.errs) > 0 {
		return nil, nil, p.err()
	}
	return &d, past, nil
}

// daemonHeader is the header line of the [daemon] table; otherHeader that
// of any other table or array of tables with a plain dotted name; any line
// that starts with [ is taken for a header.
var (
	daemonHeader = regexp.MustCompile(`^[ \t]*\[[ \t]*daemon[ \t]*\][ \t]*(#.*)?$`)
	otherHeader  = regexp.MustCompile(`^[ \t]*\[\[?[ \t]*[A-Za-z0-9_-]+([ \t]*\.[ \t]*[A-Za-z0-9_-]+)*[ \t]*\]\]?[ \t]*(#.*)?$`)
)

// daemonLines returns data with every line blanked but those before the
// first table header and those of the [daemon] table, so that the lines
// keep their numbers, and whether the line numbered bad (from 1) is one
// it blanked. ok is false when a line that starts with [ is not a
// well-formed header: the mistake may be the header of [daemon] itself.
// A value that spans lines and holds a line that looks like a header (a
// multi-line string or array) can make the result invalid TOML, or read
// a key of such a value as the daemon's: it is only read when the whole
// file is not valid TOML, and only by a client.
func daemonLines(data []byte, bad int) (out []byte, blankedBad, ok bool) {
	keep := true
	out = make([]byte, 0, len(data))
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		if line := strings.TrimRight(string(l), "\r\n"); strings.HasPrefix(strings.TrimLeft(line, " \t"), "[") {
			switch {
			case daemonHeader.MatchString(line):
				keep = true
			case otherHeader.MatchString(line):
				keep = false
			default:
				return nil, false, false
			}
		}
		if keep {
			out = append(out, l...)
			continue
		}
		if i+1 == bad {
			blankedBad = true
		}
		if bytes.HasSuffix(l, []byte("\n")) {
			out = append(out, '\n')
		}
	}
	return out, blankedBad, true
}

// parseTOML checks data's size and nesting and decodes it; on failure the
// tree is nil and the parser holds the problem.
func parseTOML(path string, data []byte) (*parser, map[string]any) {
	p := &parser{file: path, zones: map[string]zoneResult{}, users: map[string]error{}}
	if len(data) > MaxFileSize {
		p.errs = append(p.errs, &Error{File: path, Msg: fmt.Sprintf("the file is larger than %d MiB", MaxFileSize>>20)})
		return p, nil
	}
	src := string(data)
	if deep := scanDepth(src); deep > 0 {
		p.errs = append(p.errs, &Error{File: path, Line: deep, Msg: fmt.Sprintf("nesting deeper than %d levels", maxDepth)})
		return p, nil
	}
	p.src = src
	tree, err := decode(src)
	if err != nil {
		e := &Error{File: path, Msg: "invalid TOML: " + clipN(err.Error(), 300)}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			e.Line, e.Msg = pe.Position.Line, "invalid TOML: "+clipN(pe.Message, 300)
		}
		p.errs = append(p.errs, e)
		return p, nil
	}
	return p, tree
}

// decode parses TOML into a tree of maps. A panic of the decoder is an
// error: a config reload must not stop the daemon.
func decode(src string) (tree map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			tree, err = nil, fmt.Errorf("the decoder failed: %v", r)
		}
	}()
	_, err = toml.Decode(src, &tree)
	return tree, err
}

// parser collects the problems of one file.
type parser struct {
	file string
	src  string
	// pos is read from src when a message first needs a line: a valid
	// file never needs it, and for a file of many jobs it held much memory
	// through the parse.
	pos   positions
	errs  []*Error
	zones map[string]zoneResult // time zones by name
	users map[string]error      // user lookups by name
	// notifierNames are the names of the [[notifier]] tables, read before
	// the jobs that name them; nil when there are too many to read.
	notifierNames map[string]string
	// notifierByName are the valid [[notifier]] tables by name.
	notifierByName map[string]*Notifier
}

type zoneResult struct {
	loc *time.Location
	err error
}

// err returns the problems found, sorted by line, or nil.
func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Key, b.Key))
	})
	list := p.errs
	if len(list) > MaxErrors {
		more := &Error{File: p.file, Msg: fmt.Sprintf("%d more problems not shown", len(list)-MaxErrors)}
		list = append(list[:MaxErrors:MaxErrors], more)
	}
	errs := make([]error, len(list))
	for i, e := range list {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// scope is a table being read: where its keys are in the file and how
// messages name them.
type scope struct {
	path  string // position path: "daemon", "job[3]", "job[3].retry"
	label string // prefix of its key names: "daemon.", `job "x": `, `job "x": retry.`
}

// sub returns the scope of the table at key k of sc.
func (sc scope) sub(k string) scope {
	return scope{path: joinPath(sc.path, k), label: sc.label + quoteKey(k) + "."}
}

// quoteKey writes a key as TOML would (bare when it can be), shortened
// when it is long.
func quoteKey(k string) string { return toml.Key{clip(k)}.String() }

// errorf records a problem with key k of sc, at the line of k (or, when k
// is not in the file, of the table).
func (p *parser) errorf(sc scope, k, format string, args ...any) {
	p.errAt(p.line(joinPath(sc.path, k)), sc.label+quoteKey(k), format, args...)
}

// line returns the line of the key path (see positions.line).
func (p *parser) line(path string) int {
	if p.pos == nil {
		p.pos, _ = scanPositions(p.src)
	}
	return p.pos.line(path)
}

func (p *parser) errAt(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// top reads the top level of the file.
func (p *parser) top(tree map[string]any) (Daemon, []*jobs.Definition, []Token, []Notifier) {
	top := scope{}
	var (
		daemonTable, defaultsTable             map[string]any
		jobTables, tokenTables, notifierTables []map[string]any
	)
	for _, k := range slices.Sorted(maps.Keys(tree)) {
		v := tree[k]
		switch k {
		case "daemon":
			daemonTable, _ = p.table(top, k, v, "[daemon]")
		case "defaults":
			defaultsTable, _ = p.table(top, k, v, "[defaults]")
		case "job":
			jobTables = p.arrayOfTables(k, v)
			delete(tree, k) // each table is let go once read, below
		case "token":
			tokenTables = p.arrayOfTables(k, v)
		case "notifier":
			notifierTables = p.arrayOfTables(k, v)
		default:
			p.unknown(top, k, topKeys)
		}
	}
	d := p.daemon(daemonTable)
	tokens := p.tokens(tokenTables)
	var notifiers []Notifier
	notifiers, p.notifierNames = p.notifiers(notifierTables)
	p.notifierByName = make(map[string]*Notifier, len(notifiers))
	for i := range notifiers {
		p.notifierByName[notifiers[i].Name] = &notifiers[i]
	}
	defaults := p.readJob(scope{path: "defaults", label: "defaults."}, defaultsTable, true)
	p.checkDefaults(defaults)
	if len(jobTables) > MaxJobs {
		p.errAt(p.line(indexPath("job", MaxJobs)), "job", "%d jobs; at most %d are allowed", len(jobTables), MaxJobs)
		return d, nil, tokens, notifiers
	}
	defs := make([]*jobs.Definition, 0, len(jobTables))
	names := make(map[string]string, len(jobTables)) // name -> path of its first job
	var chained []*rawJob                            // the jobs that set on_success or on_failure
	for i, m := range jobTables {
		if m == nil {
			continue
		}
		sc := scope{path: indexPath("job", i), label: indexPath("job", i) + "."}
		before := len(p.errs)
		j := p.readJob(sc, m, false)
		jobTables[i] = nil // the collector may take it while the next jobs are read
		if j.name.set {
			if first, dup := names[j.name.v]; dup {
				p.errorf(j.sc, "name", "duplicate job name; the first job named %q is at line %d",
					j.name.v, p.line(joinPath(first, "name")))
			} else {
				names[j.name.v] = j.sc.path
			}
		}
		if def := p.build(j, defaults, before); def != nil {
			defs = append(defs, def)
		}
		if j.name.set && (j.onSuccess.set || j.onFailure.set) {
			j.m = nil // only the chain is read from here on
			chained = append(chained, j)
		}
	}
	p.checkChains(chained, names)
	return d, defs, tokens, notifiers
}

// arrayOfTables returns the tables of the array of tables k ([[job]],
// [[token]]; or an inline array of tables); an element that is not a
// table is reported, and is nil.
func (p *parser) arrayOfTables(k string, v any) []map[string]any {
	top := scope{}
	switch v := v.(type) {
	case []map[string]any:
		return v
	case []any:
		tables := make([]map[string]any, 0, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				p.errAt(p.line(indexPath(k, i)), indexPath(k, i), "must be a table, not %s", typeName(e))
			}
			tables = append(tables, m) // nil when not a table: the next ones keep their index

		}
		return tables
	case map[string]any:
		p.errorf(top, k, "must be an array of tables: write [[%s]], not [%s]", k, k)
	default:
		p.errorf(top, k, "must be an array of tables ([[%s]]), not %s", k, typeName(v))
	}
	return nil
}
