package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Standby lag under load (issue 13): with --standbys, while a workload's
// measured window runs, a sampler per standby reads the active's
// last_token (GET /cluster) every lagEvery and then polls the standby's
// GET /cluster until its last_token has reached it. One sample is the time
// from the active's answer to the standby's first answer at or past it:
// how far behind the active the standby's replica is, polls included (a
// standby that is current costs one poll, about a round trip). The run
// reports its p50 and p99 (standby_lag_p50_ms, standby_lag_p99_ms) over
// every standby's samples.

// lagEvery is the interval between two lag samples of one standby.
var lagEvery = 20 * time.Millisecond

// lagBound bounds one sample: a standby this far behind counts as this far.
var lagBound = 5 * time.Second

// clusterView is the part of GET /cluster the lag sampler reads.
type clusterView struct {
	LastToken uint64 `json:"last_token"`
}

func fetchLastToken(ctx context.Context, hc *http.Client, addr string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/cluster", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp)
	if resp.StatusCode != http.StatusOK {
		return 0, &statusError{op: "GET /cluster", status: resp.StatusCode, body: readSmall(resp.Body)}
	}
	var v clusterView
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.LastToken, err
}

// sampleLag samples the lag of every standby of tgt between the
// shared-clock instants start and end (see now). The returned function
// waits for the samplers to end and returns the samples in nanoseconds
// (none without standbys, or when ctx ended first).
func sampleLag(ctx context.Context, tgt *target, start, end int64) func() []int64 {
	if len(tgt.standbys) == 0 {
		return func() []int64 { return nil }
	}
	var mu sync.Mutex
	var samples []int64
	var wg sync.WaitGroup
	for _, s := range tgt.standbys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: time.Second, Transport: newTransport(transportOptions{proto: "h1"}, 2)}
			defer hc.CloseIdleConnections()
			select {
			case <-time.After(time.Duration(start - now())):
			case <-ctx.Done():
				return
			}
			tick := time.NewTicker(lagEvery)
			defer tick.Stop()
			for now() < end && ctx.Err() == nil {
				if lag, ok := lagOnce(ctx, hc, tgt.addr, s.addr); ok {
					mu.Lock()
					samples = append(samples, int64(lag))
					mu.Unlock()
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		}()
	}
	return func() []int64 {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return samples
	}
}

// lagOnce takes one lag sample of the standby at addr behind the active
// at active; ok is false when either could not be read.
func lagOnce(ctx context.Context, hc *http.Client, active, standby string) (time.Duration, bool) {
	want, err := fetchLastToken(ctx, hc, active)
	if err != nil {
		return 0, false
	}
	t0 := time.Now()
	for {
		got, err := fetchLastToken(ctx, hc, standby)
		if err != nil {
			return 0, false
		}
		lag := time.Since(t0)
		if got >= want || lag >= lagBound {
			return min(lag, lagBound), true
		}
		if ctx.Err() != nil {
			return 0, false
		}
	}
}
