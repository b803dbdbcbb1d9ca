package cluster

import (
	"slices"
	"sync/atomic"
	"time"
)

// The replication lag as the active measures it: at each acknowledgement
// it reads (serveAck) that covers records the standby had not
// acknowledged yet, the time since this node appended the oldest of them
// to its log (tail.appendedAt), that is how long that record waited for
// that standby. One histogram per other peer (Node.lags, by URL: as many
// as the peers list has), kept for the node's life, so that its counts
// only rise; ReplicationStats returns them (StandbyLag).
//
// The figure includes the standby's pacing of its acknowledgements: with
// sync_standbys 0 it acknowledges at most every ackEvery (10 ms), and the
// last records of a burst with the idle stream's next heartbeat, so the
// lag measured then is mostly that pacing; with sync_standbys N > 0 it
// acknowledges at the end of every read of its stream.

// lagBounds are the upper bounds of the lag histograms' buckets (the
// last bucket, past them, has none): fine from 50 µs to 10 ms, where a
// standby on the same network acknowledges, then coarser up to 10 s.
var lagBounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 150 * time.Microsecond, 200 * time.Microsecond,
	300 * time.Microsecond, 400 * time.Microsecond, 500 * time.Microsecond, 700 * time.Microsecond,
	time.Millisecond, 1500 * time.Microsecond, 2 * time.Millisecond, 3 * time.Millisecond,
	4 * time.Millisecond, 5 * time.Millisecond, 7 * time.Millisecond, 10 * time.Millisecond,
	15 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond,
	70 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
}

// LagBounds returns the upper bounds, in seconds, of the buckets of the
// replication lag histograms (StandbyLag.Buckets), in increasing order.
func LagBounds() []float64 {
	b := make([]float64, len(lagBounds))
	for i, d := range lagBounds {
		b[i] = d.Seconds()
	}
	return b
}

// lagHist is one standby's lag histogram: counts[i] lags of at most
// lagBounds[i] (and more than the bound before), counts[len(lagBounds)]
// those past the last bound; sum, the lags' sum in ns. Observed without a
// lock or an allocation, by the goroutine reading the standby's
// acknowledgements.
type lagHist struct {
	counts [len(lagBounds) + 1]atomic.Uint64
	sum    atomic.Int64
}

func (h *lagHist) observe(lag time.Duration) {
	lag = max(lag, 0) // the wall clock stepped back
	i, _ := slices.BinarySearch(lagBounds[:], lag)
	h.counts[i].Add(1)
	h.sum.Add(int64(lag))
}

// observeLag records in h the lag of the record at index first, the
// oldest an acknowledgement newly covered (Node.ack; 0: none, nothing is
// recorded): the time since this node appended it to its log. For a
// record the tail no longer holds (a standby more than tail_bytes
// behind) it is the time since the oldest one it holds was: less.
func (n *Node) observeLag(h *lagHist, first uint64) {
	if h == nil || first == 0 {
		return
	}
	if at, ok := n.tail.appendedAt(first); ok {
		h.observe(time.Duration(time.Now().UnixNano() - at))
	}
}

// StandbyLag is the histogram of one standby's replication lag as its
// active measured it, over this node's life: at each acknowledgement read
// that covered records the standby had not acknowledged yet, how long the
// oldest of them had waited since the active appended it to its log.
type StandbyLag struct {
	URL string // the standby's URL, as Config.Peers has it
	// Buckets[i] counts the lags of at most LagBounds()[i] seconds
	// (cumulative, as Prometheus's buckets); Count every lag, Sum their
	// sum. Read one bucket after the other while lags are recorded, they
	// may be an acknowledgement or two apart; Count is their total.
	Buckets []uint64
	Count   uint64
	Sum     time.Duration
}

// lagStats returns the lag histogram of every other peer, in the order of
// Config.Peers.
func (n *Node) lagStats() []StandbyLag {
	var out []StandbyLag
	for _, u := range n.cfg.Peers {
		h := n.lags[u]
		if h == nil {
			continue
		}
		s := StandbyLag{URL: u, Buckets: make([]uint64, len(lagBounds)), Sum: time.Duration(h.sum.Load())}
		for i := range h.counts {
			s.Count += h.counts[i].Load()
			if i < len(lagBounds) {
				s.Buckets[i] = s.Count
			}
		}
		out = append(out, s)
	}
	return out
}
