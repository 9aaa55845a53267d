package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/jobs/schedule"
	"github.com/schedulerd/schedulerd/scheduler/schedulertest"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// t0 is the start of every test's fake time: a Monday, 12:00:00 UTC.
var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// harness runs one Scheduler on a real SQLite file with a fake clock. Each
// loop iteration blocks until the test reads loopDone, so the test decides
// when the engine moves.
type harness struct {
	t      *testing.T
	path   string
	clock  *schedulertest.FakeClock
	st     store.Store
	s      *Scheduler
	cfg    Config
	calls  *calls
	closed bool
	iters  *iterTracker
	beats  *iterTracker
	// results receives a value, coalesced, each time the results loop has
	// recorded what the store's feed brought.
	results chan struct{}
	// wrap, when set, wraps the store the scheduler uses (fault injection).
	wrap func(store.Store) store.Store
	// logged keeps what the engine logged, across restarts.
	logged *logLines
	// gate, when set, holds each loop iteration after it has signalled
	// its end until the channel is closed: wakeups meanwhile stay in
	// Scheduler.wake, where the test can see them.
	gate atomic.Pointer[chan struct{}]
}

// iterTracker records the newest finished loop iteration, or heartbeat
// round (what names which).
type iterTracker struct {
	what string
	mu   sync.Mutex
	last int64
	ch   chan struct{} // closed and replaced at every finished iteration
}

func newIterTracker(what string) *iterTracker {
	return &iterTracker{what: what, ch: make(chan struct{})}
}

func (tr *iterTracker) done(seq int64) {
	tr.mu.Lock()
	tr.last = max(tr.last, seq)
	close(tr.ch)
	tr.ch = make(chan struct{})
	tr.mu.Unlock()
}

// signalWait bounds a test's wait for a signal of the engine (a loop
// iteration, a heartbeat round, an attempt's start or end): only an engine
// that never sends it uses it up. A heartbeat round on a machine whose
// cores are busy with other work took more than 10 s (SQLite's
// busy_timeout is 10 s).
const signalWait = time.Minute

// waitAfter waits until an iteration numbered above seq has finished.
func (tr *iterTracker) waitAfter(t *testing.T, seq int64) {
	t.Helper()
	timeout := time.After(signalWait)
	for {
		tr.mu.Lock()
		last, ch := tr.last, tr.ch
		tr.mu.Unlock()
		if last > seq {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no %s after #%d (last finished #%d)", tr.what, seq, last)
		}
	}
}

// calls records handler invocations.
type calls struct {
	mu   sync.Mutex
	list []jobs.Info
	at   []time.Time
	ch   chan jobs.Info
}

func newCalls() *calls { return &calls{ch: make(chan jobs.Info, 10000)} }

func (c *calls) record(ctx context.Context, clock Clock) jobs.Info {
	info, _ := jobs.InfoFrom(ctx)
	c.mu.Lock()
	c.list = append(c.list, info)
	c.at = append(c.at, clock.Now())
	c.mu.Unlock()
	c.ch <- info
	return info
}

func (c *calls) snapshot() ([]jobs.Info, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]jobs.Info(nil), c.list...), append([]time.Time(nil), c.at...)
}

func mustSchedule(t testing.TB, spec string) jobs.Schedule {
	t.Helper()
	s, err := schedule.Parse(spec, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// job returns a definition with product defaults and fast, deterministic retries.
func job(name string, h jobs.Handler, mod ...func(*jobs.Definition)) *jobs.Definition {
	d := &jobs.Definition{Name: name, Handler: h,
		Retry: jobs.RetryPolicy{MaxAttempts: 3, Backoff: jobs.BackoffFixed, InitialDelay: 10 * time.Second}}
	for _, m := range mod {
		m(d)
	}
	d.WithDefaults()
	return d
}

func newHarness(t *testing.T, defs func(h *harness) []*jobs.Definition) *harness {
	t.Helper()
	return newHarnessWith(t, nil, defs)
}

// newHarnessWith lets setup change the harness before the first start.
func newHarnessWith(t *testing.T, setup func(h *harness), defs func(h *harness) []*jobs.Definition) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "schedulerd.db"), clock: schedulertest.NewFakeClock(t0), calls: newCalls(), logged: &logLines{}}
	h.cfg = Config{NodeID: "node-a", Concurrency: 4, PollInterval: time.Minute, HeartbeatInterval: 30 * time.Second,
		ShutdownGrace: 30 * time.Second, Rand: func() float64 { return 1 }}
	if setup != nil {
		setup(h)
	}
	h.start(defs(h))
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start(defs []*jobs.Definition) {
	h.t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: h.path, Lock: true})
	if err != nil {
		h.t.Fatal(err)
	}
	h.st = st
	cfg := h.cfg
	cfg.Clock = h.clock
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{h.t, h.logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var use store.Store = st
	if h.wrap != nil {
		use = h.wrap(st)
	}
	s, err := New(use, cfg, defs)
	if err != nil {
		h.t.Fatal(err)
	}
	h.iters = newIterTracker("scheduling loop iteration")
	s.testSignals.iterDone = func(seq int64) {
		h.iters.done(seq)
		if g := h.gate.Load(); g != nil {
			<-*g
		}
	}
	h.beats = newIterTracker("heartbeat round")
	s.testSignals.hbDone = h.beats.done
	s.testSignals.attemptDone = make(chan int64, 10000)
	results := make(chan struct{}, 1)
	h.results = results
	s.testSignals.resultsDone = func() {
		select {
		case results <- struct{}{}:
		default:
		}
	}
	h.s = s
	h.closed = false
	if err := s.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.iters.waitAfter(h.t, 0) // the first iteration
}

// heartbeatAt moves the clock to t, which must be a heartbeat time, and
// waits for that heartbeat round to finish.
func (h *harness) heartbeatAt(t time.Time) {
	h.t.Helper()
	seq := h.s.testSignals.hbSeq.Load()
	h.clock.Set(t)
	h.beats.waitAfter(h.t, seq)
}

// stop shuts the scheduler down, letting the fake clock pass the shutdown
// grace, and closes the store.
func (h *harness) stop() {
	if h.closed {
		return
	}
	h.closed = true
	done := make(chan struct{})
	go func() {
		h.s.Stop(context.Background())
		close(done)
	}()
	for {
		select {
		case <-done:
			if err := h.st.Close(); err != nil {
				h.t.Error(err)
			}
			return
		case <-time.After(20 * time.Millisecond):
			// Attempts still run: let the fake clock pass the grace so
			// Stop stops them. With none running, time stays put.
			if h.s.Running() > 0 {
				h.clock.Advance(h.cfg.ShutdownGrace)
			}
		}
	}
}

// loop wakes the scheduling loop and waits until an iteration that started
// after the call has finished.
func (h *harness) loop() {
	h.t.Helper()
	seq := h.s.testSignals.iterSeq.Load()
	h.s.Wake()
	h.iters.waitAfter(h.t, seq)
}

// advanceTo moves the clock to t and waits for an iteration at that time:
// one numbered after the clock moved. An iteration counts itself when it
// starts, before it reads the clock, so one that started between a count
// read before the move and the move itself would see the old time.
func (h *harness) advanceTo(t time.Time) {
	h.t.Helper()
	h.clock.Set(t)
	seq := h.s.testSignals.iterSeq.Load()
	h.s.Wake()
	h.iters.waitAfter(h.t, seq)
}

// attemptDone waits for n attempts to finish and their results to be written.
func (h *harness) attemptsDone(n int) {
	h.t.Helper()
	var seq int64
	for i := 0; i < n; i++ {
		select {
		case s := <-h.s.testSignals.attemptDone:
			seq = max(seq, s)
		case <-time.After(signalWait):
			h.t.Fatalf("attempt %d of %d did not finish", i+1, n)
		}
	}
	h.iters.waitAfter(h.t, seq) // the iteration the last finished attempt woke
}

// resultsUntil waits, each time the results loop has recorded a batch,
// until cond holds.
func (h *harness) resultsUntil(what string, cond func() bool) {
	h.t.Helper()
	timeout := time.After(signalWait)
	for !cond() {
		select {
		case <-h.results:
		case <-timeout:
			h.t.Fatalf("%s: not after the results the store's feed brought", what)
		}
	}
}

// handled waits for n handler calls.
func (h *harness) handled(n int) []jobs.Info {
	h.t.Helper()
	var out []jobs.Info
	for i := 0; i < n; i++ {
		select {
		case info := <-h.calls.ch:
			out = append(out, info)
		case <-time.After(signalWait):
			h.t.Fatalf("handler call %d of %d did not happen", i+1, n)
		}
	}
	return out
}

func (h *harness) runs(job string) []*jobs.Run {
	h.t.Helper()
	rs, err := h.st.RunsList(context.Background(), store.RunFilter{Job: job, Limit: 10000})
	if err != nil {
		h.t.Fatal(err)
	}
	// oldest first
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs
}

// cursor reads a cron job's cursor from the store.
func (h *harness) cursor(job string) *store.Cursor {
	h.t.Helper()
	cs, err := h.st.ScheduleCursors(context.Background(), []string{job})
	if err != nil {
		h.t.Fatal(err)
	}
	if cs[job] == nil {
		h.t.Fatalf("job %s has no cursor", job)
	}
	return cs[job]
}

func (h *harness) run(id string) *jobs.Run {
	h.t.Helper()
	if h.closed { // after stop: read the file directly
		st, err := sqliteOpen(h.path)
		if err != nil {
			h.t.Fatal(err)
		}
		defer st.Close()
		r, err := st.RunGet(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		return r
	}
	r, err := h.st.RunGet(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) events(id string) []*jobs.Event {
	h.t.Helper()
	ev, err := h.st.RunEvents(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

// succeed is a handler that records its call and returns nil.
func (h *harness) succeed(ctx context.Context) error {
	h.calls.record(ctx, h.clock)
	return nil
}

// fail is a handler that records its call and fails.
func (h *harness) fail(ctx context.Context) error {
	info := h.calls.record(ctx, h.clock)
	return fmt.Errorf("attempt %d failed", info.Attempt)
}

// blockUntil returns a handler that records its call and returns when
// release is closed or ctx is done.
func (h *harness) blockUntil(release <-chan struct{}) jobs.Handler {
	return func(ctx context.Context) error {
		h.calls.record(ctx, h.clock)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// testWriter writes the engine's log to the test's, and keeps it in keep
// when set.
type testWriter struct {
	t    *testing.T
	keep *logLines
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	if w.keep != nil {
		w.keep.mu.Lock()
		w.keep.lines = append(w.keep.lines, string(p[:len(p)-1]))
		w.keep.mu.Unlock()
	}
	return len(p), nil
}

// logLines is what an engine logged, a line each.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

// with returns the lines that hold every one of parts.
func (l *logLines) with(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

func ticksOf(runs []*jobs.Run) []time.Time {
	var out []time.Time
	for _, r := range runs {
		out = append(out, r.ScheduledAt)
	}
	return out
}

func statusOf(runs []*jobs.Run) []jobs.Status {
	var out []jobs.Status
	for _, r := range runs {
		out = append(out, r.Status)
	}
	return out
}
