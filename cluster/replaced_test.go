package cluster_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestResumedActiveReplacedByADeadSuccessorLosesNoGrant: with
// sync_standbys 1, node 0 (the active) is paused, node 1 is promoted and
// grants k (node 2 acknowledged it), node 1 is killed, and node 0 runs
// again before node 2's failover timeout. Node 2 holds the answered grant
// and node 1's term; node 0 must not serve again from its older state,
// nor node 2 follow it (README: nothing answered is lost unless the
// active and all the standbys that had it die together). Before, node 0
// was active again 0.3 s after SIGCONT, node 2 installed its state, k was
// free and a second client got it (a fresh tester, 12 of 12).
func TestResumedActiveReplacedByADeadSuccessorLosesNoGrant(t *testing.T) {
	c := newCluster(t, 3, false, "--sync-standbys", "1")
	c.startAll()
	c.waitActive(0, 1, 2)
	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1, 2)
	successorDiesThenPausedResumes(t, c)
}

// successorDiesThenPausedResumes is the end both tests above share: node
// 1, the active while node 0 is paused, grants k (node 2 acknowledges
// it), is killed, and node 0 runs again 300 ms later. For 20 s whichever
// of nodes 0 and 2 is the active must hold k by that grant; then node 0,
// of the highest priority, must be the active again, synced, with k. It
// returns the grant.
func successorDiesThenPausedResumes(t *testing.T, c *testCluster) api.Grant {
	t.Helper()
	g := c.acquire(1, "k", "lease=60")
	for end := time.Now().Add(5 * time.Second); c.holder(2, "k") != g.Token; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("node 2's replica never showed k's grant, which it acknowledged")
		}
	}
	c.kill9(1)
	time.Sleep(300 * time.Millisecond)
	c.signal(0, syscall.SIGCONT)
	c.holdsOnEveryActive("k", g.Token, 20*time.Second, 0, 2)
	c.waitActive(0, 2)
	if got := c.holder(0, "k"); got != g.Token {
		t.Fatalf("at the end node 0 holds k by %d, want %d", got, g.Token)
	}
	return g
}
