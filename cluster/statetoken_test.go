package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// A standby whose log cannot write (a full disk) reopens its stream every
// few hundred ms, and each begin frame set its state token to the
// active's, though none of the records that make that state reached its
// log or its engine. Cut off, it promoted itself alone (its log fails,
// but no other node was live) with the active's state token and a higher
// epoch; when the cut healed the healthy active, equal state tokens and a
// lower epoch, stepped down to it and discarded every grant the failing
// node lacked: 221 of 300 answered grants lost with sync_standbys 1
// (breaker report, 3 of 3, also after kill -9 or a pause instead of the
// cut). A standby's state token now rises with the records it applies
// and writes, and takes the active's only once its state is the active's
// (a snapshot installed, or an idle heartbeat once everything is written).
func TestMemFailingStandbyTakesNoNewerStateFromTheStream(t *testing.T) {
	c := newMemCluster(t, 3, func(cfg *Config) { cfg.SyncStandbys = 1 })
	c.start(0, 1, 2)
	c.waitActive(0)
	c.grant(0, "before")
	c.waitFor("the grant replicated", func() bool { return c.holds(2, "before") != 0 })
	c.nodes[2].diskFull.Store(true)
	var gs []engine.Grant
	for k := range 20 {
		gs = append(gs, c.grant(0, fmt.Sprintf("k%d", k)))
	}
	breaks := func() int {
		n := c.nodes[2].node
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.streamBreaks
	}
	c.waitFor("node 2's stream reopened", func() bool { return breaks() >= 3 })
	if st, act := c.nodes[2].node.status(), c.nodes[0].node.status(); st.StateToken >= act.StateToken {
		t.Errorf("node 2, which holds none of k0..k19, says state token %d, the active %d", st.StateToken, act.StateToken)
	}
	// Cut off, it promotes itself alone; healed, it must not win.
	c.isolate(2, true)
	c.waitFor("node 2 promoted alone", func() bool { return c.nodes[2].eng.Active() })
	c.isolate(2, false)
	time.Sleep(2 * time.Second) // the two actives see each other and settle
	c.nodes[2].diskFull.Store(false)
	c.waitActive(0)
	for k, g := range gs {
		key := fmt.Sprintf("k%d", k)
		if got := c.holds(0, key); got != g.Token {
			t.Errorf("the active: %s held by %d, want %d (answered, acknowledged by node 1)", key, got, g.Token)
		}
		for i := range c.nodes {
			c.waitFor(fmt.Sprintf("node %d holding %s with %d", i, key, g.Token), func() bool { return c.holds(i, key) == g.Token })
		}
	}
}
