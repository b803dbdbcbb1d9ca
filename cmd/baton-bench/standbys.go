package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// With --standbys N (N > 0), every baton run starts a cluster of 1+N baton
// processes (newCluster, as the failover workload does), waits until the
// first node is the active and every other node is a standby that has
// applied the active's snapshot and follows its stream, and runs the
// workload against the active alone. The standbys replicate everything the
// workload does; the figures therefore include the cost of replication on
// the grant path (issue 7: at least 0.75 of null and floor with one
// standby). After the workload, a probe lock taken on the active must show
// on every standby (replicationLag) before the nodes are stopped.

// clusterStatus is the part of a node's GET /_cluster/status answer (the
// peers' heartbeat poll, cluster.Status) that tells its role.
type clusterStatus struct {
	URL      string `json:"url"`
	Role     string `json:"role"`
	Active   string `json:"active"`
	HasState bool   `json:"has_state"`
}

// clusterSecret is the cluster_secret the spawned nodes get from
// --baton-args or the environment, for the bench's own status polls.
func clusterSecret(batonArgs []string) string {
	secret := os.Getenv("BATON_CLUSTER_SECRET")
	for i, a := range batonArgs {
		if v, ok := strings.CutPrefix(a, "--cluster-secret="); ok {
			secret = v
		} else if a == "--cluster-secret" && i+1 < len(batonArgs) {
			secret = batonArgs[i+1]
		}
	}
	return secret
}

// fetchClusterStatus reads GET /_cluster/status of the node at addr.
func fetchClusterStatus(ctx context.Context, hc *http.Client, addr, secret string) (clusterStatus, error) {
	var st clusterStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/_cluster/status", nil)
	if err != nil {
		return st, err
	}
	if secret != "" {
		req.Header.Set("X-Baton-Cluster-Secret", secret)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer closeBody(resp)
	if resp.StatusCode != http.StatusOK {
		return st, &statusError{op: "GET /_cluster/status", status: resp.StatusCode, body: readSmall(resp.Body)}
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// waitReplicating waits until node 0 answers GET /readyz 200 and every
// other node reports role standby, node 0 as its active and has_state (it
// has applied the active's snapshot: cluster.Node sets it when the stream's
// snapshot-end frame is applied). A cluster started from nothing elects
// its first active after about three failover timeouts, and if another
// node won that race, node 0 (the highest priority) takes the role back by
// a handoff once it has synced.
func (cl *cluster) waitReplicating(ctx context.Context, hc *http.Client, timeout time.Duration) error {
	secret := clusterSecret(cl.b.cfg.batonArgs)
	active := "http://" + cl.nodes[0].addr
	deadline := time.Now().Add(timeout)
	why := "not started"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		why = ""
		if r := cl.ready(hc); len(r) != 1 || r[0] != 0 {
			why = fmt.Sprintf("nodes answering GET /readyz 200: %v, want [0]", r)
		}
		for i, n := range cl.nodes[1:] {
			if why != "" {
				break
			}
			st, err := fetchClusterStatus(ctx, hc, n.addr, secret)
			switch {
			case err != nil:
				why = fmt.Sprintf("standby %d: %v", i+1, err)
			case st.Role != "standby" || st.Active != active || !st.HasState:
				why = fmt.Sprintf("standby %d: role=%s active=%s has_state=%v, want standby following %s with its state", i+1, st.Role, st.Active, st.HasState, active)
			}
		}
		if why == "" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the cluster did not settle with node 0 active and %d standbys replicating within %v: %s", len(cl.nodes)-1, timeout, why)
}

// startReplicated starts the cluster of one active and cfg.standbys
// standbys for one run, and returns the active as the run's target; its
// stop stops every node.
func (b *bench) startReplicated(ctx context.Context) (*target, error) {
	cl, err := b.newCluster(1 + b.cfg.standbys)
	if err != nil {
		return nil, err
	}
	if err := cl.startAll(); err != nil {
		cl.stopAll()
		return nil, err
	}
	hc := &http.Client{Timeout: time.Second, Transport: newTransport(transportOptions{proto: "h1"}, 4)}
	defer hc.CloseIdleConnections()
	if err := cl.waitReplicating(ctx, hc, 60*time.Second); err != nil {
		cl.stopAll()
		return nil, err
	}
	act := cl.nodes[0].tgt
	t := &target{name: "baton", addr: act.addr, pid: act.pid, logPath: act.logPath, owned: true, stop: cl.stopAll}
	for _, n := range cl.nodes[1:] {
		t.standbys = append(t.standbys, n.tgt)
	}
	return t, nil
}

// metricValue reads one unlabelled sample of GET /metrics on addr.
func metricValue(ctx context.Context, hc *http.Client, addr, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp)
	if resp.StatusCode != http.StatusOK {
		return 0, &statusError{op: "GET /metrics", status: resp.StatusCode, body: readSmall(resp.Body)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("GET /metrics on %s: no %s", addr, name)
}

// probeWait bounds the wait for a standby to show the replication probe.
var probeWait = 5 * time.Second

// replicationLag checks, after a run, that every standby still receives
// the active's stream: it takes a probe lock on the active and waits until
// each standby's baton_locks_held equals the active's (the probe included),
// then releases the probe. It returns the longest time, over the standbys,
// from the probe's grant to the first scrape that showed it: an upper
// bound of the replication lag, scrapes included.
func replicationLag(ctx context.Context, tgt *target, key string) (time.Duration, error) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: newTransport(transportOptions{proto: "h1"}, 4)}
	defer hc.CloseIdleConnections()
	l := &plainLocker{hc: hc, base: "http://" + tgt.addr + "/locks/", accept: "application/json"}
	tok, err := l.Acquire(ctx, key, 60, 5)
	if err != nil {
		return 0, fmt.Errorf("replication probe: acquire on the active: %w", err)
	}
	t0 := time.Now()
	defer l.Release(context.WithoutCancel(ctx), key, tok)
	want, err := metricValue(ctx, hc, tgt.addr, "baton_locks_held")
	if err != nil {
		return 0, fmt.Errorf("replication probe: %w", err)
	}
	var lag time.Duration
	for i, s := range tgt.standbys {
		deadline := time.Now().Add(probeWait)
		var got float64
		for {
			got, err = metricValue(ctx, hc, s.addr, "baton_locks_held")
			if err == nil && got == want {
				lag = max(lag, time.Since(t0))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				if err == nil {
					err = fmt.Errorf("baton_locks_held %v, the active's %v", got, want)
				}
				return 0, fmt.Errorf("replication probe: standby %d (%s) did not show the probe lock within %v: %w", i+1, s.addr, probeWait, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return lag, nil
}

// errStandbysAddr: --standbys starts its own cluster.
var errStandbysAddr = errors.New("--standbys starts its own cluster of baton processes; it does not take --addr")
