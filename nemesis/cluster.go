package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerd/schedulerd/internal/pgtest"
	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
)

// database is the cluster's database on the PostgreSQL pair.
const database = "nemesis"

// notAsked is why a kind of fault that -kinds leaves out is not done.
const notAsked = "not asked for (-kinds)"

// cluster is the run: the PostgreSQL pair, the nodes with their proxies,
// the webhook receiver, and what the driver did.
type cluster struct {
	out      io.Writer
	dir      string
	start    time.Time
	kinds    []string
	pair     *pgtest.Pair
	nodes    []*node
	receiver *receiver
	witness  string

	mu       sync.Mutex
	faults   []Fault
	exits    []Exit
	stopping bool
}

func (c *cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.out, "nemesis: %6s "+format+"\n", append([]any{time.Since(c.start).Round(time.Second)}, args...)...)
}

// runCluster makes the cluster, runs the faults and the load for
// o.duration, lets it settle, and returns the history and the path to
// write it to.
func runCluster(ctx context.Context, o options, out io.Writer) (*History, string, error) {
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "nemesis-"); err != nil {
			return nil, "", err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	// The postgres user that runs the servers reads nothing here, but the
	// jobs (run as the daemon's user) write the witness file.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, "", err
	}
	c := &cluster{out: out, dir: dir, witness: filepath.Join(dir, "witness")}
	fmt.Fprintf(out, "nemesis: seed %d (replay: %s), directory %s\n", o.seed, o.replay(), dir)
	meta := Meta{Seed: o.seed, Duration: Duration(o.duration), Heartbeat: Duration(heartbeat), Inactive: Duration(inactive),
		NotDone: map[string]string{}}
	tmpfs := true
	if why := diskFullSupport(dir); why != "" {
		meta.NotDone["disk-full"] = why
		fmt.Fprintf(out, "nemesis: disk-full will not be done: %s\n", why)
		tmpfs = false
	}
	for _, k := range faultKinds {
		if !slices.Contains(strings.Split(o.kinds, ","), k) {
			meta.NotDone[k] = notAsked
			continue
		}
		if _, no := meta.NotDone[k]; !no {
			c.kinds = append(c.kinds, k)
		}
	}
	if len(c.kinds) == 0 {
		return nil, "", errors.New("no kind of fault can be done")
	}
	meta.Kinds = c.kinds

	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "schedulerd")
		fmt.Fprintf(out, "nemesis: building %s\n", bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/schedulerd/schedulerd/cmd/schedulerd")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("go build: %v: %s", err, b)
		}
	} else if bin, _ = filepath.Abs(bin); bin == "" {
		return nil, "", errors.New("-bin: no such file")
	}

	fmt.Fprintln(out, "nemesis: starting PostgreSQL: a primary and a synchronous standby")
	pair, err := pgtest.StartPair()
	if err != nil {
		return nil, "", err
	}
	defer pair.Stop()
	c.pair = pair
	if err := admin(ctx, pair.Primary().DSN(), `CREATE DATABASE `+database); err != nil {
		return nil, "", err
	}

	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	secretFile := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	if c.receiver, err = newReceiver([]byte(hex.EncodeToString(secret)), filepath.Join(dir, "deliveries.jsonl")); err != nil {
		return nil, "", err
	}
	defer c.receiver.Close()
	script := filepath.Join(dir, "witness.sh")
	if err := os.WriteFile(script, []byte(witnessScript(c.witness)), 0o755); err != nil {
		return nil, "", err
	}

	for i := 1; i <= 3; i++ {
		n, err := c.newNode(fmt.Sprintf("node-%d", i), bin, script, secretFile, tmpfs)
		if err != nil {
			return nil, "", err
		}
		defer n.proxy.Close()
		c.nodes = append(c.nodes, n)
	}
	defer func() {
		c.mu.Lock()
		c.stopping = true
		c.mu.Unlock()
		for _, n := range c.nodes {
			n.kill()
		}
	}()
	for _, n := range c.nodes {
		if err := c.startNode(ctx, n); err != nil {
			return nil, "", err
		}
	}
	fmt.Fprintf(out, "nemesis: 3 nodes ready; faults of %d kinds and the load for %s\n", len(c.kinds), o.duration)

	c.start = time.Now()
	meta.Start = c.start
	var ld load
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() { ld.run(loadCtx, c.nodes, o.seed); close(loadDone) }()
	err = c.nemesis(ctx, o.seed, o.duration)
	stopLoad()
	<-loadDone
	if err != nil {
		return nil, "", err
	}
	meta.LoadEnd = time.Now()
	c.logf("faults and load over; pausing the cron jobs")
	if err := c.pauseCron(ctx); err != nil {
		return nil, "", err
	}

	st, err := postgres.Open(ctx, postgres.Options{DSN: pgtest.DatabaseDSN(pair.Primary().DSN(), database)})
	if err != nil {
		return nil, "", err
	}
	defer st.Close()
	if err := c.settle(ctx, st, o.settle); err != nil {
		return nil, "", err
	}
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	for _, n := range c.nodes {
		if !n.terminate(30 * time.Second) {
			c.logf("%s did not stop within 30s of SIGTERM: killed", n.id)
		}
	}
	meta.End = time.Now()

	h := &History{Meta: meta, Jobs: jobSpecs()}
	if err := collect(ctx, st, h); err != nil {
		return nil, "", err
	}
	if h.Execs, err = readWitness(c.witness); err != nil {
		return nil, "", err
	}
	h.Deliveries = c.receiver.taken()
	h.Triggers = ld.sent()
	c.mu.Lock()
	h.Faults, h.Exits = c.faults, c.exits
	c.mu.Unlock()
	return h, filepath.Join(dir, "history.jsonl"), nil
}

func (c *cluster) newNode(id, bin, script, secretFile string, tmpfs bool) (*node, error) {
	dir := filepath.Join(c.dir, id)
	n := &node{id: id, dir: dir, config: filepath.Join(dir, "schedulerd.toml"), state: filepath.Join(dir, "state"),
		socket: filepath.Join(dir, "run", "schedulerd.sock"), logPath: filepath.Join(dir, "daemon.log"), bin: bin, tmpfs: tmpfs}
	for _, d := range []string{dir, n.state, filepath.Dir(n.socket)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	p, err := newProxy(c.pair.Primary().Addr(), true)
	if err != nil {
		return nil, err
	}
	n.proxy = p
	dsn := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.Addr(), database)
	if err := os.WriteFile(n.config, []byte(nodeConfig(n, dsn, script, c.receiver.URL(), secretFile)), 0o600); err != nil {
		return nil, err
	}
	n.exited = func(x Exit) {
		c.mu.Lock()
		stopping := c.stopping
		if !stopping {
			c.exits = append(c.exits, x)
		}
		c.mu.Unlock()
		if stopping {
			return
		}
		c.logf("%s exited unasked (%s): %s; restarting it", x.Node, x.Status, x.Log)
		go func() {
			n.life.Lock()
			defer n.life.Unlock()
			if _, ok := n.running(); !ok {
				_ = c.startNode(context.Background(), n)
			}
		}()
	}
	return n, nil
}

// startNode starts a node, trying again while it fails to come up (the
// store may be down), for up to five minutes.
func (c *cluster) startNode(ctx context.Context, n *node) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := n.start(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		c.logf("%s did not start, trying again: %v", n.id, err)
		if !sleep(ctx, 2*time.Second) {
			return ctx.Err()
		}
	}
}

// pauseCron pauses every cron job, through whichever node answers: from
// then on no tick fires, and the ticks written ahead are taken back.
func (c *cluster) pauseCron(ctx context.Context) error {
	for _, j := range cronJobs {
		deadline := time.Now().Add(2 * time.Minute)
		for i := 0; ; i++ {
			n := c.nodes[i%len(c.nodes)]
			_, err := n.api().Pause(ctx, j.name)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pause %s: %w", j.name, err)
			}
			if !sleep(ctx, 500*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	return nil
}

// settle waits until no run is pending, running or retrying and no
// notification is pending, for at least a few seconds; or until nothing
// has moved (no run ended, no notification was delivered) for stall:
// what is left is then checked as it is.
func (c *cluster) settle(ctx context.Context, st store.Store, stall time.Duration) error {
	start := time.Now()
	const least = 10 * time.Second
	var lastLog, moved time.Time
	// The fewest runs active so far, and the deliveries taken: a run
	// ending or a delivery is a move.
	fewest, delivered := int64(-1), -1
	for {
		counts, err := st.RunsCount(ctx)
		if err != nil {
			return err
		}
		active := counts[jobs.StatusPending] + counts[jobs.StatusRunning] + counts[jobs.StatusRetrying]
		pending, err := st.NotificationsList(ctx, store.NotificationFilter{State: store.NotificationPending, Limit: 10000})
		if err != nil {
			return err
		}
		taken := len(c.receiver.taken())
		if fewest < 0 || active < fewest || taken > delivered {
			moved = time.Now()
		}
		if fewest < 0 || active < fewest {
			fewest = active
		}
		delivered = max(delivered, taken)
		waited := time.Since(start)
		if active == 0 && len(pending) == 0 && waited >= least {
			c.logf("settled in %s", waited.Round(time.Second))
			return nil
		}
		if time.Since(moved) > stall {
			c.logf("nothing moved for %s: %d runs active, %d notifications pending; checking as it is", stall, active, len(pending))
			return nil
		}
		if time.Since(lastLog) > 30*time.Second {
			c.logf("settling: %d runs active, %d notifications pending", active, len(pending))
			lastLog = time.Now()
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
}

// statuses are every run status, for listings by status.
var statuses = []jobs.Status{jobs.StatusPending, jobs.StatusRunning, jobs.StatusRetrying, jobs.StatusCompleted,
	jobs.StatusCancelled, jobs.StatusDeadLetter}

// listLimit is the most a listing of the store returns.
const listLimit = 10000

// collect reads the runs, attempts, cursors and notifications of the
// store into h.
func collect(ctx context.Context, st store.Store, h *History) error {
	var names, cron []string
	for _, j := range h.Jobs {
		names = append(names, j.Name)
		if j.Schedule != "" {
			cron = append(cron, j.Name)
		}
	}
	for _, name := range names {
		for _, s := range statuses {
			rs, err := st.RunsList(ctx, store.RunFilter{Job: name, Status: s, Limit: listLimit})
			if err != nil {
				return err
			}
			if len(rs) >= listLimit {
				return fmt.Errorf("job %s has %d runs %s or more, more than the checker reads: run for less time", name, listLimit, s)
			}
			for _, r := range rs {
				h.Runs = append(h.Runs, runOf(r))
				as, err := st.RunAttempts(ctx, r.ID)
				if err != nil {
					return err
				}
				for _, a := range as {
					h.Attempts = append(h.Attempts, Attempt{RunID: a.RunID, Number: a.Number, Node: a.Node, Incarnation: a.Incarnation,
						StartedAt: a.StartedAt, FinishedAt: timePtr(a.FinishedAt), Status: string(a.Status), Reason: string(a.Reason)})
				}
			}
		}
	}
	cursors, err := st.ScheduleCursors(ctx, cron)
	if err != nil {
		return err
	}
	for _, name := range cron {
		if cu := cursors[name]; cu != nil {
			h.Cursors = append(h.Cursors, Cursor{Job: name, Last: cu.Last, Paused: cu.Paused, Skipped: cu.Skipped})
		}
	}
	notes, err := st.NotificationsList(ctx, store.NotificationFilter{Limit: listLimit})
	if err != nil {
		return err
	}
	if len(notes) >= listLimit {
		return fmt.Errorf("%d notifications or more, more than the checker reads: run for less time", listLimit)
	}
	for _, n := range notes {
		h.Notifications = append(h.Notifications, Notification{ID: n.ID, Job: n.Job, Event: string(n.Event), RunID: n.RunID,
			State: string(n.State), Attempts: n.Attempts, LastError: n.LastError, CreatedAt: n.CreatedAt})
	}
	return nil
}

func runOf(r *jobs.Run) Run {
	return Run{ID: r.ID, Job: r.Job, Status: string(r.Status), Trigger: string(r.Trigger), ScheduledAt: r.ScheduledAt,
		NotBefore: r.NotBefore, NotAfter: timePtr(r.NotAfter), CreatedAt: r.CreatedAt, FinishedAt: timePtr(r.FinishedAt),
		Attempt: r.Attempt, Reason: string(r.Reason), DedupID: r.DedupID}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// readWitness reads the lines the jobs wrote, pairing each end with its
// start.
func readWitness(path string) ([]Exec, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseWitness(f)
}

// parseWitness reads witness lines: "start TIME PID JOB RUN ATTEMPT NODE
// TICK" and "end TIME PID JOB RUN ATTEMPT NODE CODE".
func parseWitness(r io.Reader) ([]Exec, error) {
	var out []Exec
	open := map[string]int{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		fs := strings.Fields(sc.Text())
		if len(fs) != 8 && !(len(fs) == 7 && fs[0] == "start") {
			return nil, fmt.Errorf("witness line %d: %q", n, sc.Text())
		}
		at, err := epoch(fs[1])
		if err != nil {
			return nil, fmt.Errorf("witness line %d: %w", n, err)
		}
		pid, err1 := strconv.Atoi(fs[2])
		attempt, err2 := strconv.Atoi(fs[5])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("witness line %d: %w", n, err)
		}
		key := strings.Join([]string{fs[2], fs[4], fs[5], fs[6]}, " ")
		switch fs[0] {
		case "start":
			e := Exec{Job: fs[3], RunID: fs[4], Attempt: attempt, Node: fs[6], PID: pid, Start: at}
			if len(fs) == 8 {
				e.Tick = fs[7]
			}
			open[key] = len(out)
			out = append(out, e)
		case "end":
			code, err := strconv.Atoi(fs[7])
			if err != nil {
				return nil, fmt.Errorf("witness line %d: %w", n, err)
			}
			i, ok := open[key]
			if !ok {
				// Stopped between setting its trap and writing its
				// start (a timeout of a process slow to start, on a
				// loaded machine): it ran at least at its end.
				out = append(out, Exec{Job: fs[3], RunID: fs[4], Attempt: attempt, Node: fs[6], PID: pid, Start: at, NoStart: true})
				i = len(out) - 1
			}
			delete(open, key)
			out[i].End, out[i].Code = &at, &code
		default:
			return nil, fmt.Errorf("witness line %d: %q", n, sc.Text())
		}
	}
	return out, sc.Err()
}

// epoch parses bash's $EPOCHREALTIME: seconds and microseconds.
func epoch(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	var us int64
	if frac != "" {
		frac = (frac + "000000")[:6]
		if us, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("time %q: %w", s, err)
		}
	}
	return time.Unix(secs, us*1000), nil
}

// admin runs one statement on the server of dsn.
func admin(ctx context.Context, dsn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
