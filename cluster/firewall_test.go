package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// firewall cuts links between nodes with iptables, one direction at a
// time, as a real network does (a DROP: no reset, no refusal; the
// sockets stay open and their writes wait in the kernel). A node's
// connections to its peers leave from its own address (Config.SourceIP),
// but those that the proxy in front of a node opens to it leave from
// 127.0.0.1, so the source address cannot tell the nodes apart on every
// hop: each node runs with a group ID of its own (launch), and a rule
// marks each connection a node opens to
// another node's address (directly, or through the proxy in front of it)
// with the pair (conntrack's mark). Cutting a to b then drops what a
// sends on a's connections to b and what it answers on b's connections
// to it; b's packets still reach a. The clients (this process) are never
// cut off. Every rule sits in a chain of its own, reached from OUTPUT
// only for the addresses of CLUSTER_NET, and is removed when the test
// ends (with the process's ID in its name). It needs root and iptables (conntrack, owner and connmark
// matches), as CI has.
type firewall struct {
	t     *testing.T
	c     *testCluster
	chain string
	net   string // the first three numbers of the nodes' addresses
	base  int    // the nodes' group IDs are base+i
	mark  int    // the connections' marks are mark|a<<4|b
	// byAddr: links are cut by address alone (newAddrFirewall), as a
	// fault injector outside the nodes cuts them: no group IDs, no marks.
	byAddr bool

	mu    sync.Mutex
	drops map[[2]int]bool // a to b dropped
}

// clusterNet returns CLUSTER_NET or its default.
func clusterNet() string {
	if n := os.Getenv("CLUSTER_NET"); n != "" {
		return n
	}
	return "127.0.0"
}

// newFirewall sets up the chain for c's nodes (before they start: their
// group IDs are set at launch) and removes it when the test ends.
func newFirewall(t *testing.T, c *testCluster) *firewall {
	t.Helper()
	return setupFirewall(t, c, false)
}

// newAddrFirewall is newFirewall cutting links the way a Jepsen-style
// fault injector on one host does: dropping a to b is the one rule
// "-s A -d B -j DROP" on input, keyed on the nodes' listen addresses
// alone (no group IDs, no marks). It cuts a's requests on its own
// connections to b (to b's proxy, on b's address) and a's answers on b's
// connections to a alike, and only because a node dials its peers from
// its own address (Config.SourceIP); the hop from b's proxy to b, from
// 127.0.0.1, and the clients are never cut.
func newAddrFirewall(t *testing.T, c *testCluster) *firewall {
	t.Helper()
	return setupFirewall(t, c, true)
}

func setupFirewall(t *testing.T, c *testCluster, byAddr bool) *firewall {
	t.Helper()
	net := clusterNet()
	third, err := strconv.Atoi(net[strings.LastIndex(net, ".")+1:])
	if err != nil {
		t.Fatalf("CLUSTER_NET %q: %v", net, err)
	}
	// The chain, the group IDs and the marks are this process's own, so
	// that runs side by side on one CLUSTER_NET keep to their own nodes.
	pid := os.Getpid()
	fw := &firewall{t: t, c: c, chain: fmt.Sprintf("BATON-%d-%d", third, pid), net: net,
		base: 50000 + (pid%4096)*16, mark: 0xba000000 | (pid%4096)<<8, byAddr: byAddr, drops: map[[2]int]bool{}}
	fw.ipt("-N", fw.chain)
	fw.ipt("-N", fw.chain+"-in")
	t.Cleanup(fw.remove)
	for a := range c.nodes {
		for b := range c.nodes {
			if a != b && !byAddr {
				fw.ipt("-A", fw.chain, "-d", nodeHost(b), "-m", "conntrack", "--ctstate", "NEW", "-m", "owner", "--gid-owner", strconv.Itoa(fw.base+a),
					"-j", "CONNMARK", "--set-mark", fw.pair(a, b))
			}
		}
	}
	for _, f := range []string{"-s", "-d"} {
		fw.ipt("-I", "OUTPUT", "1", f, net+".0/24", "-j", fw.chain)
		fw.ipt("-I", "INPUT", "1", f, net+".0/24", "-j", fw.chain+"-in")
	}
	if !byAddr {
		c.gid = func(i int) int { return fw.base + i }
	}
	c.fw = fw
	return fw
}

func (fw *firewall) pair(a, b int) string { return fmt.Sprintf("0x%x", fw.mark|a<<4|b) }

func (fw *firewall) ipt(args ...string) {
	fw.t.Helper()
	if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
		fw.t.Fatalf("iptables %s (cutting links needs root and iptables, as CI has): %v\n%s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the chain and the rules that reach it, whatever is left.
func (fw *firewall) remove() {
	for _, f := range []string{"-s", "-d"} {
		for exec.Command("iptables", "-w", "-D", "OUTPUT", f, fw.net+".0/24", "-j", fw.chain).Run() == nil {
		}
		for exec.Command("iptables", "-w", "-D", "INPUT", f, fw.net+".0/24", "-j", fw.chain+"-in").Run() == nil {
		}
	}
	for _, ch := range []string{fw.chain, fw.chain + "-in"} {
		_ = exec.Command("iptables", "-w", "-F", ch).Run()
		_ = exec.Command("iptables", "-w", "-X", ch).Run()
	}
}

// dropRules are the two rules that drop what a sends to b: on a's
// connections to b, and a's answers on b's connections to a. They drop
// on input, as a network does: a packet dropped on output is an error
// for its sender, whose TCP then retries every half second or so
// instead of backing off as it does for a packet lost on the way.
func (fw *firewall) dropRules(a, b int) [][]string {
	in := fw.chain + "-in"
	if fw.byAddr {
		return [][]string{{in, "-s", nodeHost(a), "-d", nodeHost(b), "-j", "DROP"}}
	}
	return [][]string{
		{in, "-m", "connmark", "--mark", fw.pair(a, b), "-m", "conntrack", "--ctdir", "ORIGINAL", "-j", "DROP"},
		{in, "-m", "connmark", "--mark", fw.pair(b, a), "-m", "conntrack", "--ctdir", "REPLY", "-j", "DROP"},
	}
}

// drop cuts the link from a to b (b still reaches a).
func (fw *firewall) drop(a, b int) {
	fw.t.Helper()
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.drops[[2]int{a, b}] {
		return
	}
	for _, r := range fw.dropRules(a, b) {
		fw.ipt(append([]string{"-A"}, r...)...)
	}
	fw.drops[[2]int{a, b}] = true
	fw.note(fmt.Sprintf("=== link from node %d to node %d dropped at %s\n", a, b, time.Now().UTC().Format(time.RFC3339Nano)), a, b)
}

// heal restores the link from a to b.
func (fw *firewall) heal(a, b int) {
	fw.t.Helper()
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if !fw.drops[[2]int{a, b}] {
		return
	}
	for _, r := range fw.dropRules(a, b) {
		fw.ipt(append([]string{"-D"}, r...)...)
	}
	delete(fw.drops, [2]int{a, b})
	fw.note(fmt.Sprintf("=== link from node %d to node %d healed at %s\n", a, b, time.Now().UTC().Format(time.RFC3339Nano)), a, b)
}

// cut cuts the link between a and b both ways; mend heals it.
func (fw *firewall) cut(a, b int)  { fw.drop(a, b); fw.drop(b, a) }
func (fw *firewall) mend(a, b int) { fw.heal(a, b); fw.heal(b, a) }

// healAll restores every link.
func (fw *firewall) healAll() {
	fw.mu.Lock()
	var ds [][2]int
	for d := range fw.drops {
		ds = append(ds, d)
	}
	fw.mu.Unlock()
	for _, d := range ds {
		fw.heal(d[0], d[1])
	}
}

func (fw *firewall) note(line string, nodes ...int) {
	for _, i := range nodes {
		fmt.Fprint(fw.c.nodes[i].log, line)
	}
}

// firewallKinds are the faults of the firewall runs: one-way and two-way
// cuts of real links (iptables), the standbys cut from each other, the
// active cut from its peers while its clients reach it, pauses of the
// active just under and just over failover_timeout, and kill -9 of the
// successor, or of the active itself, in the middle of a graceful
// handoff, and kill -9 of the active while its link to its successor is
// cut.
var firewallKinds = []string{"drop-out", "drop-in", "fw-cut-link", "cut-standbys", "fw-isolate", "pause-under", "pause-over", "handoff-kill", "handoff-kill-old", "drop-kill", "cut-kill"}

// TestFirewallHistoryChaos is the history run under firewallKinds, with
// a window for each (handoff-kill's: the successor's kill makes a
// failover) but cut-standbys': the standbys cut from each other, each
// still hearing the active, is no partition of the service. CHAOS_SEED,
// CHAOS_FAULTS (default 4), CHAOS_KINDS, CHAOS_LIST, CHAOS_STRICT and
// CHAOS_FLAGS as in TestHistoryChaos; CHAOS_ADDRCUT set cuts the links
// by address rules alone (newAddrFirewall).
func TestFirewallHistoryChaos(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	faults := chaosFaults(rand.New(rand.NewPCG(seed, 221)), envInt("CHAOS_FAULTS", 4), firewallKinds...)
	t.Logf("seed %d: faults %s", seed, strings.Join(faults, ", "))
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: faults, seed: seed, native: true, lease: 2 * time.Second, renewEvery: 500 * time.Millisecond, dropShare: 0.03, firewall: true,
		addrCut: os.Getenv("CHAOS_ADDRCUT") != "", strict: map[string]bool{"cut-standbys": true}})
}

// TestSyncFirewallHistoryChaos is TestFirewallHistoryChaos with
// sync_standbys 1, where the kills of an active get no window either: in
// the middle of its handoff, of its successor in the middle of the
// handoff, or while its link to its successor has been cut for half a
// failover timeout (the contract loses no answered change through a
// crash of the active). CHAOS_ADDRCUT as in TestFirewallHistoryChaos.
// CHAOS_SEED 1 draws drop-out, cut-kill,
// cut-standbys and handoff-kill.
func TestSyncFirewallHistoryChaos(t *testing.T) {
	seed := uint64(envInt("CHAOS_SEED", 1))
	faults := chaosFaults(rand.New(rand.NewPCG(seed, 225)), envInt("CHAOS_FAULTS", 4), firewallKinds...)
	t.Logf("seed %d: faults %s", seed, strings.Join(faults, ", "))
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: faults, seed: seed, native: true, lease: 2 * time.Second, renewEvery: 500 * time.Millisecond, dropShare: 0.03,
		extra: syncFlags, firewall: true, addrCut: os.Getenv("CHAOS_ADDRCUT") != "",
		strict: map[string]bool{"cut-standbys": true, "handoff-kill": true, "handoff-kill-old": true, "drop-kill": true, "cut-kill": true}})
}

// TestSyncAddrCutHistoryChaos is TestSyncFirewallHistoryChaos with its
// links cut by address rules alone (newAddrFirewall), as a fault injector
// on one host cuts them: the active isolated from both standbys both
// ways, what it sends to a standby dropped (one way), what a standby
// sends to it dropped, and the active killed while its link to its
// successor is cut both ways (no window: sync_standbys 1 loses no
// answered grant through a crash of the active), each healed in turn.
func TestSyncAddrCutHistoryChaos(t *testing.T) {
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: []string{"fw-isolate", "drop-out", "drop-in", "cut-kill"}, seed: 1, native: true, lease: 2 * time.Second,
		renewEvery: 500 * time.Millisecond, dropShare: 0.03, extra: syncFlags, firewall: true, addrCut: true,
		strict: map[string]bool{"cut-kill": true}})
}

// TestAddrCutHistoryChaos is the history run with its links cut by
// address rules alone (newAddrFirewall): the active isolated from both
// standbys one way (what it sends dropped, then what it hears), both
// ways, and cut from one standby both ways, each healed before the next;
// after each the cluster must come back to one active (inject waits for
// it).
func TestAddrCutHistoryChaos(t *testing.T) {
	runHistory(t, nemesis{keys: chaosKeys, clients: 10, hold: 5 * time.Millisecond, longHold: 3 * time.Second, longShare: 0.05,
		faults: []string{"fw-isolate-out", "fw-isolate-in", "fw-isolate", "fw-cut-link"}, seed: 1, native: true, lease: 2 * time.Second,
		renewEvery: 500 * time.Millisecond, dropShare: 0.03, firewall: true, addrCut: true})
}
