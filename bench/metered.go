package main

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/schedulerd/schedulerd/store"
)

// meteredStore is a store handle that attributes the statements of the
// heartbeat round (NodeHeartbeat, RunsCancelRequested, NodesList) to the
// heartbeat, by reading the store's own statement counter around each of
// those calls. Every other method passes through unchanged.
type meteredStore struct {
	store.Store
	heartbeat atomic.Int64
}

// newMetered wraps st, and returns the wrapper as the engine should see
// it: with store.ConcurrentWriter when st has it. hidden names the methods
// of st the wrapper would still hide: an optional interface that the
// engine may look for (as it looks for store.Notifier) must not be lost by
// measuring.
func newMetered(st store.Store) (m *meteredStore, s store.Store, hidden []string) {
	m = &meteredStore{Store: st}
	s = m
	if _, ok := st.(store.ConcurrentWriter); ok {
		s = concurrentMetered{m}
	}
	known := []string{"Statements", "Migrate"}
	rt, wt := reflect.TypeOf(st), reflect.TypeOf(s)
	for i := range rt.NumMethod() {
		name := rt.Method(i).Name
		if _, ok := wt.MethodByName(name); !ok && !slices.Contains(known, name) {
			hidden = append(hidden, name)
		}
	}
	return m, s, hidden
}

// concurrentMetered is a meteredStore of a store.ConcurrentWriter.
type concurrentMetered struct{ *meteredStore }

// ConcurrentWrites passes store.ConcurrentWriter through.
func (concurrentMetered) ConcurrentWrites() {}

// Statements is the wrapped store's counter.
func (m *meteredStore) Statements() int64 { return statements(m.Store) }

// Heartbeat is the number of statements of the heartbeat round.
func (m *meteredStore) Heartbeat() int64 { return m.heartbeat.Load() }

func (m *meteredStore) count(before int64) { m.heartbeat.Add(statements(m.Store) - before) }

// Wakeups passes store.Notifier through (a nil channel, never ready, for a
// store that does not notify: what the engine uses then).
func (m *meteredStore) Wakeups() <-chan struct{} {
	if n, ok := m.Store.(store.Notifier); ok {
		return n.Wakeups()
	}
	return nil
}

func (m *meteredStore) NodeHeartbeat(ctx context.Context, p store.NodeHeartbeatParams) error {
	defer m.count(statements(m.Store))
	return m.Store.NodeHeartbeat(ctx, p)
}

func (m *meteredStore) RunsCancelRequested(ctx context.Context, incarnation string) ([]string, error) {
	defer m.count(statements(m.Store))
	return m.Store.RunsCancelRequested(ctx, incarnation)
}

func (m *meteredStore) NodesList(ctx context.Context, withJobs bool) ([]*store.Node, error) {
	defer m.count(statements(m.Store))
	return m.Store.NodesList(ctx, withJobs)
}
