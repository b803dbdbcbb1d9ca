package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The bench's own handoff figure (analyzeSlots, analyzeGrants) is taken
// on the client: from the answer to the release that let a grant in (by
// token order) to the grant received. Which grants waited it can only
// guess (the acquire was sent before that answer), and it includes both
// answers' trips through the client's and the server's scheduling. The
// node's own histogram baton_handoff_seconds (GET
// /metrics) times only grants that waited in the queue: from the release
// to the grant written to its holder's connection. serverHandoffWindow
// reads it at the start and the end of the measured window, so that a
// run reports both.

// histogram is the cumulative bucket counts of a histogram of GET
// /metrics, by upper bound in seconds (+Inf included), summed over its
// series (every label set).
type histogram map[float64]float64

// readHistogram reads the histogram name (its name_bucket lines) from GET
// /metrics on addr.
func readHistogram(ctx context.Context, addr, name string) (histogram, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp)
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{op: "GET /metrics", status: resp.StatusCode, body: readSmall(resp.Body)}
	}
	h := histogram{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+"_bucket{")
		if !ok {
			continue
		}
		// The le label, the last one as the Prometheus client writes them.
		i := strings.LastIndex(rest, `le="`)
		if i < 0 || (i > 0 && rest[i-1] != ',') {
			continue
		}
		le, count, ok := strings.Cut(rest[i+len(`le="`):], `"} `)
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		n, err2 := strconv.ParseFloat(strings.TrimSpace(count), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("GET /metrics on %s: bad line %q", addr, sc.Text())
		}
		h[bound] += n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("GET /metrics on %s: no %s", addr, name)
	}
	return h, nil
}

// histogramWindow reads the histogram name from GET /metrics on addr at
// start and at end (monotonic ns, as now()) and returns a function that
// waits for the second reading and returns the buckets of the
// observations between the two (windowBuckets); nil when a reading
// failed.
func histogramWindow(ctx context.Context, addr, name string, start, end int64) func() []bucket {
	res := make(chan []bucket, 1)
	go func() {
		var hs [2]histogram
		for i, t := range []int64{start, end} {
			select {
			case <-time.After(time.Duration(t - now())):
			case <-ctx.Done():
				res <- nil
				return
			}
			h, err := readHistogram(ctx, addr, name)
			if err != nil {
				res <- nil
				return
			}
			hs[i] = h
		}
		res <- windowBuckets(hs[0], hs[1])
	}()
	return func() []bucket { return <-res }
}

// bucket is one cumulative bucket of a histogram: the observations of at
// most le seconds.
type bucket struct{ le, n float64 }

// windowBuckets returns the cumulative buckets of the observations made
// between two readings of a histogram, by bound, +Inf last.
func windowBuckets(before, after histogram) []bucket {
	var bs []bucket
	for le, n := range after {
		bs = append(bs, bucket{le, n - before[le]})
	}
	// Cumulative counts: sorted by bound they rise.
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	return bs
}

// quantile estimates the q-quantile (0 < q <= 1) of the observations in
// the cumulative buckets bs (windowBuckets), in seconds, as Prometheus's
// histogram_quantile does: within the bucket that holds it, linearly
// between the bucket's bounds (the first bucket's lower bound is 0). In
// the +Inf bucket it is the last finite bound (a lower bound, exact says
// false). ok is false without observations.
func quantile(bs []bucket, q float64) (v float64, exact, ok bool) {
	if len(bs) == 0 || bs[len(bs)-1].n <= 0 {
		return 0, false, false
	}
	rank := q * bs[len(bs)-1].n
	var lower, below float64
	for i, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				if i == 0 {
					return 0, false, false
				}
				return bs[i-1].le, false, true
			}
			return lower + (b.le-lower)*(rank-below)/(b.n-below), true, true
		}
		lower, below = b.le, b.n
	}
	return lower, false, true // (no +Inf bucket)
}

// serverHandoffWindow reads the node's handoff histogram at start and at
// end (monotonic ns, as now()) and returns a function that waits for the
// second reading and adds to r: server_handoffs (the grants that waited
// in the queue, within the window), server_handoff_le1ms_pct (the share
// of them written within 1 ms of the release) and server_handoff_p99_us
// (the upper bound of the bucket that holds the 99th percentile: a
// bound, not an exact figure; absent when it is past the last bound). Nothing is added when a reading fails or
// the target is not baton.
func serverHandoffWindow(ctx context.Context, tgt *target, start, end int64) func(r *Result) {
	if tgt.name != "baton" {
		return func(*Result) {}
	}
	window := histogramWindow(ctx, tgt.addr, "baton_handoff_seconds", start, end)
	return func(r *Result) {
		bs := window()
		if bs == nil {
			return
		}
		total := bs[len(bs)-1].n
		r.set("server_handoffs", total)
		if total == 0 {
			return
		}
		for _, b := range bs {
			if b.le == 0.001 {
				r.set("server_handoff_le1ms_pct", 100*b.n/total)
			}
		}
		for _, b := range bs {
			if b.n >= 0.99*total {
				if !math.IsInf(b.le, 1) {
					r.set("server_handoff_p99_us", b.le*1e6)
				}
				break
			}
		}
	}
}
