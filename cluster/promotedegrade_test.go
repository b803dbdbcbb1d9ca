package cluster_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A node promoted with fewer live peers than sync_standbys (two nodes,
// sync_standbys 1: the other one died, or handed off to it and closed)
// degrades at once: its first change is answered without waiting
// sync_timeout for a standby that cannot come. Before, the first grant
// after a kill -9 came after failover_timeout + sync_timeout (2.1 s with
// the defaults, over the 2 s a failover may take), and a graceful
// handoff (Ctrl+C on the active) stopped every grant for sync_timeout
// (1.0 s against 5 ms with sync_standbys 0). sync_timeout is 40 s here:
// the acquire on the promoted node is bounded at 15 s. The node
// recovers once the other node is back and has acknowledged.
func TestPromotedWithoutLiveStandbysDegradesAtOnce(t *testing.T) {
	for _, how := range []string{"kill-9", "handoff"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "40s")
			c.startAll()
			c.waitActive(0, 1)
			before := c.acquire(0, "before", "lease=60")
			if how == "kill-9" {
				c.kill9(0)
			} else {
				if code := c.stop(0); code != 0 { // SIGINT: a graceful handoff
					t.Fatalf("node 0 exited %d after SIGINT, want 0", code)
				}
			}
			c.waitActive(1)
			u := fmt.Sprintf("http://%s/locks/after?lease=60", c.nodes[1].listen)
			select {
			case a := <-postNoFollow(u):
				if a.status != http.StatusOK {
					t.Fatalf("acquire on the promoted node: %d %s", a.status, a.body)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the promoted node, its only peer gone, made its first grant wait for sync_timeout (40 s)")
			}
			if v, err := c.view(1); err != nil || !v.SyncDegraded {
				t.Errorf("node 1's view: %+v, %v; want sync_degraded", v, err)
			}
			if !strings.Contains(c.nodes[1].log.String(), "fewer live peers than sync_standbys at promotion") {
				t.Error("node 1 logged no degradation at its promotion")
			}
			if got := c.holder(1, "before"); got != before.Token {
				t.Errorf("the promoted node's holder of before: %d, want %d", got, before.Token)
			}
			c.start(0)
			deadline := time.Now().Add(20 * time.Second)
			for {
				if v, err := c.view(1); err == nil && !v.SyncDegraded {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("node 1 never recovered from degraded once node 0 was back")
				}
				time.Sleep(20 * time.Millisecond)
			}
			c.acquire(1, "recovered", "lease=60")
		})
	}
}
