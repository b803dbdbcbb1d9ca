package cluster_test

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestPromotionNotStuckOnSilentFetch: the standby that takes over after a
// kill -9 lacks a grant that only the other standby acknowledged, so it
// fetches that standby's tail first. Its first fetch goes out on a
// connection that delivers nothing (a link that went silent: a DROP, a
// stale connection, a middlebox), while the polls between the two still
// answer. The promotion must not wait for that connection forever: it
// gives the fetch up (10 failover timeouts without an answer), fetches
// again on another connection, promotes and keeps the grant (cut with iptables DROP on a real link: no active for
// as long as the link stayed silent, 45 s and more).
func TestPromotionNotStuckOnSilentFetch(t *testing.T) {
	c := newCluster(t, 3, true, "--sync-standbys", "1")
	c.startAll()
	c.waitActive(0, 1, 2)
	// Both standbys synced first: a node 1 whose stream is held before
	// its first frames holds no state, and node 2 does not defer to it
	// (it promoted itself, and the fault was not reproduced: CI, 1 run).
	warm := c.acquire(0, "silent-fetch/warm", "lease=60")
	c.waitReplicated(1, warm.Token)
	c.waitReplicated(2, warm.Token)

	// Node 1 stops receiving node 0's stream: node 2 alone acknowledges
	// the grant, so only node 2's log holds it.
	c.nodes[0].proxy.hold(streamOf(c.nodes[1].url), false, true)
	g := c.acquire(0, "silent-fetch", "lease=60")

	// The answer to the first fetch of node 2's records is held (node 2
	// answers, nothing of it comes back); later connections are forwarded.
	var fetches atomic.Int32
	c.nodes[2].proxy.hold(func(line string) bool {
		return strings.Contains(line, "/_cluster/records") && fetches.Add(1) == 1
	}, false, true)

	c.kill9(0)
	c.waitActive(1, 2)
	if got := c.holder(1, "silent-fetch"); got != g.Token {
		t.Fatalf("the promoted node holds silent-fetch with token %d, want the grant answered before the kill, %d", got, g.Token)
	}
	if fetches.Load() == 0 {
		t.Fatalf("node 1 promoted without fetching node 2's tail: the test did not reproduce the fault")
	}
}
