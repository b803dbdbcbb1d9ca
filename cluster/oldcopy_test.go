package cluster_test

import (
	"fmt"
	"testing"
)

// TestActiveRestartedAtOnceOnAnOldCopyIsReplaced: the active of highest
// priority is killed with SIGKILL and started again at once, before its
// standbys count it dead, on an older copy of its data_dir (a volume
// rolled back, a backup restored), with sync_standbys 1. It comes back on
// a cold start behind the standbys, whose logs hold every answered grant:
// its election waits for theirs, and one of them must promote (after
// fetching the other's tail, if it lacks it) rather than wait for the
// node of higher priority. TestDiskHistoryChaos CHAOS_SEED=2
// CHAOS_FAULTS=8 (old-copy) saw every node a standby until the test gave
// up, 15 s later (TestRuleFailoverNotHeldByAColdStartNodeBehindIt). Every
// grant answered before the kill is held on the active that follows.
func TestActiveRestartedAtOnceOnAnOldCopyIsReplaced(t *testing.T) {
	c := newCluster(t, 3, true, syncFlags...)
	c.startAll()
	c.waitActive(0, 0, 1, 2)
	c.acquire(0, "before", "lease=60")
	old := c.copyDataDir(0)
	tokens := map[string]uint64{}
	for i := range 20 {
		key := fmt.Sprintf("after/%d", i)
		tokens[key] = c.acquire(0, key, "lease=60").Token
	}
	c.kill9(0)
	c.restoreDataDir(0, old)
	c.start(0)
	a := c.waitActive(-1, 0, 1, 2)
	for key, tok := range tokens {
		if got := c.holder(a, key); got != tok {
			t.Errorf("%s held by token %d on node %d, the active, want %d (answered before the kill)", key, got, a, tok)
		}
	}
}
