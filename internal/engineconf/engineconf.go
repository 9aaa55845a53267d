// Package engineconf owns the one translation of a config's [daemon]
// section into the engine's settings (scheduler.Config), so that the
// daemon and the simulator that checks the engine against the reference
// model read the config the same way.
package engineconf

import (
	"time"

	"github.com/schedulerd/schedulerd/config"
	"github.com/schedulerd/schedulerd/scheduler"
)

// From returns the engine's settings for the [daemon] section d: its
// node, concurrency, heartbeat, liveness, shutdown and history keys, and
// how the store is held. The caller adds what is not in the section (the
// version, the logger, the notifiers).
func From(d config.Daemon) scheduler.Config {
	return scheduler.Config{
		NodeID: d.NodeID, Concurrency: d.Concurrency,
		HeartbeatInterval: d.HeartbeatInterval, InactiveThreshold: d.InactiveThreshold,
		ShutdownGrace: shutdownGrace(d), History: d.History,
		SocketPath: d.Socket,
		// SQLite: the lock is held, so no earlier process of this node
		// lives, and the machine clock is the store's. PostgreSQL: the
		// database clock judges leases, windows and liveness.
		ExclusiveStore: !d.IsPostgres(),
		StoreClock:     d.IsPostgres(),
	}
}

// shutdownGrace is the engine's value of shutdown_grace: the config's
// "0s" stops running attempts at once, where the engine's zero is its
// default.
func shutdownGrace(d config.Daemon) time.Duration {
	if d.ShutdownGrace == 0 {
		return scheduler.NoShutdownGrace
	}
	return d.ShutdownGrace
}
