package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestNodeErrors: the refusals of node writes are types that callers reach
// with errors.As through the prefixes that stores and callers add, that
// still answer errors.Is for their sentinel, and whose text names the row
// that was found.
func TestNodeErrors(t *testing.T) {
	hb := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	tests := []struct {
		name   string
		err    error
		target error
		want   string
	}{
		{"held", &NodeHeldError{ID: "web-1", Held: &Node{Incarnation: "inc-a", Host: "web-1.example", PID: 4242}},
			ErrLocked, `in use by another process: node id web-1 is held by incarnation "inc-a" (host web-1.example, pid 4242)`},
		{"held by no row", &NodeHeldError{ID: "web-7"},
			ErrLocked, `in use by another process: node id web-7 is held by incarnation "" (host , pid 0)`},
		{"other incarnation", &NodeFencedError{ID: "web-1", Incarnation: "inc-a", Found: "inc-b", FoundHeartbeatAt: hb},
			ErrFenced, "stale attempt: fenced: node web-1 belongs to incarnation inc-b, not inc-a"},
		{"other incarnation, heartbeat given", &NodeFencedError{ID: "web-2", Incarnation: "inc-b", HeartbeatAt: hb,
			Found: "inc-a", FoundHeartbeatAt: hb}, ErrFenced, "stale attempt: fenced: node web-2 belongs to incarnation inc-a, not inc-b"},
		{"heartbeated since", &NodeFencedError{ID: "web-2", Incarnation: "inc-a", HeartbeatAt: hb.Add(-time.Second),
			Found: "inc-a", FoundHeartbeatAt: hb},
			ErrFenced, "stale attempt: fenced: node web-2 heartbeated at 2026-03-01T12:00:30Z, after 2026-03-01T12:00:29Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
			wrapped := fmt.Errorf("register node: %w", tc.err)
			if !errors.Is(wrapped, tc.target) {
				t.Errorf("errors.Is(%v, %v) = false", wrapped, tc.target)
			}
			var held *NodeHeldError
			var fenced *NodeFencedError
			if got := errors.As(wrapped, &held) || errors.As(wrapped, &fenced); !got {
				t.Fatalf("errors.As found no node error in %v", wrapped)
			}
			if held != nil && held != tc.err || fenced != nil && fenced != tc.err {
				t.Errorf("errors.As found %v / %v, want %v", held, fenced, tc.err)
			}
		})
	}
}
