package cluster_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestEmptyNodeAloneDoesNotReplaceTheClustersState: node 2 of a synced
// cluster (sync_standbys 1) is killed and its data_dir emptied (a node
// replaced or re-imaged); the two nodes that hold the state are paused,
// and node 2 starts. It hears no peer, so it is elected alone, empty,
// under a new cluster ID, and a client takes a lock there. When the two
// nodes run again, the cluster must keep their state, every answered
// grant with its token, and node 2 take it (README, Cluster ID: a lone
// ID keeps nothing against another). Before, one grant on node 2, its
// token ahead of the clock after its promotion, made it the newer
// state: the active stepped down to it and all three nodes ended with
// its ID and none of the answered locks (a tester: 0 of 50 left).
func TestEmptyNodeAloneDoesNotReplaceTheClustersState(t *testing.T) {
	c := newCluster(t, 3, false, "--sync-standbys", "1")
	c.startAll()
	c.waitActive(0, 1, 2)
	grants := map[string]api.Grant{}
	for i := range 5 {
		k := "k" + strconv.Itoa(i)
		grants[k] = c.acquire(0, k, "lease=120")
	}
	v0, err := c.view(0)
	if err != nil {
		t.Fatal(err)
	}
	c.kill9(2)
	ents, err := os.ReadDir(c.nodes[2].dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(c.nodes[2].dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	c.signal(0, syscall.SIGSTOP)
	c.signal(1, syscall.SIGSTOP)
	c.start(2)
	c.waitActive(2)
	v2, err := c.view(2)
	if err != nil || v2.ClusterID == "" || v2.ClusterID == v0.ClusterID {
		t.Fatalf("node 2's cluster ID %q (%v), the cluster's %q: the premise is an election alone under a new ID", v2.ClusterID, err, v0.ClusterID)
	}
	c.acquire(2, "intruder", "lease=120")
	c.signal(0, syscall.SIGCONT)
	c.signal(1, syscall.SIGCONT)
	c.waitActive(0, 1, 2)
	for k, g := range grants {
		for _, i := range []int{0, 1, 2} {
			// (A node answers 503 while it resumes: after its pause, until
			// it has polled every peer again.)
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				a, err := do(http.MethodGet, "http://"+c.nodes[i].listen+"/locks/"+k)
				if err == nil && a.status == http.StatusOK {
					if !strings.Contains(a.body, `"token":`+strconv.FormatUint(g.Token, 10)) {
						t.Errorf("node %d shows %s as %s, want it held by the answered grant %d", i, k, a.body, g.Token)
					}
					break
				}
				if time.Now().After(end) {
					t.Fatalf("node %d: GET /locks/%s: %d %s (%v)", i, k, a.status, a.body, err)
				}
			}
		}
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := c.view(2)
		if err == nil && v.ClusterID == v0.ClusterID {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("node 2's cluster ID %q (%v), want the cluster's %q", v.ClusterID, err, v0.ClusterID)
		}
	}
}
