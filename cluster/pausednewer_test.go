package cluster_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A standby that was paused while the active died, and so never counted
// in the failover, holds the grants it acknowledged (sync_standbys 1); the
// node promoted meanwhile lacks them when it promoted alone (its log
// failed: a full disk, the state it held ended there). On waking, the
// paused standby followed the stale active and replaced its state with
// the active's snapshot: 221 of 300 answered grants lost (breaker report,
// SIGSTOP n2, kill -9 n1, n3 elected alone). A node restarted so was
// already kept (ruleRestartNewer, cold start); one that was synced before
// its pause is now too: it takes the active role instead of following an
// active whose state is older, and the stale active steps down to it.
func TestPausedStandbyWithNewerStateIsNotOverwritten(t *testing.T) {
	c := newCluster(t, 3, false, "--sync-standbys", "1")
	c.mountDataDirs()
	c.startAll()
	c.waitActive(0, 1, 2)
	before := c.grantOn(0, "before", "lease=120")
	c.waitHolder(2, "before", before.Token)
	free := c.fillDisk(2)
	// What room node 2's log still has (its segment's preallocated
	// pages) is filled by changes until its write fails.
	stop := c.spill(0)
	if !c.waitLog(2, "wal: write failed", 20*time.Second) {
		stop()
		t.Fatal("node 2's log never failed on its full disk")
	}
	stop()
	tokens := map[string]uint64{}
	for k := range 30 {
		key := fmt.Sprintf("k%d", k)
		tokens[key] = c.grantOn(0, key, "lease=120").Token // acknowledged by node 1
	}
	c.signal(1, syscall.SIGSTOP)
	c.kill9(0)
	c.waitActive(2)
	free()
	time.Sleep(time.Second)
	c.signal(1, syscall.SIGCONT)
	active := c.waitActive(1, 1, 2)
	for key, tok := range tokens {
		if got := c.holderOf(active, key); got != tok {
			t.Errorf("%s held by %d on the active (node %d), want %d (answered, acknowledged by node 1)", key, got, active, tok)
		}
	}
}
