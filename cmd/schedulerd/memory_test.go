package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"weak"
)

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{4 << 20, 100},  // a small daemon keeps the default
		{16 << 20, 100}, // headroom equal to the live heap
		{32 << 20, 50},
		{62 << 20, 25}, // 100,000 jobs: 16 MiB would be 25.8%
		{1 << 30, 25},  // never below 25%
	} {
		if got := gcPercent(tc.live); got != tc.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestReloadFreesTheStartJobs: once a reload has put new jobs in force,
// the jobs of the config the daemon started with can be collected; the
// daemon keeps that config for its [daemon] settings only.
func TestReloadFreesTheStartJobs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "schedulerd.toml")
	cfg := fmt.Sprintf("[daemon]\nstate_dir = %q\n\n[[job]]\nname = \"backup\"\nschedule = \"0 3 * * *\"\ncommand = [\"/bin/true\"]\n",
		filepath.Join(dir, "state"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := configure(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if n.st, err = openStore(ctx, n.cfg.Daemon, true, n.logger); err != nil {
		t.Fatal(err)
	}
	defer n.st.Close()
	if err := n.newEngine(); err != nil {
		t.Fatal(err)
	}
	// The definitions of a config are one allocation (config.compact).
	first := weak.Make(n.sched.Jobs()[0])
	if err := reload(ctx, n.logger, path, n.cfg, n.sched, nil, n.deliverer); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		runtime.GC()
	}
	if first.Value() != nil {
		t.Fatal("the start config's jobs are still reachable after a reload")
	}
	if d, ok := n.sched.Job("backup"); !ok || d.Schedule.String() != "0 3 * * *" {
		t.Fatalf("after the reload: %v %v", d, ok)
	}
}
