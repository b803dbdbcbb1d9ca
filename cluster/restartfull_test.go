package cluster

import (
	"fmt"
	"testing"
	"time"
)

// A node restarted on a full disk takes no role from a healthy active
// (breaker report of 2026-12-04, 3 of 3 with real processes: the cluster
// then refused every change until the disk was freed). Node 0, the
// highest priority, crashes; node 1 is promoted and grants with node 2's
// acknowledgement (sync_standbys 1); node 0 comes back on a disk that
// takes no write. It resumes from node 1's log and the first record it
// writes fails. It must neither ask for the role, nor take it when node 1
// hands off, nor promote itself while node 1 hands the role back: node 1
// stays the one active, and grants go on there.
func TestMemRestartOnAFullDiskTakesNoRole(t *testing.T) {
	c := newMemCluster(t, 3, func(cfg *Config) { cfg.SyncStandbys = 1 })
	c.start(0, 1, 2)
	c.waitActive(0)
	c.grant(0, "before")
	c.crash(0)
	c.waitActive(1, 1, 2)
	for k := range 20 {
		c.grant(1, fmt.Sprintf("k%d", k))
	}
	c.nodes[0].diskFull.Store(true)
	c.open(0)
	c.start(0)
	// Long enough for node 0 to resume, fail, ask, and for any failover
	// it would wrongly make (a failover timeout of silence, and more).
	end := time.Now().Add(4 * time.Second)
	k := 0
	for time.Now().Before(end) {
		if as := c.actives(); len(as) != 1 || as[0] != 1 {
			t.Fatalf("actives %v, want only node 1; views:\n%s", as, c.views())
		}
		c.grant(1, fmt.Sprintf("after%d", k))
		k++
		time.Sleep(20 * time.Millisecond)
	}
	if got := c.nodes[0].changed("promote"); got != 1 { // its first election only
		t.Errorf("node 0 promoted %d times since its first election, want 0", got-1)
	}
	c.nodes[0].diskFull.Store(false)
	c.waitActive(0)
}
