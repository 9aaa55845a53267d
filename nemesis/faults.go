package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The kinds of fault, in the order the summary lists them.
// A kind added goes last: the seeds of the runs before it then replay the
// same faults with -kinds of the kinds they had.
var faultKinds = []string{"kill", "stop", "partition", "pg-restart", "failover", "disk-full", "webhook-down", "webhook-hang",
	"lost-answer"}

// step is one fault with every choice it needs, drawn from the seeded
// generator in a fixed order before it is done, so that a seed replays
// the same faults (their timing still depends on the machine).
type step struct {
	gap       time.Duration // quiet time before it
	kind      string
	node      int
	hold      time.Duration // how long the fault lasts before it heals
	immediate bool          // pg-restart: as a crash (-m immediate), else -m fast
}

// holds are the ranges of each kind's hold, in milliseconds. A stop lasts
// past inactive_threshold (5s), so that the node's runs are recovered; a
// partition lasts from less than the time a node takes to fence itself to
// more; a kill's hold is how long the node stays down.
var holds = map[string][2]int{
	"kill":         {0, 3000},
	"stop":         {6000, 10000},
	"partition":    {2000, 12000},
	"disk-full":    {5000, 20000},
	"webhook-down": {3000, 20000},
	"webhook-hang": {3000, 20000},
	"lost-answer":  {3000, 12000},
}

func draw(rng *rand.Rand, kinds []string, nodes int) step {
	s := step{gap: time.Duration(2000+rng.IntN(6000)) * time.Millisecond}
	s.kind = kinds[rng.IntN(len(kinds))]
	s.node = rng.IntN(nodes)
	h := holds[s.kind]
	s.hold = time.Duration(h[0]+rng.IntN(h[1]-h[0]+1)) * time.Millisecond
	s.immediate = rng.IntN(2) == 0
	return s
}

// nemesis does the faults, one at a time, each healed before the next.
func (c *cluster) nemesis(ctx context.Context, seed int64, duration time.Duration) error {
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	end := c.start.Add(duration)
	for time.Now().Before(end) {
		s := draw(rng, c.kinds, len(c.nodes))
		if !sleep(ctx, s.gap) {
			return ctx.Err()
		}
		f, err := c.do(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.kind, err)
		}
		c.mu.Lock()
		c.faults = append(c.faults, f)
		c.mu.Unlock()
		what := strings.Join(slices.DeleteFunc([]string{f.Kind, f.Node, f.Detail}, func(s string) bool { return s == "" }), " ")
		c.logf("%s from +%s for %s", what, f.Start.Sub(c.start).Round(100*time.Millisecond), f.End.Sub(f.Start).Round(100*time.Millisecond))
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// do does one fault and heals it.
func (c *cluster) do(ctx context.Context, s step) (Fault, error) {
	n := c.nodes[s.node]
	f := Fault{Kind: s.kind, Start: time.Now()}
	var err error
	switch s.kind {
	case "kill":
		f.Node = n.id
		n.life.Lock()
		f.Start = time.Now()
		n.kill()
		sleep(ctx, s.hold)
		err = c.startNode(ctx, n)
		n.life.Unlock()
	case "stop":
		f.Node = n.id
		n.life.Lock()
		f.Start = time.Now()
		if _, ok := n.running(); !ok {
			// It exited on its own and did not come back: the exit is
			// recorded, and there is nothing to stop.
			f.Detail = "not running"
		} else if err = n.signal(syscall.SIGSTOP); err == nil {
			sleep(ctx, s.hold)
			err = n.signal(syscall.SIGCONT)
		}
		n.life.Unlock()
	case "partition":
		f.Node = n.id
		n.proxy.cut()
		sleep(ctx, s.hold)
		n.proxy.heal()
	case "lost-answer":
		f.Node = n.id
		n.proxy.lose(true)
		sleep(ctx, s.hold)
		lost, answers := n.proxy.lose(false)
		f.Detail = fmt.Sprintf("%d of %d answers lost", lost, answers)
	case "pg-restart":
		f.Detail = "-m fast"
		if s.immediate {
			f.Detail = "-m immediate"
		}
		err = c.pair.RestartPrimary(s.immediate)
	case "failover":
		err = c.failover(&f)
	case "disk-full":
		f.Node = n.id
		n.life.Lock()
		f.Start = time.Now()
		var files []string
		files, f.Detail = fill(n)
		sleep(ctx, s.hold)
		for _, p := range files {
			_ = os.Remove(p)
		}
		n.life.Unlock()
	case "webhook-down", "webhook-hang":
		mode := receiverDown
		if s.kind == "webhook-hang" {
			mode = receiverHang
		}
		if err = c.receiver.setMode(mode); err == nil {
			sleep(ctx, s.hold)
			err = c.receiver.setMode(receiverUp)
		}
	default:
		err = fmt.Errorf("unknown fault %q", s.kind)
	}
	f.End = time.Now()
	return f, err
}

// failover moves the cluster to the standby as a virtual IP would: the
// proxies stop forwarding, the primary stops at once, the standby is
// promoted, the proxies forward to it (their connections to the old one
// closed), and the old primary is rebuilt as the new standby.
func (c *cluster) failover(f *Fault) error {
	for _, n := range c.nodes {
		n.proxy.cut()
	}
	old := c.pair.Primary().Addr()
	err := c.pair.Failover()
	for _, n := range c.nodes {
		n.proxy.retarget(c.pair.Primary().Addr())
		n.proxy.heal()
	}
	if err != nil {
		return err
	}
	f.Detail = fmt.Sprintf("%s to %s", old, c.pair.Primary().Addr())
	promoted := time.Since(f.Start).Round(100 * time.Millisecond)
	if err := c.pair.Rebuild(); err != nil {
		return err
	}
	f.Detail += fmt.Sprintf(", promoted in %s, standby rebuilt", promoted)
	return nil
}

// fill fills the tmpfs under a node's state directory: a file of zeros
// until no block is left, then empty files until no inode is left. It
// returns the files to remove, and what it did.
func fill(n *node) ([]string, string) {
	p, ok := n.statePath("fill")
	if !ok {
		return nil, "node not running"
	}
	var files []string
	written := 0
	if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
		files = append(files, p)
		buf := make([]byte, 64<<10)
		for {
			k, err := f.Write(buf)
			written += k
			if err != nil {
				break
			}
		}
		f.Close()
	}
	inodes := 0
	for i := 0; i < 100000; i++ {
		q := fmt.Sprintf("%s-%d", p, i)
		f, err := os.OpenFile(q, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
		if err != nil {
			break
		}
		f.Close()
		files = append(files, q)
		inodes++
	}
	return files, fmt.Sprintf("%d KiB and %d inodes", written>>10, inodes)
}

// diskFullSupport says why the disk-full fault cannot be done here, or ""
// when it can: it needs root, unshare and mount, and a tmpfs mounted in a
// mount namespace of its own.
func diskFullSupport(dir string) string {
	if os.Geteuid() != 0 {
		return "needs root, to mount a tmpfs under each node's state directory in a mount namespace of its own (unshare -m)"
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return "needs unshare (util-linux): " + err.Error()
	}
	probe := filepath.Join(dir, "probe")
	if err := os.Mkdir(probe, 0o700); err != nil {
		return err.Error()
	}
	defer os.Remove(probe)
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount -t tmpfs -o "$1" nemesis "$0" && umount "$0"`, probe, stateSize).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("cannot mount a tmpfs in a mount namespace of its own (unshare -m): %v: %s", err, out)
	}
	return ""
}
