package main

import (
	"context"
	"math"
	"net/http"
	"time"
)

// logCounters are the node's log counters (GET /metrics) whose ratios are
// the mean batch of a write(2) and of an fsync (issue 12: group commit),
// the mean fsync and the mean gathering before one.
var logCounters = []string{
	"baton_log_writes_total", "baton_log_records_written_total",
	"baton_log_fsyncs_total", "baton_log_records_synced_total",
	"baton_log_fsync_seconds_total", "baton_log_gather_seconds_total",
	"baton_log_gather_timeouts_total",
}

// counterWindow reads the counters names from GET /metrics on addr at
// start and at end (monotonic ns, as now()) and returns a function that
// waits for the second reading and returns end minus start, by name's
// position; a counter optional[i] may be absent (a build before it): its
// difference is NaN. ok is false when a reading failed or a counter that
// is not optional was absent.
func counterWindow(ctx context.Context, addr string, names []string, optional []bool, start, end int64) func() (d []float64, ok bool) {
	res := make(chan []float64, 1)
	go func() {
		hc := &http.Client{Timeout: 5 * time.Second}
		defer hc.CloseIdleConnections()
		var vs [2][]float64
		for i, t := range []int64{start, end} {
			select {
			case <-time.After(time.Duration(t - now())):
			case <-ctx.Done():
				res <- nil
				return
			}
			for j, name := range names {
				v, err := metricValue(ctx, hc, addr, name)
				if err != nil && j < len(optional) && optional[j] {
					v = math.NaN()
				} else if err != nil {
					res <- nil
					return
				}
				vs[i] = append(vs[i], v)
			}
		}
		d := make([]float64, len(names))
		for i := range d {
			d[i] = vs[1][i] - vs[0][i]
		}
		res <- d
	}()
	return func() ([]float64, bool) {
		d := <-res
		return d, d != nil
	}
}

// logBatchWindow reads the node's log counters over the window
// (counterWindow) and returns a function that adds to r:
// log_records_per_write and, when the node fsynced, log_records_per_fsync,
// log_fsync_us (the mean fsync), log_gather_us (the mean time its
// writer waited for the records of a batch before an fsync, fsync:
// always) and log_gather_timeout_pct (the share of fsyncs whose
// gathering ran out of time before its batch was there). Nothing is
// added when a reading fails or the target is not baton.
func logBatchWindow(ctx context.Context, tgt *target, start, end int64) func(r *Result) {
	if tgt.name != "baton" {
		return func(*Result) {}
	}
	// The time counters came later than the batch counters, the
	// gatherings that ran out later still.
	window := counterWindow(ctx, tgt.addr, logCounters, []bool{4: true, 5: true, 6: true}, start, end)
	return func(r *Result) {
		d, ok := window()
		if !ok {
			return
		}
		if d[0] > 0 {
			r.set("log_records_per_write", d[1]/d[0])
		}
		if d[2] > 0 {
			r.set("log_records_per_fsync", d[3]/d[2])
			if !math.IsNaN(d[4]) {
				r.set("log_fsync_us", 1e6*d[4]/d[2])
				r.set("log_gather_us", 1e6*d[5]/d[2])
			}
			if !math.IsNaN(d[6]) {
				r.set("log_gather_timeout_pct", 100*d[6]/d[2])
			}
		}
	}
}
