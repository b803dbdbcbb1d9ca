package cluster_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/history"
)

// inject applies one fault of the nemesis and repairs it, and returns its
// name with the node it hit, when it began, and the node a cut or
// cut-standby cut off from its clients and peers (-1 for other faults). kill, pause and cut hit the active for
// 2*failoverTimeout (a failover each); kill-standby, pause-standby and
// cut-standby hit a standby drawn by rng for as long; long-pause stops the
// active for 5*failoverTimeout while the clients go on; cut-link holds
// back the replication stream between the active and one standby (both
// ways; every other link stays up) for 2*failoverTimeout, then drops it;
// kill-all kills every node with SIGKILL and starts them again together;
// handoff ends the active with SIGINT and starts it again; stop-all ends
// every node with SIGINT and starts them again one after another;
// sigint-all sends SIGINT to every node at once and starts them together;
// full-disk fills the file system of the active's data_dir (each node's
// is a tmpfs of its own in a run that draws it: mountDataDirs) for
// 2*failoverTimeout from the first write that fails (of its log or its
// token high-water mark; spill writes through the active until one does),
// then frees it;
// full-disk-standby a standby's;
// old-copy copies the active's data_dir (stopped meanwhile: a crash-
// consistent copy, as a VM or volume snapshot is), lets it serve on for
// 2*failoverTimeout, kills it with SIGKILL and starts it again a failover
// timeout later on the old copy (a node restored from a backup, a disk
// rolled back); old-copy-standby a standby;
// pause-edge stops the active for a time drawn around failoverTimeout
// (0.75 to 1.25 of it: a failover or none); kill-pause-next kills the
// active with SIGKILL and, while the successor (the live standby of
// highest priority) waits out failoverTimeout to take over, stops that
// successor for failoverTimeout, then starts the killed node again;
// drop-out, drop-in, fw-cut-link, cut-standbys and fw-isolate cut real
// links with iptables (firewall_test.go, a run with nemesis.firewall);
// pause-under and pause-over stop the active for 0.85 and 1.15 of
// failoverTimeout; handoff-kill sends the active SIGINT and kills its
// successor with SIGKILL in the middle of the handoff, handoff-kill-old
// the active itself; drop-kill and cut-kill cut what the active sends
// to its successor (or both ways) and kill -9 the active while the cut
// holds; long-cut-link and long-isolate cut the active from one standby
// or from every peer for 16 s. The
// history runs take CHAOS_NODES nodes (default 3), draw from CHAOS_KINDS
// when it is set, and give CHAOS_STRICT's faults no window (handoff,
// stop-all and sigint-all never get one); CHAOS_FLAGS adds flags to every
// node (runHistory).
func (c *testCluster) inject(f string, rng *rand.Rand) (string, time.Time, int) {
	c.t.Helper()
	// The active every node agrees on: a node that still says it is the
	// active after a fault (or already does, alone) is not the one the
	// fault is meant for, nor a standby to hit as one.
	all := make([]int, len(c.nodes))
	for i := range all {
		all[i] = i
	}
	active := c.waitActive(-1, all...)
	standby := active
	if strings.Contains(f, "standby") || f == "cut-link" || f == "drop-out" || f == "drop-in" || f == "fw-cut-link" || f == "long-cut-link" {
		standby = (active + 1 + rng.IntN(len(c.nodes)-1)) % len(c.nodes)
	}
	if c.fw == nil && slices.Contains(firewallFaults, f) {
		c.t.Fatalf("fault %q cuts links with iptables: it runs only in a firewall run (TestFirewallHistoryChaos and the like), not here", f)
	}
	start := time.Now()
	switch f {
	case "kill", "kill-standby":
		n := active
		if f == "kill-standby" {
			n = standby
		}
		c.kill9(n)
		time.Sleep(2 * failoverTimeout)
		c.start(n)
		return fmt.Sprintf("%s node %d", f, n), start, -1
	case "pause", "pause-standby", "long-pause":
		n, d := active, 2*failoverTimeout
		switch f {
		case "pause-standby":
			n = standby
		case "long-pause":
			d = 5 * failoverTimeout
		}
		c.signal(n, syscall.SIGSTOP)
		time.Sleep(d)
		c.signal(n, syscall.SIGCONT)
		return fmt.Sprintf("%s node %d", f, n), start, -1
	case "cut", "cut-standby":
		n := active
		if f == "cut-standby" {
			n = standby
		}
		c.nodes[n].proxy.setCut(true)
		time.Sleep(2 * failoverTimeout)
		c.nodes[n].proxy.setCut(false)
		return fmt.Sprintf("%s node %d", f, n), start, n
	case "cut-link":
		p := c.nodes[active].proxy
		p.hold(streamOf(c.nodes[standby].url), true, true)
		time.Sleep(2 * failoverTimeout)
		p.reset()
		return fmt.Sprintf("cut-link node %d to node %d", active, standby), start, -1
	case "pause-edge":
		d := failoverTimeout*3/4 + time.Duration(rng.IntN(int(failoverTimeout/2)))
		c.signal(active, syscall.SIGSTOP)
		time.Sleep(d)
		c.signal(active, syscall.SIGCONT)
		return fmt.Sprintf("pause-edge node %d for %s", active, d), start, -1
	case "kill-pause-next":
		succ := 0
		if succ == active {
			succ = 1
		}
		c.kill9(active)
		before := failoverTimeout/2 + time.Duration(rng.IntN(int(failoverTimeout*7/10)))
		time.Sleep(before)
		c.signal(succ, syscall.SIGSTOP)
		time.Sleep(failoverTimeout)
		c.signal(succ, syscall.SIGCONT)
		c.start(active)
		return fmt.Sprintf("kill-pause-next node %d, successor %d stopped %s after", active, succ, before), start, -1
	case "sigint-all":
		for i := range c.nodes {
			c.signal(i, syscall.SIGINT)
		}
		for i, nd := range c.nodes {
			select {
			case <-nd.exited:
			case <-time.After(15 * time.Second):
				c.t.Fatalf("node %d did not exit after SIGINT:\n%s", i, nd.log)
			}
			if code := nd.cmd.ProcessState.ExitCode(); code != 0 {
				c.t.Errorf("node %d exited %d after SIGINT, want 0", i, code)
			}
		}
		order := rng.Perm(len(c.nodes))
		for _, i := range order {
			c.launch(i)
		}
		for _, i := range order {
			c.waitHTTP(i)
		}
		return "sigint-all", start, -1
	case "kill-all":
		for i := range c.nodes {
			c.kill9(i)
		}
		time.Sleep(failoverTimeout)
		// All at once: a node that comes back alone with a log behind
		// the others' elects itself after three failover timeouts (no
		// quorum, SPEC section 3), which is another run than this one.
		order := rng.Perm(len(c.nodes))
		for _, i := range order {
			c.launch(i)
		}
		for _, i := range order {
			c.waitHTTP(i)
		}
		return "kill-all", start, -1
	case "full-disk", "full-disk-standby":
		n := active
		if f == "full-disk-standby" {
			n = standby
		}
		free := c.fillDisk(n)
		// Records still fit in the log's last page, and in the zeros it
		// keeps written ahead with --fsync always (wal
		// Config.Preallocate, 1 MiB): the fault lasts from the first
		// write that fails, of the log or of the token high-water mark,
		// and extra writes through the active (spill) use that room up
		// (at most 30 s on).
		stop := c.spill(active)
		failed := c.waitLog(n, "write failed", 30*time.Second)
		stop()
		time.Sleep(2 * failoverTimeout)
		free()
		if !failed {
			return fmt.Sprintf("%s node %d (no write failed)", f, n), start, -1
		}
		return fmt.Sprintf("%s node %d", f, n), start, -1
	case "old-copy", "old-copy-standby":
		n := active
		if f == "old-copy-standby" {
			n = standby
		}
		old := c.copyDataDir(n)
		time.Sleep(2 * failoverTimeout)
		c.kill9(n)
		c.restoreDataDir(n, old)
		time.Sleep(failoverTimeout)
		c.start(n)
		return fmt.Sprintf("%s node %d", f, n), start, -1
	case "handoff":
		// SIGINT: a graceful handoff to the best standby, then the node
		// comes back (and takes the role back by its priority).
		if code := c.stop(active); code != 0 {
			c.t.Errorf("node %d exited %d after SIGINT, want 0", active, code)
		}
		time.Sleep(failoverTimeout)
		c.start(active)
		return fmt.Sprintf("handoff node %d", active), start, -1
	case "handoff-paused":
		// SIGINT on the active while its successor (the live standby of
		// highest priority) is stopped: the handoff call gets no answer.
		succ := 0
		if succ == active {
			succ = 1
		}
		c.signal(succ, syscall.SIGSTOP)
		c.stop(active)
		time.Sleep(2 * failoverTimeout)
		c.signal(succ, syscall.SIGCONT)
		c.start(active)
		return fmt.Sprintf("handoff-paused node %d, successor %d", active, succ), start, -1
	case "stop-all":
		// SIGINT every node in a random order (each active hands off to
		// the next), then start them again in another: the cold start
		// elects the node with the newest log.
		for _, i := range rng.Perm(len(c.nodes)) {
			c.stop(i)
		}
		order := rng.Perm(len(c.nodes))
		for _, i := range order {
			c.launch(i)
			// The last at most two failover timeouts after the first (one
			// that listened alone for three would elect itself: kill-all).
			time.Sleep(time.Duration(rng.IntN(int(2 * failoverTimeout / time.Duration(len(c.nodes)-1)))))
		}
		for _, i := range order {
			c.waitHTTP(i)
		}
		return fmt.Sprintf("stop-all, started in order %v", order), start, -1
	case "long-cut-link", "long-isolate":
		// iptables: the active cut from one standby (long-cut-link) or
		// from every peer (long-isolate), both ways, for 16 s: long
		// enough for TCP to back off its retransmissions on the
		// connections the cut left open to 12.8 s.
		peers := []int{standby}
		if f == "long-isolate" {
			peers = nil
			for i := range c.nodes {
				if i != active {
					peers = append(peers, i)
				}
			}
		}
		for _, p := range peers {
			c.fw.cut(active, p)
		}
		time.Sleep(16 * time.Second)
		c.fw.healAll()
		return fmt.Sprintf("%s node %d from %v", f, active, peers), start, -1
	case "drop-out", "drop-in", "fw-cut-link":
		// iptables (firewall): what the active sends to a standby is
		// dropped (drop-out), what the standby sends to the active
		// (drop-in), or both, for 3*failoverTimeout: longer than a
		// failover takes. Every other link stays up.
		switch f {
		case "drop-out":
			c.fw.drop(active, standby)
		case "drop-in":
			c.fw.drop(standby, active)
		default:
			c.fw.cut(active, standby)
		}
		time.Sleep(3 * failoverTimeout)
		c.fw.mend(active, standby)
		return fmt.Sprintf("%s node %d to node %d", f, active, standby), start, -1
	case "cut-standbys":
		// iptables: every standby cut from every other, both ways, for
		// 3*failoverTimeout; each still reaches the active.
		var sbs []int
		for i := range c.nodes {
			if i != active {
				sbs = append(sbs, i)
			}
		}
		for _, a := range sbs {
			for _, b := range sbs {
				if a < b {
					c.fw.cut(a, b)
				}
			}
		}
		time.Sleep(3 * failoverTimeout)
		c.fw.healAll()
		return fmt.Sprintf("cut-standbys %v", sbs), start, -1
	case "fw-isolate", "fw-isolate-out", "fw-isolate-in":
		// iptables: the active cut from every peer both ways (its
		// clients still reach it) for 2*failoverTimeout; or one way:
		// what it sends to every peer dropped (fw-isolate-out), or what
		// every peer sends to it (fw-isolate-in).
		for i := range c.nodes {
			if i != active {
				switch f {
				case "fw-isolate-out":
					c.fw.drop(active, i)
				case "fw-isolate-in":
					c.fw.drop(i, active)
				default:
					c.fw.cut(active, i)
				}
			}
		}
		time.Sleep(2 * failoverTimeout)
		c.fw.healAll()
		return fmt.Sprintf("%s node %d", f, active), start, -1
	case "pause-under", "pause-over":
		// The active stopped for just under (0.85) or just over (1.15)
		// failoverTimeout.
		d := failoverTimeout * 85 / 100
		if f == "pause-over" {
			d = failoverTimeout * 115 / 100
		}
		c.signal(active, syscall.SIGSTOP)
		time.Sleep(d)
		c.signal(active, syscall.SIGCONT)
		return fmt.Sprintf("%s node %d for %s", f, active, d), start, -1
	case "drop-kill", "cut-kill":
		// iptables: what the active sends to its successor (the live
		// standby of highest priority) is dropped (drop-kill), or both
		// ways (cut-kill), for half a failover timeout (no failover yet),
		// then the active is killed with SIGKILL while the cut holds
		// (its connections' ends never reach the successor); the link
		// heals 2*failoverTimeout later and the node starts again.
		succ := 0
		if succ == active {
			succ = 1
		}
		if f == "drop-kill" {
			c.fw.drop(active, succ)
		} else {
			c.fw.cut(active, succ)
		}
		time.Sleep(failoverTimeout / 2)
		c.kill9(active)
		time.Sleep(2 * failoverTimeout)
		c.fw.mend(active, succ)
		c.start(active)
		return fmt.Sprintf("%s node %d, successor %d", f, active, succ), start, -1
	case "handoff-kill-old":
		// SIGINT on the active, then kill -9 of that same node 0-30 ms
		// later, in the middle of its handoff; it starts again a
		// failover timeout later.
		// A handoff may end (the node exits 0) before the kill: then
		// the kill is none (kill9Exiting).
		c.signal(active, syscall.SIGINT)
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		c.kill9Exiting(active)
		time.Sleep(failoverTimeout)
		c.start(active)
		return fmt.Sprintf("handoff-kill-old node %d", active), start, -1
	case "handoff-kill":
		// SIGINT on the active, and kill -9 of its successor (the live
		// standby of highest priority) 0-30 ms later, in the middle of
		// the handoff; both start again a failover timeout after the old
		// active exited.
		succ := 0
		if succ == active {
			succ = 1
		}
		c.signal(active, syscall.SIGINT)
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		c.kill9(succ)
		select {
		case <-c.nodes[active].exited:
		case <-time.After(15 * time.Second):
			c.t.Fatalf("node %d did not exit after SIGINT:\n%s", active, c.nodes[active].log)
		}
		time.Sleep(failoverTimeout)
		c.start(succ)
		c.start(active)
		return fmt.Sprintf("handoff-kill node %d, successor %d", active, succ), start, -1
	}
	c.t.Fatalf("unknown fault %q", f)
	return "", start, -1
}

// firewallFaults are the faults inject applies with iptables (c.fw):
// only a firewall run (nemesis.firewall) has it.
var firewallFaults = []string{"long-cut-link", "long-isolate", "drop-out", "drop-in", "fw-cut-link", "cut-standbys",
	"fw-isolate", "fw-isolate-out", "fw-isolate-in", "drop-kill", "cut-kill"}

// chaosFaults draws n faults from kinds (or from the comma-separated
// names in CHAOS_KINDS) with rng, or returns the list in CHAOS_LIST
// (comma-separated fault names, see inject) when it is set.
func chaosFaults(rng *rand.Rand, n int, kinds ...string) []string {
	if l := os.Getenv("CHAOS_LIST"); l != "" {
		return strings.Split(l, ",")
	}
	if k := os.Getenv("CHAOS_KINDS"); k != "" {
		kinds = strings.Split(k, ",")
	}
	out := make([]string, n)
	for i := range out {
		out[i] = kinds[rng.IntN(len(kinds))]
	}
	return out
}

// envInt reads a knob from the environment: def when unset or not a
// positive number.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// chaosKeys mixes a mutex, a counting semaphore and a read/write lock.
var chaosKeys = []history.KeySpec{{Name: "m"}, {Name: "sem", Limit: 3, Shared: 0.2}, {Name: "rw", Shared: 0.6}}

// TestHistoryChaos is the history run under faults drawn at random over
// every node, not only the active: kill, pause and cut of the active or of
// a standby, a pause past failover_timeout, a stalled replication link
// between the active and one standby, and every node killed at once; half
// the clients speak the native protocol, on a mutex, a semaphore and a
// read/write lock, with short leases that live on renewals; a few grants
// are dropped, as by holders that died, and must end by their lease.
// Every fault has its window. CHAOS_FAULTS (default 4) and CHAOS_SEED
// (default 1) make it longer or different; CHAOS_LIST names the faults.
func TestHistoryChaos(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	faults := chaosFaults(rand.New(rand.NewPCG(seed, 99)), envInt("CHAOS_FAULTS", 4),
		"kill", "pause", "cut", "kill-standby", "pause-standby", "cut-standby", "long-pause", "cut-link", "kill-all")
	t.Logf("seed %d: faults %s", seed, strings.Join(faults, ", "))
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: faults, seed: seed, native: true, lease: 2 * time.Second, renewEvery: 500 * time.Millisecond, dropShare: 0.03})
}

// TestSyncHistoryChaos is TestHistoryChaos with sync_standbys 1, where a
// kill of the active, of a standby or of every node gets no window: the
// contract loses no answered grant, renewal or release through them. The
// pauses and cuts (partitions, SPEC section 3) have their windows.
func TestSyncHistoryChaos(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	faults := chaosFaults(rand.New(rand.NewPCG(seed, 98)), envInt("CHAOS_FAULTS", 4),
		"kill", "kill-standby", "kill-all", "pause", "cut", "pause-standby", "cut-standby", "long-pause", "cut-link")
	t.Logf("seed %d: faults %s", seed, strings.Join(faults, ", "))
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: faults, seed: seed, native: true, lease: 2 * time.Second, renewEvery: 500 * time.Millisecond, dropShare: 0.03,
		extra: syncFlags, strict: map[string]bool{"kill": true, "kill-standby": true, "kill-all": true}})
}

// TestHistoryChaosTimeouts is the chaos run with acquires that wait 100 ms
// on two contended keys and leases well above the claim deadline: most
// acquires are answered 408, and a grant that such a client never
// received must not hold its key past the claim deadline
// (checkGhostGrants), through kills, pauses and cuts of any node; one the
// active made while a cut cut it off, past its lease.
func TestHistoryChaosTimeouts(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	faults := chaosFaults(rand.New(rand.NewPCG(seed, 97)), envInt("CHAOS_FAULTS", 4),
		"kill", "pause", "cut", "kill-standby", "long-pause", "cut-link")
	t.Logf("seed %d: faults %s", seed, strings.Join(faults, ", "))
	runHistory(t, nemesis{keys: []history.KeySpec{{Name: "m"}, {Name: "rw", Shared: 0.5}}, clients: 10, hold: 30 * time.Millisecond,
		faults: faults, seed: seed, native: true, wait: 100 * time.Millisecond})
}

// diskFaults reports whether faults holds a fault that fills a data_dir's
// file system (full-disk, full-disk-standby).
func diskFaults(faults []string) bool {
	return slices.ContainsFunc(faults, func(f string) bool { return strings.HasPrefix(f, "full-disk") })
}

// mountDataDirs mounts a tmpfs of its own on every node's data_dir (before
// the nodes start), so that fillDisk fills one node's file system only.
// It needs root, as the wal and cmd tests that mount do (CI runs as root).
func (c *testCluster) mountDataDirs() {
	c.t.Helper()
	// The nodes stop before their data_dirs are unmounted (stopAll,
	// which newCluster's cleanup would run only after these): a node
	// still running when its data_dir goes finds its segment gone and
	// logs an ERROR that no fault caused.
	defer c.t.Cleanup(c.stopAll)
	for _, nd := range c.nodes {
		if err := syscall.Mount("tmpfs", nd.dir, "tmpfs", 0, "size=64m"); err != nil {
			c.t.Fatalf("mount a tmpfs on node %d's data_dir %s (full-disk faults need root, as CI runs): %v", nd.i, nd.dir, err)
		}
		dir := nd.dir
		c.t.Cleanup(func() {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				c.t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
}

// fillDisk fills node i's data_dir file system (mountDataDirs) with a
// file until a write fails for want of space, and returns the function
// that removes it.
func (c *testCluster) fillDisk(i int) (free func()) {
	c.t.Helper()
	path := filepath.Join(c.nodes[i].dir, "filler")
	fmt.Fprintf(c.nodes[i].log, "=== disk full on node %d at %s\n", i, time.Now().UTC().Format(time.RFC3339Nano))
	f, err := os.Create(path)
	if err != nil {
		c.t.Fatalf("fill node %d's disk: %v", i, err)
	}
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				c.t.Fatalf("fill node %d's disk: %v", i, err)
			}
			chunk = chunk[:len(chunk)/2]
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		c.t.Fatalf("fill node %d's disk: %v", i, err)
	}
	return func() {
		c.t.Helper()
		if err := os.Remove(path); err != nil {
			c.t.Fatalf("free node %d's disk: %v", i, err)
		}
		fmt.Fprintf(c.nodes[i].log, "=== disk freed on node %d at %s\n", i, time.Now().UTC().Format(time.RFC3339Nano))
	}
}

// spillPrefix begins the keys of spill, which the history's sampler
// leaves out.
const spillPrefix = "spill/"

// spill takes and releases locks on node i (following its redirects) with
// the longest key and owner a record may carry, from 4 goroutines, until
// the returned function is called: writes to fill what room a log still
// has after fillDisk, so that its next write fails as on a real full
// disk. Its keys (spillPrefix) are in no history and left out of the
// holders sampled; its answers are not checked (a node whose disk is full
// refuses them).
func (c *testCluster) spill(i int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	owner := strings.Repeat("o", engine.MaxOwnerBytes)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s%d/%s", spillPrefix, g, strings.Repeat("k", 240))
			for {
				select {
				case <-done:
					return
				default:
				}
				a, err := do(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/"+key+"?lease=5&wait=1&owner="+owner)
				if err != nil || a.status != http.StatusOK {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				_, _ = do(http.MethodDelete, fmt.Sprintf("http://%s/locks/%s?token=%d", c.nodes[i].listen, key, a.grant.Token))
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// waitLog waits until node i's log has a line with text after its last
// "=== " line (the harness' mark of a fault), at most bound, and
// reports whether it came.
func (c *testCluster) waitLog(i int, text string, bound time.Duration) bool {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l := c.nodes[i].log.String()
		if strings.Contains(l[max(0, strings.LastIndex(l, "\n=== ")):], text) {
			return true
		}
	}
	return false
}

// copyDataDir copies node i's data_dir while the node is stopped (SIGSTOP
// for the copy, a few milliseconds: every write(2) it made is in the
// copy, as in a crash-consistent snapshot of its volume) and returns the
// copy's directory.
func (c *testCluster) copyDataDir(i int) string {
	c.t.Helper()
	dst := c.t.TempDir()
	c.signal(i, syscall.SIGSTOP)
	err := copyTree(c.nodes[i].dir, dst)
	c.signal(i, syscall.SIGCONT)
	if err != nil {
		c.t.Fatalf("copy node %d's data_dir: %v", i, err)
	}
	return dst
}

// restoreDataDir replaces node i's data_dir (the node is down) by the copy
// old (copyDataDir).
func (c *testCluster) restoreDataDir(i int, old string) {
	c.t.Helper()
	dir := c.nodes[i].dir
	ents, err := os.ReadDir(dir)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := copyTree(old, dir); err != nil {
		c.t.Fatalf("restore node %d's data_dir: %v", i, err)
	}
	fmt.Fprintf(c.nodes[i].log, "=== data_dir of node %d restored from an old copy at %s\n", i, time.Now().UTC().Format(time.RFC3339Nano))
}

// copyTree copies the directories and regular files under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o750)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// TestDiskHistoryChaos is the sync_standbys 1 history run under disk
// faults, none with a window: a full disk on the active (it refuses
// changes and hands its role to a synced standby: ruleLogFailing) or on a
// standby, and a node restarted on an old copy of its data_dir (the
// active: a kill, which sync_standbys 1 survives; a standby: it syncs
// from the active). Each node's data_dir is a tmpfs of its own (root, as
// CI runs). CHAOS_FAULTS (default 4) and CHAOS_SEED (default 1, which
// draws each kind once) as in TestHistoryChaos.
func TestDiskHistoryChaos(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	kinds := []string{"full-disk", "full-disk-standby", "old-copy", "old-copy-standby"}
	faults := chaosFaults(rand.New(rand.NewPCG(seed, 139)), envInt("CHAOS_FAULTS", 4), kinds...)
	t.Logf("seed %d: faults %s", seed, strings.Join(faults, ", "))
	strict := map[string]bool{}
	for _, k := range kinds {
		strict[k] = true
	}
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: faults, seed: seed, native: true, lease: 2 * time.Second, renewEvery: 500 * time.Millisecond,
		extra: syncFlags, strict: strict})
}
