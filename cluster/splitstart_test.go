package cluster_test

import (
	"syscall"
	"testing"
)

// TestSplitAtFirstStartLosesNoGrantWhenOneSideDies: a fresh cluster
// split at its first start. Node 0 starts alone and becomes the first
// active (cluster ID A), and is paused before any standby synced with it;
// nodes 1 and 2 start, elect node 1 under a new ID B, and node 1 grants k
// with sync_standbys 1 (node 2 acknowledged it: answered). Node 1 is
// killed and node 0 runs again. Node 2 holds the answered grant, in a
// state newer than node 0's: it must not follow node 0 (which replaced
// its state with node 0's snapshot: k was free), and node 0 must not
// serve from its own (README, Cluster ID: a split at the first start
// ends as any split brain, the newer state keeps). Found by a tester
// (the first repetition of a pause-kill-resume script, every time).
func TestSplitAtFirstStartLosesNoGrantWhenOneSideDies(t *testing.T) {
	c := newCluster(t, 3, false, "--sync-standbys", "1")
	c.start(0)
	c.waitActive(0)
	v0, err := c.view(0)
	if err != nil || v0.ClusterID == "" {
		t.Fatalf("node 0's view: %+v, %v: want its cluster ID", v0, err)
	}
	c.signal(0, syscall.SIGSTOP)
	c.start(1)
	c.start(2)
	c.waitActive(1, 2)
	v1, err := c.view(1)
	if err != nil || v1.ClusterID == "" || v1.ClusterID == v0.ClusterID {
		t.Fatalf("node 1's cluster ID %q (%v), node 0's %q: the premise is a split with two IDs", v1.ClusterID, err, v0.ClusterID)
	}
	successorDiesThenPausedResumes(t, c)
	if v, err := c.view(0); err != nil || v.ClusterID != v1.ClusterID {
		t.Fatalf("node 0's cluster ID at the end: %q (%v), want the kept side's %q", v.ClusterID, err, v1.ClusterID)
	}
}
