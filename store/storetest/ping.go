package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// testPing: the health check asks Ping whether the store answers. An open
// store answers; a ping that cannot run (its context is over, or the store
// is closed) is an error, never a false "reachable", and it returns instead
// of hanging.
func testPing(t *testing.T, s store.Store) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}

	done, stop := context.WithCancel(ctx)
	stop()
	if err := s.Ping(done); err == nil {
		t.Error("Ping with a cancelled context answered nil: a ping that did not run must not report the store reachable")
	}

	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping of a closed store answered nil")
	}
	if ctx.Err() != nil {
		t.Error("Ping of a closed store did not return before its deadline")
	}
}
