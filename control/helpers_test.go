package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// testIncarnation is the incarnation the fake engine fences progress with.
const testIncarnation = "test-incarnation"

// fakeEngine stands in for the scheduler, over a real store. It records
// the state-changing calls it gets.
type fakeEngine struct {
	st store.Store

	mu        sync.Mutex
	calls     []string
	reloadErr error
	unhealthy bool
	// lives are the outputs of the attempts "running on this node", by
	// run id.
	lives map[string]*fakeLive
}

// Declared jobs of the fake engine: backup has a schedule, adhoc does not.
var fakeJobs = []JobInfo{
	{Name: "backup", Kind: "cron", Schedule: "0 3 * * *", Timezone: "UTC"},
	{Name: "adhoc", Kind: "trigger"},
}

func (e *fakeEngine) record(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, fmt.Sprintf(format, args...))
}

// Calls returns the state-changing calls so far.
func (e *fakeEngine) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

func (e *fakeEngine) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = nil
}

func known(job string) bool {
	return slices.ContainsFunc(fakeJobs, func(j JobInfo) bool { return j.Name == job })
}

func (e *fakeEngine) Trigger(ctx context.Context, job string, p TriggerParams) (*jobs.Run, error) {
	e.record("trigger %s", job)
	if !known(job) {
		return nil, Mark(fmt.Errorf("unknown job %q", job), ErrUnknownJob)
	}
	now := time.Now()
	if !p.NotAfter.IsZero() && !p.NotAfter.After(now) {
		return nil, Mark(errors.New("not_after has passed"), ErrInvalidWindow)
	}
	return e.st.RunInsert(ctx, store.RunInsertParams{
		Job: job, Trigger: jobs.TriggerManual, ScheduledAt: now, NotBefore: p.NotBefore, NotAfter: p.NotAfter,
		Retry: jobs.RetryPolicy{MaxAttempts: 3}, DedupID: p.DedupID, Payload: p.Payload, Node: "test-node",
		Actor: callerActor(ctx),
	})
}

// callerActor is the actor of the request of ctx, as the daemon's engine
// passes it to the store.
func callerActor(ctx context.Context) string {
	c, _ := CallerFrom(ctx)
	return c.Actor()
}

func (e *fakeEngine) Cancel(ctx context.Context, id string) (*jobs.Run, error) {
	e.record("cancel %s", id)
	return e.st.RunCancel(ctx, store.RunCancelParams{ID: id, Node: "test-node", Actor: callerActor(ctx), Reason: jobs.ReasonCancelled})
}

func (e *fakeEngine) Rerun(ctx context.Context, id string) (*jobs.Run, error) {
	e.record("rerun %s", id)
	old, err := e.st.RunGet(ctx, id)
	if err != nil {
		return nil, err
	}
	return e.st.RunInsert(ctx, store.RunInsertParams{
		Job: old.Job, Trigger: jobs.TriggerRerun, Retry: jobs.RetryPolicy{MaxAttempts: 3}, RerunOf: old.ID, Node: "test-node",
		Actor: callerActor(ctx),
	})
}

func (e *fakeEngine) pause(job string) error {
	switch {
	case !known(job):
		return Mark(fmt.Errorf("unknown job %q", job), ErrUnknownJob)
	case job == "adhoc":
		return Mark(errors.New("job \"adhoc\" has no schedule"), ErrNoSchedule)
	}
	return nil
}

func (e *fakeEngine) Pause(ctx context.Context, job string) error {
	e.record("pause %s", job)
	return e.pause(job)
}

func (e *fakeEngine) Resume(ctx context.Context, job string) error {
	e.record("resume %s", job)
	return e.pause(job)
}

// Forget forgets the job "retired", which the fake cluster expects and
// the fake node does not declare.
func (e *fakeEngine) Forget(ctx context.Context, job string) error {
	e.record("forget %s", job)
	switch {
	case known(job):
		return Mark(fmt.Errorf("job %q is declared in this node's config", job), ErrJobDeclared)
	case job != "retired":
		return Mark(fmt.Errorf("no expectation of job %q", job), ErrNotExpected)
	}
	return nil
}

// Backfill refuses what the daemon's engine refuses for its fake jobs,
// and otherwise answers a dry run of one tick, which has no run.
func (e *fakeEngine) Backfill(ctx context.Context, job string, p BackfillParams) (*BackfillReply, error) {
	e.record("backfill %s %s %s", job, p.From, p.To)
	switch {
	case !known(job):
		return nil, Mark(fmt.Errorf("unknown job %q", job), ErrUnknownJob)
	case job == "adhoc":
		return nil, Mark(errors.New("job \"adhoc\" has no schedule"), ErrNoSchedule)
	}
	from, err := time.Parse(time.RFC3339, p.From)
	if err != nil {
		return nil, Mark(fmt.Errorf("from: %w", err), ErrBadRequest)
	}
	return &BackfillReply{Job: job, From: from, To: from, TimeZone: "UTC", Ticks: 1, DryRun: true,
		List: []BackfillTick{{At: from}}}, nil
}

func (e *fakeEngine) Jobs(ctx context.Context) ([]JobInfo, error) { return slices.Clone(fakeJobs), nil }

func (e *fakeEngine) Health(ctx context.Context) Health {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unhealthy {
		return Health{Node: "test-node", Problems: []string{"heartbeat is stale: last success 3m0s ago"}}
	}
	return Health{OK: true, Node: "test-node", Incarnation: testIncarnation}
}

func (e *fakeEngine) Progress(ctx context.Context, runID string, attempt, percent int, message string) error {
	e.record("progress %s %d %d", runID, attempt, percent)
	return e.st.RunProgress(ctx, jobs.Fence{RunID: runID, Attempt: attempt, Incarnation: testIncarnation}, percent, message)
}

// fakeAttemptToken is the token the fake engine takes for an attempt.
func fakeAttemptToken(runID string, attempt int) string {
	return fmt.Sprintf("token-%s-%d", runID, attempt)
}

func (e *fakeEngine) CheckAttemptToken(runID string, attempt int, token string) bool {
	return token == fakeAttemptToken(runID, attempt)
}

func (e *fakeEngine) Reload(ctx context.Context) error {
	e.record("reload")
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reloadErr
}

func (e *fakeEngine) LiveOutput(runID string) (LiveOutput, int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.lives[runID]
	if l == nil {
		return nil, 0, false
	}
	return l, l.attempt, true
}

func (e *fakeEngine) NodeID() string { return "test-node" }

// setLive makes l the output of attempt of run id running on this node;
// nil: none runs here.
func (e *fakeEngine) setLive(id string, l *fakeLive) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lives == nil {
		e.lives = map[string]*fakeLive{}
	}
	if l == nil {
		delete(e.lives, id)
		return
	}
	e.lives[id] = l
}

// fakeLive is the output of a running attempt that the test writes, kept
// whole.
type fakeLive struct {
	attempt int
	mu      sync.Mutex
	data    []byte
	done    bool
	changed chan struct{}
	waiting int
}

func newFakeLive(attempt int) *fakeLive {
	return &fakeLive{attempt: attempt, changed: make(chan struct{})}
}

func (l *fakeLive) write(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, p...)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *fakeLive) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	close(l.changed)
	l.changed = make(chan struct{})
}

// followers is how many calls of Next wait for output.
func (l *fakeLive) followers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

func (l *fakeLive) Next(ctx context.Context, from int64) ([]byte, int64, bool, error) {
	for {
		l.mu.Lock()
		data := slices.Clone(l.data[min(from, int64(len(l.data))):])
		next, done, changed := int64(len(l.data)), l.done, l.changed
		if len(data) > 0 || done {
			l.mu.Unlock()
			return data, next, done, nil
		}
		l.waiting++
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-changed:
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
		if ctx.Err() != nil {
			return nil, from, false, ctx.Err()
		}
	}
}

// openStore opens a real SQLite store in a temporary directory.
func openStore(tb testing.TB) store.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(tb.TempDir(), "schedulerd.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the log records whose message contains msg.
func (b *logBuffer) records(msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(b.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.Contains(fmt.Sprint(m["msg"]), msg) {
			out = append(out, m)
		}
	}
	return out
}

// socketDir returns a fresh directory for sockets, short enough for a unix
// socket path, searchable by everyone so that tests can connect as another
// user when they open the socket's own directory up.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testServer is a server on a real socket with a fake engine and a real store.
type testServer struct {
	*Server
	eng  *fakeEngine
	st   store.Store
	logs *logBuffer
	c    *Client
}

// startServer listens on <socketDir>/run/s.sock; mod adjusts the config.
func startServer(t *testing.T, mod func(*ServerConfig)) *testServer {
	t.Helper()
	st := openStore(t)
	ts := &testServer{eng: &fakeEngine{st: st}, st: st, logs: &logBuffer{}}
	cfg := ServerConfig{
		Path:   filepath.Join(socketDir(t), "run", "s.sock"),
		Logger: slog.New(slog.NewJSONHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Engine: ts.eng,
		Store:  st,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ts.Server = s
	ts.c = NewClient(cfg.Path)
	t.Cleanup(ts.c.Close)
	return ts
}

// insertRun makes a pending run of job in the store.
func insertRun(t *testing.T, st store.Store, job, dedup string) *jobs.Run {
	t.Helper()
	r, err := st.RunInsert(context.Background(), store.RunInsertParams{
		Job: job, Trigger: jobs.TriggerManual, Retry: jobs.RetryPolicy{MaxAttempts: 2}, DedupID: dedup, Node: "test-node",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// claim starts the due runs of job as testIncarnation.
func claim(t *testing.T, st store.Store, job string) []*jobs.Run {
	t.Helper()
	rs, err := st.RunsClaim(context.Background(), store.ClaimParams{
		Node: "test-node", Incarnation: testIncarnation, Jobs: store.NewJobLimits(map[string]int{job: 0}), Limit: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// waitUntil polls cond every 10ms until it holds, failing the test after
// timeout: a wait on a state, generous enough for a busy machine, instead
// of a sleep that guesses how long the state takes.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setUnhealthy makes the fake engine report a problem, or none.
func (e *fakeEngine) setUnhealthy(v bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unhealthy = v
}
