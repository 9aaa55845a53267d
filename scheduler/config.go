package scheduler

import (
	"cmp"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/schedulerd/schedulerd/jobs"
	"github.com/schedulerd/schedulerd/store"
)

// Config holds the engine's settings; it mirrors the [daemon] section.
type Config struct {
	NodeID            string
	Concurrency       int           // runs at once on this node; default 4
	HeartbeatInterval time.Duration // default 30s
	InactiveThreshold time.Duration // default 2m
	// ShutdownGrace is how long running attempts may finish after Stop
	// before they are stopped: default 30s; NoShutdownGrace (negative)
	// stops them at once.
	ShutdownGrace time.Duration
	History       time.Duration // default 720h
	// PollInterval is the longest the loop sleeps when it expects nothing:
	// it then looks for work that other writers made. Default 10s.
	PollInterval time.Duration
	// PruneInterval is how often finished runs are pruned. Default 1h.
	PruneInterval time.Duration
	// FireLead is how long before its tick a tick is fired: its run is
	// written then, pending until the tick (or until ClaimLead before it),
	// so that at the tick at most the claim is left to do. Default 250ms;
	// a round of more than 500 jobs at one tick begins earlier (see
	// tickQueue.roundLead); negative: ticks fire at their time.
	FireLead time.Duration
	// ClaimLead is how long before its tick the run of a tick fired ahead
	// is claimed: its attempt is this node's from then on, started_at the
	// tick, and its handler or process starts at the tick, with nothing
	// left to write. Default 50ms, at most FireLead; negative: the runs
	// are claimed at their tick.
	ClaimLead time.Duration
	Version   string
	// SocketPath is passed to command jobs as SCHEDULERD_SOCKET.
	SocketPath string
	// StoreClock makes the store's clock authoritative: store calls get a
	// zero Now, so leases, windows and liveness are judged by the database
	// clock (PostgreSQL, several nodes). Without it the engine's Clock is
	// passed down (one node, and tests with a schedulertest.FakeClock).
	StoreClock bool
	// ExclusiveStore says that this process holds the store alone (the
	// SQLite lock): any earlier incarnation of the node is then gone, and
	// the node takes over its id without judging its liveness.
	ExclusiveStore bool
	// Notifiers are the notifiers of the config ([[notifier]]), by which
	// the notifier names of the expectations of jobs this node does not
	// declare are resolved (see Retired); SetNotifiers replaces them.
	Notifiers []jobs.NotifyTarget
	Clock     Clock
	Logger    *slog.Logger
	// Rand returns floats in [0, 1) for backoff jitter.
	Rand func() float64
}

func (c Config) withDefaults() Config {
	c.NodeID = cmp.Or(c.NodeID, hostname())
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, 30*time.Second)
	c.InactiveThreshold = cmp.Or(c.InactiveThreshold, 2*time.Minute)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, 30*time.Second)
	if c.ShutdownGrace < 0 {
		c.ShutdownGrace = 0
	}
	c.History = cmp.Or(c.History, 720*time.Hour)
	c.PollInterval = cmp.Or(c.PollInterval, 10*time.Second)
	c.PruneInterval = cmp.Or(c.PruneInterval, time.Hour)
	c.FireLead = min(max(cmp.Or(c.FireLead, defaultFireLead), 0), store.MaxFireAhead-maxRoundLead)
	c.ClaimLead = min(max(cmp.Or(c.ClaimLead, defaultClaimLead), 0), c.FireLead)
	c.Version = cmp.Or(c.Version, "dev")
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// NoShutdownGrace as Config.ShutdownGrace stops running attempts as soon
// as Stop is called (shutdown_grace = "0s"); a zero ShutdownGrace is the
// default's.
const NoShutdownGrace time.Duration = -1
