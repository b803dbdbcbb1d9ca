package main

// baton cluster and baton events: what a node knows of the cluster and its
// recent events, through the Go client.

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/jsonw"
)

// followInterval is how often `baton events --follow` asks for new events.
const followInterval = 500 * time.Millisecond

func cmdCluster(ctx context.Context, args []string, cio cliIO) error {
	f := newClientFlags("cluster", cio)
	asJSON := f.fs.Bool("json", false, "print the node's JSON answer")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usagef("want no arguments, got %s", nargs(f.fs.NArg()))
	}
	c, err := f.client(cio)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.Cluster(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(cio.stdout, v)
	}
	active := v.Active
	if active == "" {
		active = "(none known)"
	}
	fmt.Fprintf(cio.stdout, "node:       %s (%s)\nactive:     %s\nepoch:      %d\nlast token: %d\nversion:    %s\n",
		v.Self, v.Role, active, v.Epoch, v.LastToken, buildText(v.Build))
	if v.SyncStandbys > 0 {
		// What GET /cluster says of sync_standbys (SPEC §3): whether
		// the active waits for its standbys, or has gone on without them.
		state := "in sync"
		switch {
		case v.Role != api.RoleActive:
			state = "degraded or not: only the active says" // a standby does not know
		case v.SyncDegraded:
			state = "DEGRADED: answering without them (fewer acknowledged within sync_timeout, or fewer peers live at its promotion)"
		}
		fmt.Fprintf(cio.stdout, "sync:       %d standby(s), %s\n", v.SyncStandbys, state)
	}
	fmt.Fprintln(cio.stdout)
	now := time.Now()
	tw := tabwriter.NewWriter(cio.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRIORITY\tNODE\tROLE\tLIVE\tLAST CONTACT\tLOG INDEX\tACKED")
	for _, p := range v.Peers {
		role, contact := p.Role, "never"
		switch {
		case p.Refused:
			role = "refuses this node (cluster_secret differs)"
		case role == "":
			role = "-"
		}
		if p.LastContact != nil {
			contact = now.Sub(*p.LastContact).Round(time.Millisecond).String() + " ago"
		}
		live := "no"
		if p.Live {
			live = "yes"
		}
		// ACKED: on the active, the index each standby streaming from it
		// acknowledged; "-" elsewhere.
		acked := "-"
		if p.AckedIndex != nil {
			acked = strconv.FormatUint(*p.AckedIndex, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Priority, p.URL, role, live, contact, p.LastIndex, acked)
	}
	return tw.Flush()
}

// buildText is a Build on one line: "v1.2.3 (commit abc123, go1.26.8)".
func buildText(b api.Build) string {
	commit := b.Commit
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s)", b.Version, commit, b.Go)
}

func cmdEvents(ctx context.Context, args []string, cio cliIO) error {
	f := newClientFlags("events", cio)
	key := f.fs.String("key", "", "only the events of this lock key")
	follow := f.fs.Bool("follow", false, "keep printing new events until interrupted")
	asJSON := f.fs.Bool("json", false, "print each event as a JSON line")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usagef("want no arguments, got %s (the key goes in --key)", nargs(f.fs.NArg()))
	}
	if *key == "" && f.fs.Changed("key") {
		// No key is "": sent as none, it listed every key's events.
		return usagef("--key is empty (leave it out for the events of every key)")
	}
	if err := checkKeyFlag("--key", *key); err != nil {
		return err
	}
	// One node at a time: each node numbers its own feed, and a Seq
	// passed to another node replays what that one keeps (polls sent
	// round robin over a cluster's nodes printed every event again and
	// again). The next node is asked when this one does not answer.
	cs, err := f.clientPerNode(cio)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	if *follow {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
	}
	var since uint64
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	cur := 0          // the node followed (cs)
	failed := 0       // nodes in a row that did not answer
	down := false     // following, and the last round found no node answering
	answered := false // a poll was answered: a later failure is a restart or a failover
	moved := false    // following another node now: its events up to lastAt were printed
	var lastAt time.Time
	for {
		l, err := cs[cur].Events(ctx, api.EventsOptions{Since: since, Key: *key})
		if err != nil {
			if ctx.Err() != nil && *follow {
				return nil // interrupted
			}
			if errors.Is(err, api.ErrUnavailable) && len(cs) > 1 {
				cur, failed = (cur+1)%len(cs), failed+1
				if failed < len(cs) {
					// The next node, at once: its own feed, from what it
					// keeps on (events printed already are skipped).
					since, moved = 0, answered
					continue
				}
			}
			failed = 0
			if !*follow || !answered || !errors.Is(err, api.ErrUnavailable) {
				return err
			}
			// A node restarting or failing over: follow on once it
			// answers again (its new run resumes the cursor).
			if !down {
				fmt.Fprintf(cio.stderr, "baton events: %v; still following\n", err)
				down = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			continue
		}
		down, answered, failed = false, true, 0
		if l.Missed > 0 && !moved {
			fmt.Fprintf(cio.stderr, "baton events: %d events are no longer kept by the node\n", l.Missed)
		}
		for _, ev := range l.Events {
			if moved && !ev.At.After(lastAt) {
				continue // printed from the node followed before
			}
			lastAt = ev.At
			if *asJSON {
				if err := printJSONLine(cio, ev); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintln(cio.stdout, eventText(ev))
		}
		moved = false
		if l.Last < since {
			// The node restarted: its Seqs begin again.
			since = 0
		} else {
			since = l.Last
		}
		if !*follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func printJSONLine(cio cliIO, v any) error {
	b, err := jsonw.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cio.stdout, "%s\n", b)
	return err
}

// eventText is one event on one line: time, kind, then what it concerns.
func eventText(ev api.Event) string {
	s := ev.At.Local().Format("15:04:05.000") + "  " + fmt.Sprintf("%-9s", ev.Kind)
	if ev.Key != "" {
		s += "  " + strconv.Quote(ev.Key)
	}
	if ev.Token != 0 {
		s += " token " + strconv.FormatUint(ev.Token, 10)
	}
	if ev.Lease != 0 {
		s += " lease " + secs(ev.Lease)
	}
	if ev.Waited != 0 {
		s += " waited " + secs(ev.Waited)
	}
	if ev.Key != "" {
		s += " waiters " + strconv.Itoa(ev.Waiters)
	}
	// Whose grant or wait it was, how it held, and an operator's release,
	// as GET /events and the status page say (SPEC section 1: the owner
	// is shown wherever the holder or the waiter is).
	if ev.Owner != "" {
		s += " owner " + strconv.Quote(ev.Owner)
	}
	if ev.Mode == api.ModeShared {
		s += " shared"
	}
	if ev.Limit > 1 {
		s += " limit " + strconv.Itoa(ev.Limit)
	}
	if ev.Forced {
		s += " forced"
	}
	if ev.Node != "" {
		s += "  " + ev.Node
	}
	if ev.Message != "" {
		s += ": " + ev.Message
	}
	return s
}
