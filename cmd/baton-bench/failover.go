package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The failover workload starts a cluster of --nodes baton processes itself
// (ports on 127.0.0.1, one data directory each, peers in priority order) and
// measures, --failovers times each:
//
//   - kill: from kill -9 of the active to the first grant on the new active,
//     seen by probes that try every surviving node (following 307s) every
//     5 ms with a fresh key;
//   - handoff: SIGTERM to the active while --c clients loop acquire+release
//     on their own keys; the gap is the longest time in which no client got
//     a grant, around the handoff.
//
// After each, the stopped node is restarted with its data directory and the
// cluster is given time to settle on one active again. When baton does not
// run as a cluster (serve refuses --peers, or several nodes call themselves
// active), the workload reports that it needs a cluster and prints no
// figures.

// clusterNode is one baton process of the cluster.
type clusterNode struct {
	addr string
	dir  string
	args []string
	tgt  *target // nil while down
}

// cluster is the set of nodes the failover workload runs.
type cluster struct {
	b     *bench
	nodes []*clusterNode
}

func (cl *cluster) start(n *clusterNode) error {
	t, err := startProcess("baton", cl.b.cfg.batonBin, n.args, n.addr, filepath.Join(n.dir, "baton.log"))
	if err != nil {
		return err
	}
	n.tgt = t
	return nil
}

// newCluster lays out a cluster of n nodes: a free port on 127.0.0.1 and a
// data directory under the bench's temporary directory each, --peers
// listing them in this order (the first has the highest priority),
// --sync-standbys when given, then --baton-args. It starts nothing.
func (b *bench) newCluster(n int) (*cluster, error) {
	cl := &cluster{b: b}
	var peers []string
	for i := 0; i < n; i++ {
		addr, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp(b.tmp, "node-")
		if err != nil {
			return nil, err
		}
		cl.nodes = append(cl.nodes, &clusterNode{addr: addr, dir: dir})
		peers = append(peers, "http://"+addr)
	}
	for _, n := range cl.nodes {
		n.args = []string{"serve", "--listen", n.addr, "--advertise", "http://" + n.addr,
			"--peers", strings.Join(peers, ","), "--data-dir", n.dir}
		if b.cfg.syncStandbys > 0 {
			n.args = append(n.args, "--sync-standbys", strconv.Itoa(b.cfg.syncStandbys))
		}
		n.args = append(n.args, b.cfg.batonArgs...)
	}
	return cl, nil
}

// startAll starts every node in order, each until it answers GET /healthz
// (roles come later). A serve that refuses --peers is errNeedsCluster. On
// an error, the nodes already started keep running: stopAll stops them.
func (cl *cluster) startAll() error {
	for _, n := range cl.nodes {
		if err := cl.start(n); err != nil {
			if log := tail(filepath.Join(n.dir, "baton.log"), 5); strings.Contains(log, "peers") {
				return fmt.Errorf("%w: baton serve refuses --peers: %s", errNeedsCluster, log)
			}
			return err
		}
	}
	return nil
}

// stopAll stops the nodes this bench started (SIGTERM, SIGKILL after 5 s)
// in reverse order, so that the standbys are gone before the active (the
// first node, once the cluster has settled) leaves and it has nobody to
// hand off to.
func (cl *cluster) stopAll() {
	for i := len(cl.nodes) - 1; i >= 0; i-- {
		if n := cl.nodes[i]; n.tgt != nil {
			n.tgt.stop()
			n.tgt = nil
		}
	}
}

// ready reports which nodes answer GET /readyz with 200 (the active).
func (cl *cluster) ready(hc *http.Client) []int {
	var out []int
	for i, n := range cl.nodes {
		if n.tgt == nil {
			continue
		}
		resp, err := hc.Get("http://" + n.addr + "/readyz")
		if err != nil {
			continue
		}
		closeBody(resp)
		if resp.StatusCode == http.StatusOK {
			out = append(out, i)
		}
	}
	return out
}

// settle waits until exactly one node is active and stays so for a second;
// it returns the active's index.
func (cl *cluster) settle(ctx context.Context, hc *http.Client, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	stableSince, last := time.Time{}, -1
	var seen []int
	for time.Now().Before(deadline) && ctx.Err() == nil {
		seen = cl.ready(hc)
		if len(seen) == 1 && seen[0] == last {
			if time.Since(stableSince) >= time.Second {
				return last, nil
			}
		} else if len(seen) == 1 {
			last, stableSince = seen[0], time.Now()
		} else {
			last = -1
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) > 1 {
		return -1, fmt.Errorf("%w: %d nodes call themselves active (GET /readyz 200 on %v): baton does not run as a cluster yet", errNeedsCluster, len(seen), seen)
	}
	return -1, fmt.Errorf("no single active node after %v (active: %v)", timeout, seen)
}

// failover runs the failover workload.
func (b *bench) failover(ctx context.Context) error {
	cfg := b.cfg
	if cfg.addr != "" {
		return fmt.Errorf("%w: failover starts its own nodes (kill -9 included); it does not take --addr", errNeedsCluster)
	}
	if cfg.nodes < 2 {
		return fmt.Errorf("%w: --nodes must be at least 2", errNeedsCluster)
	}
	cl, err := b.newCluster(cfg.nodes)
	if err != nil {
		return err
	}
	defer cl.stopAll()
	if err := cl.startAll(); err != nil {
		return err
	}
	hc := &http.Client{Timeout: time.Second, Transport: newTransport(transportOptions{proto: "h1"}, 4)}
	defer hc.CloseIdleConnections()
	if _, err := cl.settle(ctx, hc, 30*time.Second); err != nil {
		return err
	}

	r := &Result{Workload: "failover", Proto: cfg.proto, Client: "plain", Target: "baton", C: cfg.c}
	var kills, gaps []int64
	var grants, loadTime float64
	for i := 1; i <= cfg.failovers && ctx.Err() == nil; i++ {
		b.prog.begin(fmt.Sprintf("failover kill -9 %d/%d", i, cfg.failovers))
		d, err := cl.killOnce(ctx, hc, i)
		b.prog.end()
		if err != nil {
			return fmt.Errorf("kill -9 #%d: %w", i, err)
		}
		kills = append(kills, d)
		fmt.Fprintf(b.stderr, "failover: kill -9 #%d: first grant after %.1f ms\n", i, float64(d)/1e6)

		b.prog.begin(fmt.Sprintf("failover handoff %d/%d", i, cfg.failovers))
		gap, g, secs, err := cl.handoffOnce(ctx, hc, i)
		b.prog.end()
		if err != nil {
			return fmt.Errorf("graceful handoff #%d: %w", i, err)
		}
		gaps = append(gaps, gap)
		grants += g
		loadTime += secs
		fmt.Fprintf(b.stderr, "failover: handoff #%d: longest gap without a grant %.1f ms\n", i, float64(gap)/1e6)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if loadTime > 0 {
		r.OpsS = grants / loadTime
	}
	r.P50, r.P99, r.P999 = percentiles(kills)
	g50, g99, _ := percentiles(gaps)
	r.set("kills", float64(len(kills)))
	r.set("handoffs", float64(len(gaps)))
	r.set("handoff_gap_p50_us", g50)
	r.set("handoff_gap_p99_us", g99)
	r.set("load1", loadAvg1())
	r.Run = fmt.Sprintf("%d/%d", len(kills), cfg.failovers)
	fmt.Fprintln(b.stdout, r)
	fmt.Fprintf(b.stdout, "\n== failover, %d nodes: first grant after kill -9 of the active p50 %s p99 %s; graceful handoff gap p50 %s p99 %s (load %.0f grants/s)\n\n",
		cfg.nodes, us(r.P50), us(r.P99), us(g50), us(g99), r.OpsS)
	return nil
}

// restart brings node i back and waits for one active again.
func (cl *cluster) restart(ctx context.Context, hc *http.Client, i int) error {
	if err := cl.start(cl.nodes[i]); err != nil {
		return err
	}
	_, err := cl.settle(ctx, hc, 60*time.Second)
	return err
}

// probe tries to acquire key on every live node but skip (following 307s)
// until one grants it; it returns when the grant is received.
func (cl *cluster) probe(ctx context.Context, skip int, key string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	var ls []*plainLocker
	set := newPlainSet("127.0.0.1:1", transportOptions{proto: "h1", conns: 1}, 1)
	defer set.Close()
	for i, n := range cl.nodes {
		if i != skip {
			ls = append(ls, &plainLocker{hc: &http.Client{Transport: set.transports[0], CheckRedirect: followLoopbackOnly, Timeout: 500 * time.Millisecond},
				base: "http://" + n.addr + "/locks/", accept: "application/json"})
		}
	}
	for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
		l := ls[n%len(ls)]
		if _, err := l.Acquire(ctx, key, 5, 0.2); err == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("no grant within %v", bound)
}

// killOnce kills the active with SIGKILL and measures the time to the first
// grant elsewhere; then restarts the node.
func (cl *cluster) killOnce(ctx context.Context, hc *http.Client, run int) (int64, error) {
	act, err := cl.settle(ctx, hc, 30*time.Second)
	if err != nil {
		return 0, err
	}
	n := cl.nodes[act]
	t0 := now()
	if err := syscall.Kill(n.tgt.pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	n.tgt.stop() // reaps it
	n.tgt = nil
	err = cl.probe(ctx, act, "failover/kill/"+strconv.Itoa(run)+"/"+strconv.FormatInt(t0, 36), 30*time.Second)
	d := now() - t0
	if err != nil {
		return 0, err
	}
	return d, cl.restart(ctx, hc, act)
}

// handoffOnce sends SIGTERM to the active while clients loop on their own
// keys over all nodes, and returns the longest gap between grants around
// it, the grants made and the seconds the load ran.
func (cl *cluster) handoffOnce(ctx context.Context, hc *http.Client, run int) (gap int64, grants, secs float64, err error) {
	act, err := cl.settle(ctx, hc, 30*time.Second)
	if err != nil {
		return 0, 0, 0, err
	}
	c := cl.b.cfg.c
	set := newPlainSet("127.0.0.1:1", transportOptions{proto: cl.b.cfg.proto, conns: 1}, c)
	defer set.Close()
	var stop atomic.Bool
	var mu sync.Mutex
	var times []int64
	var wg sync.WaitGroup
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := now()
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var ls []*plainLocker
			for _, n := range cl.nodes {
				ls = append(ls, &plainLocker{hc: &http.Client{Transport: set.transports[0], CheckRedirect: followLoopbackOnly, Timeout: 2 * time.Second},
					base: "http://" + n.addr + "/locks/", accept: "application/json"})
			}
			key := fmt.Sprintf("failover/handoff/%d/%d", run, i)
			node := act
			var mine []int64
			for n := 0; n < 10_000_000 && !stop.Load() && lctx.Err() == nil; n++ {
				l := ls[node]
				tok, err := l.Acquire(lctx, key, 5, 1)
				if err != nil {
					node = (node + 1) % len(ls)
					time.Sleep(2 * time.Millisecond)
					continue
				}
				mine = append(mine, now())
				for k := 0; k < 5; k++ {
					if l.Release(lctx, key, tok) == nil {
						break
					}
					node = (node + 1) % len(ls)
					l = ls[node]
				}
			}
			mu.Lock()
			times = append(times, mine...)
			mu.Unlock()
		}(i)
	}
	time.Sleep(time.Second)
	t0 := now()
	n := cl.nodes[act]
	syscall.Kill(n.tgt.pid, syscall.SIGTERM)
	n.tgt.stop() // waits for the exit (SIGKILL after 5 s)
	n.tgt = nil
	// Keep the load on until grants flow again for a second.
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	end := now()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	prev := t0
	for _, t := range times {
		if t < t0 {
			prev = t
			continue
		}
		gap = max(gap, t-prev)
		prev = t
	}
	if len(times) == 0 || times[len(times)-1] < t0 {
		return 0, 0, 0, errors.New("no grant after the handoff")
	}
	if err := cl.restart(ctx, hc, act); err != nil {
		return 0, 0, 0, err
	}
	return gap, float64(len(times)), float64(end-start) / 1e9, nil
}
