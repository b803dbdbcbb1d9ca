package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// A standby whose log refuses the active's records (a full disk) applies
// none of them, and its stream, reopened after each break, resumed from
// its log at every reopening: each resume frame (and each heartbeat)
// counted as "the replica is current", so its reads carried a
// Baton-Replica-Lag of a few hundred ms and baton_replica_lag_seconds
// stayed low while its replica fell further behind (breaker report,
// 3 of 3: 12 s and 322 changes behind, labelled 0.3 s). Its GET /cluster
// also said it knew no active most of the time, though the active was
// live and its writes were redirected there. The replica's lag now grows
// from the last batch the standby applied, and the active it follows
// stays known.
func TestMemStandbyOnAFullDiskReportsItsReplicaBehind(t *testing.T) {
	c, standby := syncedStandby(t)
	standby.diskFull.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: "b", Lease: time.Minute}); err != nil {
		t.Fatalf("acquire b on the active: %v", err)
	}
	breaks := func() int {
		standby.node.mu.Lock()
		defer standby.node.mu.Unlock()
		return standby.node.streamBreaks
	}
	c.waitFor("a break of the standby's stream", func() bool { return breaks() >= 1 })
	// A change the standby's replica cannot have had since it was made:
	// the replica has not been current since then.
	g := c.grant(0, "c")
	made := time.Now()
	c.waitFor("three more breaks of the standby's stream", func() bool { return breaks() >= 4 })
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		since := time.Since(made)
		lag, ok := standby.node.ReplicaLag()
		if c.holds(1, "c") == g.Token {
			t.Fatalf("the standby applied c, which its log cannot write")
		}
		if ok && lag < since {
			t.Fatalf("replica lag %v, but c, granted %v ago, is not in the replica", lag, since)
		}
		if a := standby.node.status().Active; a != c.nodes[0].url {
			t.Errorf("the standby's status names the active %q, want %q (live, and its stream is reopened)", a, c.nodes[0].url)
		}
	}
	standby.diskFull.Store(false)
	c.waitFor("c replicated once the disk has room", func() bool { return c.holds(1, "c") == g.Token })
	c.waitFor("the replica current again", func() bool {
		lag, ok := standby.node.ReplicaLag()
		return ok && lag < time.Second
	})
}

// syncedStandby starts two nodes, node 0 the active, grants "a" there and
// waits until node 1, its standby, holds it too; it returns the cluster
// and node 1.
func syncedStandby(t *testing.T) (*memCluster, *memNode) {
	t.Helper()
	c := newMemCluster(t, 2)
	c.start(0, 1)
	c.waitActive(0)
	g := c.grant(0, "a")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "a") == g.Token })
	return c, c.nodes[1]
}
