package cluster_test

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
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
	g := c.acquire(1, "k", "lease=60")
	for end := time.Now().Add(5 * time.Second); c.holder(2, "k") != g.Token; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("node 2's replica never showed k's grant, which it acknowledged")
		}
	}
	c.kill9(1)
	time.Sleep(300 * time.Millisecond)
	c.signal(0, syscall.SIGCONT)
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		// Whichever node serves as the active must hold k by g, and
		// nobody else may take it.
		for _, i := range []int{0, 2} {
			v, err := c.view(i)
			if err != nil || v.Role != api.RoleActive {
				continue
			}
			st, err := do(http.MethodGet, "http://"+c.nodes[i].listen+"/locks/k")
			if err != nil || st.status != http.StatusOK {
				continue // not serving yet (resuming), or gone since
			}
			var ls api.LockStatus
			if err := json.Unmarshal([]byte(st.body), &ls); err != nil {
				t.Fatal(err)
			}
			if ls.Holder == nil || ls.Holder.Token != g.Token {
				t.Fatalf("node %d is active with k as %s, want it held by the answered grant %d; roles %q", i, st.body, g.Token, c.roles())
			}
			b, err := do(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/k?lease=30&wait=0.2")
			if err == nil && b.status == http.StatusOK {
				t.Fatalf("node %d granted k to a second client (token %d) while %d holds it", i, b.grant.Token, g.Token)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.waitActive(0, 2) // the priorities settle it: node 0 active again, synced, of ID B
	if got := c.holder(0, "k"); got != g.Token {
		t.Fatalf("at the end node 0 holds k by %d, want %d", got, g.Token)
	}
	if v, err := c.view(0); err != nil || v.ClusterID != v1.ClusterID {
		t.Fatalf("node 0's cluster ID at the end: %q (%v), want the kept side's %q", v.ClusterID, err, v1.ClusterID)
	}
}
