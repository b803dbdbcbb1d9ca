package cluster_test

import (
	"testing"
	"time"
)

// TestStandbyStreamResumesAfterALongCut: a standby's link to the active is
// cut (iptables DROP, both ways) for 16 s, long enough for the TCP of the
// active's replication stream to back off its retransmissions to 12.8 s
// (its last one about 13 s into the cut, the next 26 s in), then healed. The standby answers polls at once on new connections, but
// a stream that it kept reading through the cut gets nothing until the
// active's next retransmission, up to the cut's length later (two
// minutes for a longer cut): the standby looks live and synced while it
// acknowledges nothing. Here the other standby is then killed, so the
// active waits for that one's acknowledgement (sync_timeout 5 s), and
// answers a grant without it; the active is killed next, and the standby
// that takes over must hold the grant (SPEC section 3: with sync_standbys
// 1, a crash of the active loses no answered grant; the cut had healed).
func TestStandbyStreamResumesAfterALongCut(t *testing.T) {
	c := newCluster(t, 3, false, "--sync-standbys", "1", "--sync-timeout", "5s")
	newFirewall(t, c)
	c.startAll()
	c.waitActive(0, 1, 2)
	warm := c.acquire(0, "silent-stream/warm", "lease=120")
	c.waitReplicated(1, warm.Token)
	c.waitReplicated(2, warm.Token)

	// Node 2, of lowest priority, does not promote itself through the
	// cut: node 1, live, hears the active.
	c.fw.cut(0, 2)
	time.Sleep(16 * time.Second)
	c.fw.mend(0, 2)
	healed := time.Now()
	c.waitActive(0, 1, 2) // every node answers and agrees again

	c.kill9(1)
	g := c.acquire(0, "silent-stream", "lease=120")
	if v, err := c.view(0); err == nil && v.SyncDegraded {
		t.Logf("node 0 answered the grant %v after the heal, degraded: node 2 did not acknowledge it within sync_timeout", time.Since(healed).Round(time.Millisecond))
	}
	c.kill9(0)
	c.waitActive(2)
	if got := c.holder(2, "silent-stream"); got != g.Token {
		t.Fatalf("node 2, promoted, holds silent-stream with token %d, want %d: the grant answered after the cut healed is lost", got, g.Token)
	}
}
