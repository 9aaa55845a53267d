package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/schedulerd/schedulerd/control"
)

// cmdNodes lists the registered nodes with their last heartbeat and state.
func cmdNodes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nodes")
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("usage: schedulerd nodes [--json]")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	if *cf.json {
		for _, n := range nodes {
			if err := printJSON(stdout, n); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tHEARTBEAT\tAGO\tHOST\tPID\tVERSION\tSTARTED\tINCARNATION")
	for _, n := range nodes {
		ago := (time.Duration(n.AgeSeconds * float64(time.Second))).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", n.ID, n.State, when(n.HeartbeatAt), ago,
			orDash(n.Host), n.PID, orDash(n.Version), when(n.StartedAt), n.Incarnation)
	}
	return tw.Flush()
}

// cmdHealth exits 0 when this node is healthy, and says why not otherwise.
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("health")
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("usage: schedulerd health [--json]")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := c.Health(ctx)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	if *cf.json {
		if err := printJSON(stdout, h); err != nil {
			return err
		}
	}
	if !h.OK {
		return fmt.Errorf("node %s is unhealthy: %s", h.Node, strings.Join(h.Problems, "; "))
	}
	if !*cf.json {
		fmt.Fprintf(stdout, "node %s is healthy: incarnation %s, last heartbeat %s, %d attempts running\n",
			h.Node, h.Incarnation, when(h.LastHeartbeat), h.Running)
	}
	return nil
}

// cmdReload makes the daemon re-read its config, as SIGHUP does.
func cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reload")
	cf := addClientFlags(fs, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("usage: schedulerd reload [--json]")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Reload(ctx); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if *cf.json {
		return printJSON(stdout, map[string]bool{"applied": true})
	}
	fmt.Fprintln(stdout, "reload applied")
	return nil
}

// cmdNotifications lists notifications with their delivery state.
func cmdNotifications(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("notifications")
	cf := addClientFlags(fs, stderr)
	job := fs.String("job", "", "only the notifications of job `J`")
	state := fs.String("state", "", "only those in state `S`: pending, delivered or failed")
	limit := fs.Int("limit", 100, "at most `N` notifications (1 to 10000)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("usage: schedulerd notifications [--job J] [--state S] [--limit N] [--json]")}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ns, err := c.Notifications(ctx, control.NotificationsQuery{Job: *job, State: *state, Limit: *limit})
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	if *cf.json {
		for _, n := range ns {
			if err := printJSON(stdout, n); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tJOB\tEVENT\tNOTIFIER\tSTATE\tATTEMPTS\tNEXT/DELIVERED\tERROR\tID")
	for _, n := range ns {
		at := n.DeliveredAt
		if n.State == "pending" {
			at = n.NextAttemptAt
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", when(n.CreatedAt), escapeText(n.Job, false), n.Event,
			n.Notifier, n.State, n.Attempts, when(at), orDash(escapeText(clipText(n.LastError, 60), false)), n.ID)
	}
	return tw.Flush()
}

// clipText shortens s to about n bytes for a table cell, at a rune
// boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
