package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// A standby writes the active's records into its own log at the active's
// indexes: after a restart it replays them, and it resumes from its log's
// position without a snapshot while the active still has what followed.
func TestMemRestartedStandbyResumesFromItsLog(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g1 := c.grant(0, "before")
	c.waitFor("the grant replicated", func() bool { return c.holds(2, "before") == g1.Token })
	if a, s := c.nodes[0].wal.LastIndex(), c.nodes[2].wal.LastIndex(); a != s {
		t.Fatalf("the standby's log ends at %d, the active's at %d", s, a)
	}
	c.closeNode(2)
	g2 := c.grant(0, "while-down")
	c.open(2)
	if got := c.holds(2, "before"); got != g1.Token {
		t.Fatalf("the restarted standby's own log: before held by %d, want %d", got, g1.Token)
	}
	c.start(2)
	c.waitActive(0)
	c.waitFor("the record made while it was down", func() bool { return c.holds(2, "while-down") == g2.Token })
	if n := c.nodes[2].node; n.installs.Load() != 0 || n.resumes.Load() != 1 {
		t.Errorf("the restarted standby: %d snapshots installed, %d resumes; want 0 and 1", n.installs.Load(), n.resumes.Load())
	}
}

// Every node stopped, then started again: each replays its own log, the
// cluster elects an active, and every grant is there with its token;
// tokens go on rising.
func TestMemWholeClusterRestartKeepsState(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g := c.grant(0, "k")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "k") == g.Token && c.holds(2, "k") == g.Token })
	for _, i := range []int{2, 1, 0} {
		c.closeNode(i)
	}
	for i := range c.nodes {
		c.open(i)
	}
	c.start(0, 1, 2)
	c.waitFor("an active", func() bool { return len(c.actives()) == 1 })
	a := c.actives()[0]
	c.waitActive(a)
	for i := range c.nodes {
		if got := c.holds(i, "k"); got != g.Token {
			t.Errorf("node %d after the restart: k held by %d, want %d", i, got, g.Token)
		}
	}
	g2 := c.grant(a, "k2")
	if g2.Token <= g.Token {
		t.Errorf("token after the restart %d, not above %d", g2.Token, g.Token)
	}
}

// A standby's engine applies replicated records through the one apply
// path, so it reports the grants it applies as events too.
func TestMemStandbyReportsReplicatedGrants(t *testing.T) {
	c := newMemCluster(t, 2)
	grants := make(chan uint64, 16)
	c.onEvent = func(i int, ev engine.Event) {
		if i == 1 && ev.Kind == engine.EventGrant {
			grants <- ev.Token
		}
	}
	c.start(0, 1)
	c.waitActive(0)
	g := c.grant(0, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case tok := <-grants:
			if tok == g.Token {
				return
			}
		case <-ctx.Done():
			t.Fatal("the standby reported no grant event for the replicated grant")
		}
	}
}
