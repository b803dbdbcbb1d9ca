package cluster_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAddressKeyedCutSeparatesNodes: on one host, nodes that listen on
// their own loopback addresses are cut apart by firewall rules keyed on
// those addresses (iptables -s A -d B -j DROP, both ways), as nodes on two
// hosts are and as a fault injector on loopback cuts them. That holds only
// if a node's peer connections leave from its own address: from
// 127.0.0.1, the kernel's choice, no such rule matches them and the cut
// is no cut at all. The standbys, nodes 1 and 2, are cut from each other
// (the test's own calls, from 127.0.0.1, still reach both): each must see
// the other as not live, and again as live once the cut heals.
func TestAddressKeyedCutSeparatesNodes(t *testing.T) {
	c := newCluster(t, 3, false)
	c.startAll()
	c.waitActive(0, 1, 2)
	a, b := nodeHost(1), nodeHost(2)
	rules := [][]string{{"INPUT", "-s", a, "-d", b, "-j", "DROP"}, {"INPUT", "-s", b, "-d", a, "-j", "DROP"}}
	ipt := func(op string, r []string) error {
		out, err := exec.Command("iptables", append([]string{"-w", op}, r...)...).CombinedOutput()
		if err != nil {
			return &exec.ExitError{Stderr: []byte(strings.TrimSpace(string(out)) + ": " + err.Error())}
		}
		return nil
	}
	mended := false
	mend := func() {
		if mended {
			return
		}
		mended = true
		for _, r := range rules {
			for ipt("-D", r) == nil { // every copy, whatever is left
			}
		}
	}
	t.Cleanup(mend)
	for _, r := range rules {
		if err := ipt("-I", r); err != nil {
			t.Fatalf("iptables -I %s (cutting links needs root and iptables, as CI has): %s", strings.Join(r, " "), err.(*exec.ExitError).Stderr)
		}
	}
	// live reports whether node i sees node j as live.
	live := func(i, j int) bool {
		v, err := c.view(i)
		if err != nil {
			t.Fatalf("GET /cluster on node %d: %v", i, err)
		}
		for _, p := range v.Peers {
			if p.URL == c.nodes[j].url {
				return p.Live
			}
		}
		t.Fatalf("node %d's view lists no peer %s", i, c.nodes[j].url)
		return false
	}
	within := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within %v", what, d)
			}
		}
	}
	within("nodes 1 and 2, cut apart by their addresses, see each other as not live", 10*failoverTimeout, func() bool { return !live(1, 2) && !live(2, 1) })
	if !live(1, 0) || !live(2, 0) {
		t.Fatalf("the standbys, cut from each other only, lost the active too")
	}
	mend()
	within("nodes 1 and 2 see each other as live again once the cut heals", 10*failoverTimeout, func() bool { return live(1, 2) && live(2, 1) })
	c.waitActive(0, 1, 2)
}
