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

// handoffHist is the cumulative bucket counts of baton_handoff_seconds,
// by upper bound in seconds (+Inf included).
type handoffHist map[float64]float64

// readHandoffHist reads baton_handoff_seconds from GET /metrics on addr.
func readHandoffHist(ctx context.Context, addr string) (handoffHist, error) {
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
	h := handoffHist{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `baton_handoff_seconds_bucket{le="`)
		if !ok {
			continue
		}
		le, count, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		n, err2 := strconv.ParseFloat(strings.TrimSpace(count), 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("GET /metrics on %s: bad line %q", addr, sc.Text())
		}
		h[bound] = n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("GET /metrics on %s: no baton_handoff_seconds", addr)
	}
	return h, nil
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
	res := make(chan [2]handoffHist, 1)
	go func() {
		var hs [2]handoffHist
		for i, t := range []int64{start, end} {
			select {
			case <-time.After(time.Duration(t - now())):
			case <-ctx.Done():
				res <- [2]handoffHist{}
				return
			}
			h, err := readHandoffHist(ctx, tgt.addr)
			if err != nil {
				res <- [2]handoffHist{}
				return
			}
			hs[i] = h
		}
		res <- hs
	}()
	return func(r *Result) {
		hs := <-res
		if hs[0] == nil || hs[1] == nil {
			return
		}
		type bucket struct{ le, n float64 }
		var bs []bucket
		for le, n := range hs[1] {
			bs = append(bs, bucket{le, n - hs[0][le]})
		}
		// Cumulative counts: sorted by bound they rise.
		slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
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
