package cluster_test

import (
	"encoding/json"
	"net/http"
	"strconv"
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
	for {
		// Whichever node serves as the active must hold k by g, and
		// nobody else may take it.
		for _, i := range []int{0, 2} {
			v, err := c.view(i)
			if err != nil || v.Role != "active" {
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
				t.Fatalf("node %d granted k to a second client (token %s) while %d holds it", i, strconv.FormatUint(b.grant.Token, 10), g.Token)
			}
		}
		if time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.waitActive(0, 2) // the priorities settle it: node 0 active again, synced
	if got := c.holder(0, "k"); got != g.Token {
		t.Fatalf("at the end node 0 holds k by %d, want %d", got, g.Token)
	}
}
