package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
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
