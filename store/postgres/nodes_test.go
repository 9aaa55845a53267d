package postgres

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/schedulerd/schedulerd/store"
)

// TestNodeRegisterReleasesTheJobList: once a node with 100,000 jobs is
// registered (a first registration, then a restart's over a row without
// jobs), the store's connection does not keep the encoded list: 1.7 MiB,
// which pgx kept until a later statement of the connection put as many
// arguments in their places.
func TestNodeRegisterReleasesTheJobList(t *testing.T) {
	s, _ := openTest(t)
	names := make([]string, 100_000)
	for i := range names {
		names[i] = fmt.Sprintf("job-%06d", i)
	}
	for _, p := range []store.NodeRegisterParams{
		{ID: "node-a", Incarnation: "inc-1", Host: "h", PID: 1, Jobs: names, Now: t0},
		{ID: "node-b", Incarnation: "inc-1", Host: "h", PID: 1, Now: t0},
		{ID: "node-b", Incarnation: "inc-2", Replace: "inc-1", Host: "h", PID: 2, Jobs: names, Now: t0},
	} {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		if _, err := s.NodeRegister(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if kept := int64(ms.HeapAlloc) - int64(before); kept > 256<<10 {
			t.Errorf("register %s %s (replacing %q): the heap holds %d KiB more than before", p.ID, p.Incarnation, p.Replace, kept>>10)
		}
	}
	runtime.KeepAlive(names)
	nodes, err := s.NodesList(t.Context(), true)
	if err != nil || len(nodes) != 2 || len(nodes[0].Jobs) != len(names) || len(nodes[1].Jobs) != len(names) || nodes[1].Incarnation != "inc-2" {
		t.Fatalf("nodes: %v %v", len(nodes), err)
	}
}
