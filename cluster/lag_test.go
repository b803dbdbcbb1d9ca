package cluster

import (
	"fmt"
	"testing"
	"time"
)

// TestLagHistogramCoversHeldStream: the active's lag histogram of a
// standby counts the acknowledgements it reads, and one that covers
// records the standby could not receive for a while (its stream held
// back, as a cut link does, while its polls go on) counts a lag at least
// as long as the records waited from their append to the stream's
// release.
func TestLagHistogramCoversHeldStream(t *testing.T) {
	c := newMemCluster(t, 2)
	c.start(0, 1)
	c.waitActive(0)
	standby := c.nodes[1].url
	lagOf := func() StandbyLag {
		st := c.nodes[0].node.ReplicationStats()
		if len(st.Lags) != 1 || st.Lags[0].URL != standby {
			t.Fatalf("lags %+v: want node 1's (%s) alone", st.Lags, standby)
		}
		return st.Lags[0]
	}
	// Acknowledgements of the grants below, as they come.
	for k := range 5 {
		c.grant(0, fmt.Sprint("before-", k))
	}
	c.waitFor("node 1's acknowledgements counted", func() bool { return lagOf().Count > 0 })

	before := lagOf()
	// A read of the stream already under way when the hold begins still
	// returns what comes first: grants until some are held.
	var held time.Duration
	for attempt := 0; held == 0; attempt++ {
		if attempt == 5 {
			t.Fatal("the standby received every grant made while its stream was held")
		}
		c.links.holdStream(1, true)
		for k := range 50 {
			c.grant(0, fmt.Sprintf("held-%d-%d", attempt, k))
		}
		appended := time.Now() // every record was appended before its grant came back
		time.Sleep(250 * time.Millisecond)
		last, _ := c.nodes[0].node.tail.position()
		got, _ := c.nodes[1].node.tail.position()
		if got < last {
			held = time.Since(appended)
		}
		c.links.holdStream(1, false)
	}

	// The bucket below the shortest lag the record can have had.
	bounds := LagBounds()
	below := -1
	for i, b := range bounds {
		if b < held.Seconds() {
			below = i
		}
	}
	if below < 0 {
		t.Fatalf("held %v, below every bucket %v", held, bounds)
	}
	c.waitFor(fmt.Sprintf("an acknowledgement with a lag over %vs (the stream was held %v)", bounds[below], held), func() bool {
		l := lagOf()
		return l.Count-l.Buckets[below] > before.Count-before.Buckets[below]
	})
	if l := lagOf(); l.Sum-before.Sum < held {
		t.Errorf("the lags' sum rose by %v, less than the %v the record waited", l.Sum-before.Sum, held)
	}
	// A standby's own node keeps no lag of the active's: it measured none.
	if st := c.nodes[1].node.ReplicationStats(); len(st.Lags) != 1 || st.Lags[0].Count != 0 {
		t.Errorf("standby's lags %+v, want the active's, empty", st.Lags)
	}
}

// TestLagHistogramBuckets: a lag counts in the first bucket whose bound
// is not below it; one past the last bound only in Count; a negative one
// (the wall clock stepped back) as 0.
func TestLagHistogramBuckets(t *testing.T) {
	n := &Node{cfg: Config{Peers: []string{"http://a", "http://b"}}, lags: map[string]*lagHist{"http://b": new(lagHist)}}
	h := n.lags["http://b"]
	for _, d := range []time.Duration{-time.Second, 0, time.Millisecond, time.Millisecond + 1, 11 * time.Second} {
		h.observe(d)
	}
	st := n.lagStats()
	if len(st) != 1 || st[0].URL != "http://b" {
		t.Fatalf("lagStats: %+v", st)
	}
	l := st[0]
	at := func(bound float64) uint64 {
		for i, b := range LagBounds() {
			if b == bound {
				return l.Buckets[i]
			}
		}
		t.Fatalf("no bucket bound %v", bound)
		return 0
	}
	if got := at(0.00005); got != 2 {
		t.Errorf("le 50µs: %d, want 2 (the negative lag and 0)", got)
	}
	if got := at(0.001); got != 3 {
		t.Errorf("le 1ms: %d, want 3 (1 ms is in its bound's bucket)", got)
	}
	if got := at(0.0015); got != 4 {
		t.Errorf("le 1.5ms: %d, want 4", got)
	}
	if got := at(10); got != 4 || l.Count != 5 {
		t.Errorf("le 10s: %d, count %d; want 4 and 5 (11 s is past the last bound)", got, l.Count)
	}
	if want := 2*time.Millisecond + 1 + 11*time.Second; l.Sum != want {
		t.Errorf("sum %v, want %v", l.Sum, want)
	}
}

// BenchmarkObserveLag is what an acknowledgement that covers new records
// adds on the active: the append time of the oldest of them from the tail,
// a clock reading, the histogram's bucket.
//
//	go test -run '^$' -bench ObserveLag -benchmem ./cluster
func BenchmarkObserveLag(b *testing.B) {
	n := &Node{tail: newTail(DefaultTailBytes)}
	for i := uint64(1); i <= 4096; i++ {
		n.tail.add(i, []byte("a record of some bytes"))
	}
	h := new(lagHist)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i = i%4096 + 1
		n.observeLag(h, i)
	}
}

// TestLagOfAGoneStandbyStaysReported: a standby whose stream ended (it
// crashed) is still in the active's ReplicationStats, at its last
// acknowledgement, its lag in records and seconds growing with the
// active's changes, instead of vanishing from the lag gauges while it is
// most behind (seen by hand: a standby killed -9 left no
// baton_replication_lag_* series on the active); its next stream
// replaces the entry.
func TestLagOfAGoneStandbyStaysReported(t *testing.T) {
	c := newMemCluster(t, 2)
	c.start(0, 1)
	c.waitActive(0)
	standby := c.nodes[1].url
	of := func() (StandbyStats, int) {
		var s StandbyStats
		n := 0
		for _, sb := range c.nodes[0].node.ReplicationStats().Standbys {
			if sb.URL == standby {
				s, n = sb, n+1
			}
		}
		return s, n
	}
	c.grant(0, "before")
	last, _ := c.nodes[0].node.tail.position()
	c.waitFor("node 1 acknowledges every record", func() bool { s, n := of(); return n == 1 && s.Acked == last })

	c.crash(1)
	for k := range 3 {
		c.grant(0, fmt.Sprint("after-", k))
	}
	c.waitFor("node 1's stream ended, its lag still reported", func() bool {
		s, n := of()
		return n == 1 && s.Gone && s.Acked == last && s.LagRecords >= 3 && s.LagSeconds > 0
	})

	c.open(1)
	c.start(1)
	c.waitActive(0)
	now, _ := c.nodes[0].node.tail.position()
	c.waitFor("node 1 streams again: one entry, not gone, caught up", func() bool {
		s, n := of()
		return n == 1 && !s.Gone && s.Acked == now && s.LagRecords == 0
	})
}
