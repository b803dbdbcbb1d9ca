package cluster

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
)

// Two actives with equal state tokens and epochs whose peers lists differ
// (a configuration mistake) each rank themselves first by their own list:
// by priority alone both kept the active role. The lower URL keeps it, as
// both see alike.
func TestKeepsStatePeersListsDiffer(t *testing.T) {
	a := Status{URL: "http://a:1", Role: "active", StateToken: 7, Epoch: 2, Priority: 0, Peers: []string{"http://a:1", "http://b:1"}}
	b := Status{URL: "http://b:1", Role: "active", StateToken: 7, Epoch: 2, Priority: 0, Peers: []string{"http://b:1", "http://a:1"}}
	// Each node's view of the other: Priority from its own list.
	aSeenByB, bSeenByA := a, b
	aSeenByB.Priority, bSeenByA.Priority = 1, 1
	if keepsA, keepsB := keepsState(a, bSeenByA), keepsState(b, aSeenByB); keepsA == keepsB {
		t.Fatalf("node a keeps its state: %v, node b keeps its state: %v; want exactly one", keepsA, keepsB)
	}
	if !keepsState(a, bSeenByA) {
		t.Errorf("the node of lower URL steps down")
	}
}

// Node 2 lists the peers in another order than nodes 0 and 1 (it puts
// itself first). The nodes say so in their logs, and a standby does not
// ask an active for a handoff it would be refused every second. Nodes 0
// and 2 each rank themselves first, and nodes that rank themselves first
// both promote (at the first election, or when the active dies): one of
// them steps down to the other. By priority alone both stayed active
// until one of them granted something.
func TestMemPeersListsDiffer(t *testing.T) {
	var lines logLines
	c := newMemCluster(t, 3, func(cfg *Config) {
		if cfg.Self == cfg.Peers[2] {
			cfg.Peers = []string{cfg.Peers[2], cfg.Peers[0], cfg.Peers[1]}
		}
		cfg.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelInfo})).With("self", cfg.Self)
	})
	// oneActive waits until one of among is the active and the others
	// follow it, synced; it returns that one.
	oneActive := func(among ...int) int {
		t.Helper()
		active := -1
		c.waitFor(fmt.Sprintf("one active among %v, followed by the others", among), func() bool {
			active = -1
			for _, i := range among {
				if c.nodes[i].eng.Active() {
					if active >= 0 {
						return false
					}
					active = i
				}
			}
			if active < 0 {
				return false
			}
			for _, i := range among {
				nd := c.nodes[i].node
				nd.mu.Lock()
				ok := i == active || (nd.following == c.urls[active] && nd.synced)
				nd.mu.Unlock()
				if !ok {
					return false
				}
			}
			return true
		})
		return active
	}
	c.start(0, 1, 2)
	first := oneActive(0, 1, 2)
	c.waitFor("node 2's and node 0's log lines about the peers lists", func() bool {
		return lines.count("self="+c.urls[2], "another order or other peers", "peer="+c.urls[0]) == 1 &&
			lines.count("self="+c.urls[0], "another order or other peers", "peer="+c.urls[2]) == 1
	})
	c.crash(first)
	var rest []int
	for i := range c.nodes {
		if i != first {
			rest = append(rest, i)
		}
	}
	oneActive(rest...)
	if n := lines.count("asked the active for a handoff"); n != 0 {
		t.Errorf("%d handoff requests between nodes whose peers lists differ, want none", n)
	}
	if !slices.Equal(c.nodes[2].node.status().Peers, []string{c.urls[2], c.urls[0], c.urls[1]}) {
		t.Errorf("node 2's status lists the peers %v, not its own list", c.nodes[2].node.status().Peers)
	}
}

// A node whose sync_standbys differs from its peers' says so, and they
// say so of it: the promoted node answers by its own setting, so a
// failover to a node with sync_standbys 0 made the cluster asynchronous
// and nothing said it (breaker U, 2026-12-06).
func TestMemSyncStandbysDiffer(t *testing.T) {
	var lines logLines
	c := newMemCluster(t, 3, func(cfg *Config) {
		if cfg.Self != cfg.Peers[2] {
			cfg.SyncStandbys = 1
		}
		cfg.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelInfo})).With("self", cfg.Self)
	})
	c.start(0, 1, 2)
	c.waitFor("the log lines about node 2's sync_standbys", func() bool {
		return lines.count("self="+c.urls[2], "another sync_standbys", "peer="+c.urls[0], "its_sync_standbys=1 our_sync_standbys=0") == 1 &&
			lines.count("self="+c.urls[0], "another sync_standbys", "peer="+c.urls[2], "its_sync_standbys=0 our_sync_standbys=1") == 1
	})
	if n := lines.count("self="+c.urls[0], "another sync_standbys", "peer="+c.urls[1]); n != 0 {
		t.Errorf("nodes 0 and 1 (both sync_standbys 1): %d lines about another sync_standbys, want none", n)
	}
}
