package main

import "context"

// Standby lag under load (issue 13), as the active measures it: its
// histogram baton_replication_ack_lag_seconds (GET /metrics) counts, at
// each acknowledgement it reads from a standby that covers records not
// acknowledged before, how long the oldest of them waited since the active
// appended it to its log. standbyLagWindow reads it at the start and the
// end of the measured window, as serverHandoffWindow does
// baton_handoff_seconds: two scrapes of the active per run, nothing during
// the window, so the figure costs the system under test nothing the
// reference runs do not pay. With sync_standbys 0 a standby acknowledges
// at most every 10 ms, which the figure then includes.

// lagMetric is the active's lag histogram, every standby's series summed.
const lagMetric = "baton_replication_ack_lag_seconds"

// standbyLagWindow reads the active's lag histogram at start and at end
// (monotonic ns, as now()) and returns a function that waits for the
// second reading and adds to r: standby_lag_acks (the acknowledgements
// that covered new records within the window, every standby's) and, when
// there were some, standby_lag_p50_ms and standby_lag_p99_ms (estimated
// within their buckets, see quantile; past the last bound, 10 s, that
// bound). Nothing is added when a reading fails or the target has no
// standbys.
func standbyLagWindow(ctx context.Context, tgt *target, start, end int64) func(r *Result) {
	if tgt.name != "baton" || len(tgt.standbys) == 0 {
		return func(*Result) {}
	}
	window := histogramWindow(ctx, tgt.addr, lagMetric, start, end)
	return func(r *Result) {
		setLag(r, window())
	}
}

// setLag adds the lag figures of the window's buckets bs (nil: none) to r.
func setLag(r *Result, bs []bucket) {
	if bs == nil {
		return
	}
	r.set("standby_lag_acks", bs[len(bs)-1].n)
	p50, _, ok := quantile(bs, 0.50)
	if !ok {
		return
	}
	p99, _, _ := quantile(bs, 0.99)
	r.set("standby_lag_p50_ms", p50*1e3)
	r.set("standby_lag_p99_ms", p99*1e3)
}
