package sqlite

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/store"
)

// TestNodeJobsInParts: a node's job list of 100,000 names is kept in
// parts of at most nodeJobsPart bytes, and read back whole and in order,
// names that JSON escapes and a name longer than a part included; a new
// registration replaces the list, and deleting the node deletes it.
func TestNodeJobsInParts(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "schedulerd.db"), false)
	defer s.Close()
	ctx := t.Context()
	names := make([]string, 100_000)
	for i := range names {
		names[i] = fmt.Sprintf("job-%06d", i)
	}
	names[7], names[99_998] = `quote " and \ <tag> é`, strings.Repeat("x", 2*nodeJobsPart)
	if _, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "a", Incarnation: "a-1", Jobs: names}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "b", Incarnation: "b-1", Jobs: []string{"other"}}); err != nil {
		t.Fatal(err)
	}
	var parts, longest int
	err := s.reader.QueryRow(`SELECT COUNT(*), MAX(length(CAST(jobs_json AS BLOB))) FROM node_jobs
		WHERE node_id = 'a' AND part <> (SELECT part FROM node_jobs WHERE jobs_json LIKE '["xxx%')`).Scan(&parts, &longest)
	if err != nil || parts < 2 || longest > nodeJobsPart {
		t.Fatalf("the list of a: %d parts besides the long name's, the longest %d bytes (at most %d), %v", parts, longest, nodeJobsPart, err)
	}
	nodes, err := s.NodesList(ctx, true)
	if err != nil || len(nodes) != 2 || !slices.Equal(nodes[0].Jobs, names) || !slices.Equal(nodes[1].Jobs, []string{"other"}) {
		t.Fatalf("NodesList: %d nodes, %v; a's list equal: %v", len(nodes), err, len(nodes) == 2 && slices.Equal(nodes[0].Jobs, names))
	}
	prev, err := s.NodeRegister(ctx, store.NodeRegisterParams{ID: "a", Incarnation: "a-2", Replace: "a-1", Jobs: []string{"one"}})
	if err != nil || prev == nil || !slices.Equal(prev.Jobs, names) {
		t.Fatalf("re-register: the replaced row's list equal: %v, %v", prev != nil && slices.Equal(prev.Jobs, names), err)
	}
	if nodes, err = s.NodesList(ctx, true); err != nil || !slices.Equal(nodes[0].Jobs, []string{"one"}) {
		t.Fatalf("after re-register: %v %v", nodes[0].Jobs, err)
	}
	if nodes, err = s.NodesList(ctx, false); err != nil || len(nodes) != 2 || len(nodes[0].Jobs) != 0 || nodes[0].Jobs == nil {
		t.Fatalf("without jobs: %d nodes, %v, %v", len(nodes), nodes[0].Jobs, err)
	}
	if err := s.NodeDelete(ctx, store.NodeDeleteParams{ID: "a", Incarnation: "a-2"}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.reader.QueryRow(`SELECT COUNT(*) FROM node_jobs WHERE node_id = 'a'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("parts of a deleted node: %d, %v", left, err)
	}
}
