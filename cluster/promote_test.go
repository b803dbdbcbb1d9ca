package cluster_test

// Promotion never with less (issue 13, SPEC section 3 "Synchronous
// standbys"), with real processes and sync_standbys 1: a crash of the
// active loses no answered change whichever standby is promoted, and a
// cluster restarted after every node was down elects the node with the
// most advanced log.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// syncLoad is a load of acquires and releases on node i of a cluster
// that is about to lose it: each worker takes its own keys and releases
// one in two, and remembers for each key what the last answer said.
type syncLoad struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	want      map[string]uint64 // key -> token held, 0 = released (answered)
	ambiguous map[string]bool   // a call in flight when the node died
	top       uint64            // the highest token answered
	topKey    string            // the key granted under top
}

func startSyncLoad(c *testCluster, i, workers int) *syncLoad {
	l := &syncLoad{stop: make(chan struct{}), want: map[string]uint64{}, ambiguous: map[string]bool{}}
	base := "http://" + c.nodes[i].listen + "/locks/"
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			call := func(method, u string) (int, api.Grant, error) {
				req, _ := http.NewRequest(method, u, nil)
				resp, err := hc.Do(req)
				if err != nil {
					return 0, api.Grant{}, err
				}
				defer resp.Body.Close()
				var g api.Grant
				if resp.StatusCode == http.StatusOK && method == http.MethodPost {
					err = json.NewDecoder(resp.Body).Decode(&g)
				}
				return resp.StatusCode, g, err
			}
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				key := fmt.Sprintf("load/%d/%d", w, n)
				code, g, err := call(http.MethodPost, base+key+"?lease=60&wait=5")
				if err != nil || code != http.StatusOK {
					l.mu.Lock()
					l.ambiguous[key] = true
					l.mu.Unlock()
					return // the node is gone (or no longer the active)
				}
				l.mu.Lock()
				l.want[key] = g.Token
				if g.Token > l.top {
					l.top, l.topKey = g.Token, key
				}
				l.mu.Unlock()
				if n%2 == 1 {
					continue
				}
				code, _, err = call(http.MethodDelete, fmt.Sprintf("%s%s?token=%d", base, key, g.Token))
				l.mu.Lock()
				if err == nil && code == http.StatusOK {
					l.want[key] = 0
				} else {
					l.ambiguous[key] = true
				}
				l.mu.Unlock()
				if err != nil || code != http.StatusOK {
					return
				}
			}
		}()
	}
	return l
}

// laggedOn asserts that standby i's replica lacks the latest grant
// answered: its stream is really held back.
func (l *syncLoad) laggedOn(t *testing.T, c *testCluster, i int) {
	t.Helper()
	l.mu.Lock()
	key, top := l.topKey, l.top
	l.mu.Unlock()
	if got := c.holderOf(i, key); got == top {
		t.Fatalf("node %d holds %s under %d, the latest grant answered: its stream was not held back", i, key, top)
	}
}

// answered returns how many changes were answered so far.
func (l *syncLoad) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.want)
}

// end stops the workers (they stop by themselves once the node is gone).
func (l *syncLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

// check asserts that node i, the active, holds every key as the last
// answer left it.
func (l *syncLoad) check(t *testing.T, c *testCluster, i int) {
	t.Helper()
	missing := 0
	for key, tok := range l.want {
		if l.ambiguous[key] {
			continue
		}
		if got := c.holderOf(i, key); got != tok {
			missing++
			if missing <= 5 {
				t.Errorf("%s: held by %d on the new active (node %d), want %d as answered before the kill", key, got, i, tok)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d answered changes missing on the new active", missing, len(l.want))
	}
}

// TestSyncKillActiveUnderLoadLosesNoAnsweredGrant: with sync_standbys 1,
// kill -9 of the active under a load of grants and releases loses none
// that was answered, whichever standby is promoted. In the second case
// node 1's replication stream (node 1 has the higher priority of the two
// standbys) is held back at node 0's proxy, so that only node 2
// acknowledged the last changes: node 1 must fetch them from node 2
// before it serves, or node 2 must be the one promoted.
func TestSyncKillActiveUnderLoadLosesNoAnsweredGrant(t *testing.T) {
	for _, held := range []bool{false, true} {
		name := "both standbys current"
		if held {
			name = "node 1 held back"
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, 3, true, syncFlags...)
			c.startAll()
			c.waitActive(0, 1, 2)
			first := c.acquire(0, "first", "lease=60")
			c.waitHolder(1, "first", first.Token)
			c.waitHolder(2, "first", first.Token)
			if held {
				c.nodes[0].proxy.hold(streamOf(c.nodes[1].url), true, true)
			}
			load := startSyncLoad(c, 0, 8)
			deadline := time.Now().Add(10 * time.Second)
			for load.answered() < 200 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if held {
				load.laggedOn(t, c, 1)
			}
			killed := time.Now()
			c.kill9(0)
			load.end()
			// What node 0 wrote to the held stream dies with it.
			c.nodes[0].proxy.reset()
			act := c.waitActive(-1, 1, 2)
			g := c.grantOn(act, "after", "lease=60")
			t.Logf("node %d promoted; %d answered changes; first grant %v after the kill", act, len(load.want), time.Since(killed).Round(time.Millisecond))
			if g.Token <= load.top {
				t.Errorf("first token after the failover %d is not above %d, answered by the dead active", g.Token, load.top)
			}
			load.check(t, c, act)
			if got := c.holderOf(act, "first"); got != first.Token {
				t.Errorf("first: held by %d, want %d", got, first.Token)
			}
		})
	}
}

// TestColdStartElectsTheMostAdvancedLog: every node is killed at once
// while node 1's replication stream is held back (node 2 acknowledged the
// last grants, node 1 did not). Nodes 1 and 2 come back first, node 2 a
// failover timeout after node 1:
// node 2, with the most advanced log, is elected although node 1 has the
// higher priority (or node 1 serves only once it has node 2's tail), and
// every grant answered before the kill is there; then node 0 comes back
// and the cluster ends where the priorities say, still with every grant.
func TestColdStartElectsTheMostAdvancedLog(t *testing.T) {
	c := newCluster(t, 3, true, syncFlags...)
	c.startAll()
	c.waitActive(0, 1, 2)
	first := c.acquire(0, "first", "lease=60")
	c.waitHolder(1, "first", first.Token)
	c.waitHolder(2, "first", first.Token)
	c.nodes[0].proxy.hold(streamOf(c.nodes[1].url), true, true)
	load := startSyncLoad(c, 0, 4)
	deadline := time.Now().Add(10 * time.Second)
	for load.answered() < 100 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	load.laggedOn(t, c, 1)
	load.mu.Lock()
	top := load.top
	load.mu.Unlock()
	for i := range c.nodes {
		c.signal(i, syscall.SIGKILL)
	}
	for _, nd := range c.nodes {
		<-nd.exited
	}
	load.end()
	c.nodes[0].proxy.reset()

	marks := []int{len(c.nodes[1].log.String()), len(c.nodes[2].log.String())}
	// Node 1 comes back first and node 2 more than a failover timeout
	// later: node 1, on a cold start with not every peer heard, listens
	// three failover timeouts before it elects itself, so node 2 is there
	// in time (with one, node 1 would elect itself with its older log). A
	// failover timeout of 3 s for the restart leaves a race-built node 2
	// on a loaded machine 5 s to start.
	const coldTimeout = 3 * time.Second
	c.extra = append(c.extra, "--failover-timeout", coldTimeout.String())
	c.start(1)
	time.Sleep(coldTimeout + time.Second)
	c.start(2)
	act := c.waitActive(-1, 1, 2)
	log1 := c.nodes[1].log.String()[marks[0]:]
	log2 := c.nodes[2].log.String()[marks[1]:]
	// Node 1 may serve only once it holds node 2's log: synced from it as
	// a standby (then a handoff), or with its tail fetched.
	promoted1 := strings.Index(log1, "promoted to active")
	caught := strings.Index(log1, "synced with the active")
	if f := strings.Index(log1, "fetched the log's tail before promoting"); f >= 0 && (caught < 0 || f < caught) {
		caught = f
	}
	if promoted1 >= 0 && (caught < 0 || caught > promoted1) {
		t.Errorf("node 1 was promoted with its older log before it held node 2's:\n%s", log1)
	}
	if !strings.Contains(log2, "promoted to active") {
		t.Errorf("node 2, with the most advanced log, was not elected (active now: node %d)", act)
	}
	load.check(t, c, act)

	c.start(0)
	c.waitActive(0, 1, 2)
	load.check(t, c, 0)
	if g := c.grantOn(0, "after", "lease=60"); g.Token <= top {
		t.Errorf("token %d after the restart is not above %d", g.Token, top)
	}
}

// TestColdStartStaleActiveYieldsToARestartedNewerState is the newcomer's
// scenario with real processes: kill -9 of the active node 0; node 1 is
// promoted and answers L1 and L2 (node 2 has them: sync_standbys 1);
// kill -9 of nodes 1 and 2; node 0 comes back alone and elects itself
// with its older log. When nodes 1 and 2 come back with their logs, node 1
// does not follow node 0 (which would replace its state with node 0's and
// lose L1 and L2): it takes the role, node 0 steps down and resyncs, then
// takes the role back by a handoff; L1 and L2 are held with their tokens
// on every node.
func TestColdStartStaleActiveYieldsToARestartedNewerState(t *testing.T) {
	c := newCluster(t, 3, false, syncFlags...)
	c.startAll()
	c.waitActive(0, 1, 2)
	c.kill9(0)
	c.waitActive(1, 2)
	grants := []api.Grant{c.acquire(1, "L1", "lease=600"), c.acquire(1, "L2", "lease=600")}
	c.waitHolder(2, "L2", grants[1].Token)
	c.kill9(1)
	c.kill9(2)

	c.start(0)
	c.waitActive(0)
	if got := c.holderOf(0, "L1"); got != 0 {
		t.Fatalf("the test's premise: node 0's log holds L1 (%d)", got)
	}
	mark := len(c.nodes[1].log.String())
	c.start(1)
	c.start(2)
	c.waitActive(0, 1, 2)
	for i := range c.nodes {
		for _, g := range grants {
			if got := c.holderOf(i, g.Key); got != g.Token {
				t.Errorf("node %d: %s held by %d, want %d", i, g.Key, got, g.Token)
			}
		}
	}
	// Node 1 takes the role as the node restarted with the newer state
	// (ruleRestartNewer), or, when node 0 saw it first, node 0 steps down
	// as replaced (ruleReplaced: node 1's log holds the later term) and
	// node 1 is elected by its more advanced log: either way with its
	// grants (checked above).
	log1 := c.nodes[1].log.String()[mark:]
	replaced := strings.Contains(c.nodes[0].log.String(), "stepping down: replaced: "+c.nodes[1].url) && strings.Contains(log1, "election: the most advanced log")
	if !strings.Contains(log1, "restarted with a newer state") && !replaced {
		t.Errorf("node 1 took the role neither as the node restarted with the newer state nor by an election after node 0 stepped down as replaced:\n%s", log1)
	}
}
