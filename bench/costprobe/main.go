// Command costprobe is one node's burn-down for the benchmark's cost per
// run (bench/cost.go): it inserts a backlog of no-op runs, waits for the
// word, burns the backlog down with one in-process node and prints what
// the burn-down cost this process, as JSON.
//
// The benchmark builds it from this tree and from an older commit's tree
// (the file is copied there), so it uses only the API that both have:
// store.RunInsertParams, the stores' Open and Statements, scheduler.New,
// Start, Stop and Metrics.
//
// Protocol, one line each: the probe prints {"ready":true} once the backlog
// is inserted; reads a line from its standard input; burns down; prints
// its result.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/scheduler"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/postgres"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

// result is what the probe prints at the end; the counters are the
// burn-down's (from the word to the node's stop).
type result struct {
	Completed    int64   `json:"completed"`
	Seconds      float64 `json:"seconds"`       // from Start to the last completion
	CPUSeconds   float64 `json:"cpu_seconds"`   // user+system of this process
	AllocObjects uint64  `json:"alloc_objects"` // runtime/metrics /gc/heap/allocs:objects
	AllocBytes   uint64  `json:"alloc_bytes"`   // runtime/metrics /gc/heap/allocs:bytes
	Statements   int64   `json:"statements"`    // the store's counter, -1 when it has none
	WriteBytes   int64   `json:"write_bytes"`   // /proc/self/io wchar
	Capped       bool    `json:"capped"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "costprobe:", err)
		os.Exit(1)
	}
}

func run() error {
	kind := flag.String("store", "sqlite", "sqlite or postgres")
	dsn := flag.String("dsn", "", "PostgreSQL DSN")
	path := flag.String("path", "", "SQLite file")
	runs := flag.Int("runs", 10_000, "runs in the backlog")
	concurrency := flag.Int("concurrency", 2000, "the node's concurrency")
	limit := flag.Duration("limit", time.Minute, "cap on the burn-down")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the burn-down to this file")
	flag.Parse()

	ctx := context.Background()
	var (
		st  store.Store
		err error
	)
	if *kind == "postgres" {
		st, err = postgres.Open(ctx, postgres.Options{DSN: *dsn})
	} else {
		st, err = sqlite.Open(ctx, sqlite.Options{Path: *path, Lock: true})
	}
	if err != nil {
		return err
	}
	defer st.Close()

	d := &jobs.Definition{Name: "noop", Handler: func(context.Context) error { return nil }}
	d.WithDefaults()
	now := time.Now()
	for done := 0; done < *runs; {
		k := min(5000, *runs-done)
		ps := make([]store.RunInsertParams, k)
		for i := range ps {
			ps[i] = store.RunInsertParams{Job: d.Name, Trigger: jobs.TriggerManual, NotBefore: now,
				Retry: d.Retry, NoRetryExitCodes: d.NoRetryExitCodes, Node: "bench"}
		}
		if err := insertMany(ctx, st, ps); err != nil {
			return fmt.Errorf("insert runs: %w", err)
		}
		done += k
	}
	fmt.Println(`{"ready":true}`)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("wait for the word: %w", err)
	}

	cfg := scheduler.Config{NodeID: "node-1", Concurrency: *concurrency,
		StoreClock: *kind == "postgres", ExclusiveStore: *kind == "sqlite",
		Logger: slog.New(slog.DiscardHandler)}
	s, err := scheduler.New(st, cfg, []*jobs.Definition{d})
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	objs0, bytes0 := allocs()
	cpu0, wb0, stm0 := cpuSeconds(), writeBytes(), statements(st)
	start := time.Now()
	if err := s.Start(ctx); err != nil {
		return err
	}
	var r result
	tick := time.NewTicker(5 * time.Millisecond)
	for range tick.C {
		if s.Metrics().Results[jobs.StatusCompleted] >= int64(*runs) {
			break
		}
		if time.Since(start) >= *limit {
			r.Capped = true
			break
		}
	}
	tick.Stop()
	r.Seconds = time.Since(start).Seconds()
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	s.Stop(stopCtx)
	cancel()
	r.Completed = s.Metrics().Results[jobs.StatusCompleted]
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	objs1, bytes1 := allocs()
	r.AllocObjects, r.AllocBytes = objs1-objs0, bytes1-bytes0
	r.CPUSeconds = cpuSeconds() - cpu0
	r.WriteBytes = writeBytes() - wb0
	if r.Statements = statements(st); r.Statements >= 0 && stm0 >= 0 {
		r.Statements -= stm0
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// insertMany inserts runs in one transaction, by the name the store's
// method has in the tree (RunsInsert before it was RunInsertMany).
func insertMany(ctx context.Context, st store.Store, ps []store.RunInsertParams) error {
	switch s := any(st).(type) {
	case interface {
		RunInsertMany(context.Context, []store.RunInsertParams) ([]*jobs.Run, error)
	}:
		_, err := s.RunInsertMany(ctx, ps)
		return err
	case interface {
		RunsInsert(context.Context, []store.RunInsertParams) ([]*jobs.Run, error)
	}:
		_, err := s.RunsInsert(ctx, ps)
		return err
	}
	return fmt.Errorf("the store has neither RunInsertMany nor RunsInsert")
}

// allocs returns the heap allocations of this process so far.
func allocs() (objects, bytes uint64) {
	ss := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(ss)
	return ss[0].Value.Uint64(), ss[1].Value.Uint64()
}

// cpuSeconds is the user and system time of this process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// writeBytes is the bytes this process passed to write system calls
// (wchar of /proc/self/io), or 0.
func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// statements is the store's statement counter, or -1.
func statements(st store.Store) int64 {
	if c, ok := st.(interface{ Statements() int64 }); ok {
		return c.Statements()
	}
	return -1
}
