package cluster_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestBusySplitBrainResolvesAfterHealing replays TestHistoryChaos
// CHAOS_SEED=2940 (load average 32): both standbys promoted themselves
// beside node 0, starved but alive and granting; each side kept granting,
// and the two actives stayed side by side for 4.8 s after they could see
// each other, until one side went quiet, while clients held one lock twice.
// Each active compared its own state token, fresh, with the other's from
// its last answer, older by a poll's latency: both busy, each found its
// own state newer and kept it (SPEC section 3: they resolve it). Here a
// cut makes two actives, clients keep granting on both (directly, not
// through the proxies), and the cut is healed with the peers' answers
// slowed to 150 ms: one active must remain while the clients go on.
func TestBusySplitBrainResolvesAfterHealing(t *testing.T) {
	c := newCluster(t, 2, true)
	c.startAll()
	c.waitActive(0, 1)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	grants := make([]int, len(c.nodes))
	var mu sync.Mutex
	for i := range c.nodes {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				base := "http://" + c.nodes[i].listen + "/locks/"
				key := fmt.Sprintf("busy-%d-%d", i, g)
				for {
					select {
					case <-stop:
						return
					default:
					}
					a, err := do(http.MethodPost, base+key+"?lease=5&wait=1")
					if err != nil || a.status != http.StatusOK {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					mu.Lock()
					grants[i]++
					mu.Unlock()
					_, _ = do(http.MethodDelete, base+key+fmt.Sprintf("?token=%d", a.grant.Token))
				}
			}()
		}
	}
	defer func() { close(stop); wg.Wait() }()

	c.nodes[0].proxy.setCut(true)
	c.nodes[1].proxy.setCut(true)
	c.waitActive(1)
	if r := c.roles(); r[0] != api.RoleActive {
		t.Fatalf("roles during the partition %v; want both active", r)
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	before := append([]int(nil), grants...)
	mu.Unlock()
	// The peers' answers (polls) take 150 ms through the proxies, as on a
	// loaded machine: each side grants many times while its poll of the
	// other is on its way.
	for _, nd := range c.nodes {
		nd.proxy.lag.Store(int64(150 * time.Millisecond))
	}
	c.nodes[0].proxy.setCut(false)
	c.nodes[1].proxy.setCut(false)
	healed := time.Now()

	// Healed, each node polls the other every heartbeat: one steps down
	// within a few heartbeats; the bound is for a loaded machine.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := c.roles()
		if (r[0] == api.RoleActive) != (r[1] == api.RoleActive) {
			mu.Lock()
			t.Logf("one active (%v) %s after healing; grants on each node before the heal %v, now %v", r, time.Since(healed).Round(time.Millisecond), before, grants)
			for _, nd := range c.nodes {
				for _, l := range strings.Split(nd.log.String(), "\n") {
					if strings.Contains(l, "stepping down") {
						t.Log(l)
					}
				}
			}
			mu.Unlock()
			return
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("two actives 20 s after healing while clients granted on both (grants on each node before the heal %v, now %v): %v", before, grants, c.roles())
}
