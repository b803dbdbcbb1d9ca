package cluster

import (
	"testing"
	"time"
)

// TestOwnStallIsNoPeersSilence: a node whose role loop has not run for a
// while, less than the failover timeout (the process stopped or starved),
// does not count that span as the silence of a peer it last heard just
// before: TestHistoryChaos CHAOS_SEED=3154 (every node starved by random
// SIGSTOPs of up to 500 ms, CHAOS_KINDS without the pauses): node 1,
// restarted by a kill-all, began to follow the elected node 0 at
// 20:56:27.673, was stopped from 27.719 to 28.148 (429 ms: no gap logged)
// and at 28.149, 1 ms after it resumed and before any poll could
// answer, took node 0's last answer, about 700 ms old, for a dead
// active's silence and promoted itself beside it (likely so did node 2
// of seed 3149, whose active then dropped an answered grant stepping
// down; that run did not log the stops). A
// peer not heard for a failover timeout of this node's running time is
// still dead.
func TestOwnStallIsNoPeersSilence(t *testing.T) {
	const ft, hb = 600 * time.Millisecond, 100 * time.Millisecond
	now := time.Now()
	n := &Node{cfg: Config{FailoverTimeout: ft, Heartbeat: hb}, base: now.Add(-time.Minute)}
	// The role loop's last tick was 500 ms ago: it has not run since.
	n.ticked.Store(int64(now.Add(-500 * time.Millisecond).Sub(n.base)))
	p := &peer{url: "http://127.0.0.1:1", heard: true, contact: now.Add(-700 * time.Millisecond)}
	if !n.live(p, now) || !n.recent(p, now) {
		t.Errorf("a peer last heard 700 ms ago, 200 ms before this node stalled for 500 ms: live %v, recent %v; want both (silent 300 ms while this node ran)",
			n.live(p, now), n.recent(p, now))
	}
	p.contact = now.Add(-1200 * time.Millisecond)
	if n.live(p, now) || n.recent(p, now) {
		t.Errorf("a peer last heard 1.2 s ago, 700 ms before this node stalled for 500 ms: live %v, recent %v; want neither",
			n.live(p, now), n.recent(p, now))
	}
	// The stall over (the loop ticked at its end and recorded it): the
	// same span still is no peer's silence, and a tick on time none.
	n.stallFrom, n.stallTo = now.Add(-400*time.Millisecond), now.Add(-50*time.Millisecond)
	n.ticked.Store(int64(now.Add(-50 * time.Millisecond).Sub(n.base)))
	p.contact = now.Add(-700 * time.Millisecond)
	if !n.live(p, now) {
		t.Errorf("a peer last heard 700 ms ago, 300 ms before a 350 ms stall of this node: not live, want live")
	}
	p.contact = now.Add(-650 * time.Millisecond)
	n.stallFrom, n.stallTo = time.Time{}, time.Time{}
	if n.live(p, now) {
		t.Errorf("a peer last heard 650 ms ago, this node running throughout: live, want dead")
	}
}
