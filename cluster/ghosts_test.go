package cluster_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/history"
)

// Waiters and grants that no client can come back for (issue 11, defects 1
// and 2): they must not outlive a failover or a handoff.

// parkOn sends an acquire of key to node i in the background, with an
// Idempotency-Key when id is set, and waits until it is queued there and
// its place has reached every standby in standbys. The answer (status 0 if
// the request failed) arrives on the channel; follow says whether a 307 is
// followed.
func (c *testCluster) parkOn(i int, key, query, id string, follow bool, standbys ...int) <-chan answer {
	c.t.Helper()
	before := c.waitersOn(i, key)
	ch := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/"+key+"?"+query, nil)
		if id != "" {
			req.Header.Set(api.HeaderIdempotencyKey, id)
		}
		cl := &http.Client{Timeout: 60 * time.Second}
		if !follow {
			cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		}
		a := answer{}
		if resp, err := cl.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a = answer{status: resp.StatusCode, body: string(b)}
			if resp.StatusCode == http.StatusOK {
				_ = json.Unmarshal(b, &a.grant)
			}
		}
		ch <- a
	}()
	deadline := time.Now().Add(20 * time.Second)
	for c.waitersOn(i, key) != before+1 {
		if time.Now().After(deadline) {
			c.t.Fatalf("the acquire of %s never queued on node %d", key, i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A grant after the enqueue is replicated after it: once a standby has
	// its token, it has the waiter too.
	barrier := c.grantOn(i, "barrier/"+key, "lease=1")
	for _, j := range standbys {
		c.waitReplicated(j, barrier.Token)
	}
	return ch
}

// lockStatus returns key's state on node i (which must be the active). A
// 503 (a node that was starved on a loaded machine serves again only once
// it has polled its peers) is retried for a while.
func (c *testCluster) lockStatus(i int, key string) api.LockStatus {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := do(http.MethodGet, "http://"+c.nodes[i].listen+"/locks/"+key)
		if err == nil && a.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var st api.LockStatus
		if err == nil && a.status == http.StatusOK {
			err = json.Unmarshal([]byte(a.body), &st)
		}
		if err != nil || a.status != http.StatusOK {
			c.t.Fatalf("status of %s on node %d: %v %d %s", key, i, err, a.status, a.body)
		}
		return st
	}
}

// release releases key on node i, retrying a 503 as lockStatus does.
func (c *testCluster) release(i int, key string, token uint64) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := do(http.MethodDelete, fmt.Sprintf("http://%s/locks/%s?token=%d", c.nodes[i].listen, key, token))
		if err == nil && a.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || a.status != http.StatusOK {
			c.t.Fatalf("release of %s/%d on node %d: %v %d %s", key, token, i, err, a.status, a.body)
		}
		return
	}
}

// holderOf returns the token holding key on node i (0 = free), as
// lockStatus reads it.
func (c *testCluster) holderOf(i int, key string) uint64 {
	c.t.Helper()
	if h := c.lockStatus(i, key).Holder; h != nil {
		return h.Token
	}
	return 0
}

// grantOn takes key on node i as acquire does, retrying a 503 as
// lockStatus does.
func (c *testCluster) grantOn(i int, key, query string) api.Grant {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := do(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/"+key+"?"+query)
		if err == nil && a.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || a.status != http.StatusOK {
			c.t.Fatalf("acquire %s on node %d: %v %d %s", key, i, err, a.status, a.body)
		}
		return a.grant
	}
}

// untilClockPasses sleeps until the clock's microseconds, which a node's
// next token starts from (engine.Promote, the token source), pass tok: a
// node that grants after it issues a higher token than tok, however far a
// promotion's reservation ran ahead of the clock (TokenMargin above the
// larger of the clock and every token seen: up to 2 s when a promotion
// follows another within a second).
func untilClockPasses(tok uint64) {
	time.Sleep(time.Until(time.UnixMicro(int64(tok))) + 100*time.Millisecond)
}

// Defect 1: a waiter without an Idempotency-Key whose active is killed can
// never be resumed (its ticket never left the dead node), so the new active
// must not keep it: released, the key is free at once, not held for 5 s
// under a token nobody has.
func TestFailoverDropsAnonymousWaiter(t *testing.T) {
	c := newCluster(t, 2, false)
	c.startAll()
	c.waitActive(0, 1)
	a := c.grantOn(0, "k", "lease=30")
	waiter := c.parkOn(0, "k", "lease=30&wait=0", "", false, 1)

	c.kill9(0)
	if ans := <-waiter; ans.status != 0 {
		t.Fatalf("the waiter on the killed node got %d %s, want a broken connection", ans.status, ans.body)
	}
	c.waitActive(1)
	if st := c.lockStatus(1, "k"); st.Waiters != 0 {
		t.Errorf("the new active keeps %d waiter(s) for k; want none: the anonymous waiter died with node 0", st.Waiters)
	}
	c.release(1, "k", a.Token)
	if st := c.lockStatus(1, "k"); st.Holder != nil {
		t.Errorf("after the release k is held by token %d (granted %v), which no client has; want it free at once",
			st.Holder.Token, st.Holder.GrantedAt.Format("15:04:05.000"))
	}
}

// A graceful handoff keeps the same anonymous waiter: the old active
// redirects its parked call with its ticket and the waiter resumes its
// place on the new active.
func TestHandoffKeepsAnonymousWaiter(t *testing.T) {
	c := newCluster(t, 2, false)
	c.startAll()
	c.waitActive(0, 1)
	a := c.grantOn(0, "k", "lease=30")
	waiter := c.parkOn(0, "k", "lease=30&wait=0", "", true, 1)

	c.signal(0, syscall.SIGTERM)
	c.waitActive(1)
	deadline := time.Now().Add(20 * time.Second)
	for c.lockStatus(1, "k").Waiters != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("k has %d waiters on the new active, want the redirected one", c.lockStatus(1, "k").Waiters)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.release(1, "k", a.Token)
	ans := <-waiter
	if ans.status != http.StatusOK || ans.grant.Token <= a.Token {
		t.Fatalf("the anonymous waiter got %d %s across the handoff; want the grant after token %d", ans.status, ans.body, a.Token)
	}
	if got := c.holderOf(1, "k"); got != ans.grant.Token {
		t.Errorf("k is held by %d, want the resumed waiter's %d", got, ans.grant.Token)
	}
}

// Defect 2: a grant to a waiter that never came back after a failover
// waits 5 s for its claim, and that claim deadline survives a handoff
// (SIGTERM of the new active, or the restarted first node taking its role
// back) exactly like a lease deadline: the key is then released at the
// claim deadline, not after the grant's 30 s lease. The history checker's
// ghost-grant check watches the whole scenario.
func TestClaimDeadlineSurvivesHandoff(t *testing.T) {
	for _, how := range []string{"sigterm", "restart"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t, 3, false)
			c.startAll()
			c.waitActive(0, 1, 2)
			stop := make(chan struct{})
			samples := sampleHolders(c, stop)
			var received []history.Grant
			a := c.grantOn(0, "k", "lease=30")
			received = append(received, history.Grant{Key: "k", Token: a.Token})
			waiter := c.parkOn(0, "k", "lease=30&wait=0", "never-comes-back", false, 1, 2)

			c.kill9(0)
			<-waiter
			c.waitActive(1, 2)
			c.release(1, "k", a.Token)
			st := c.lockStatus(1, "k")
			if st.Holder == nil {
				t.Fatal("the replicated waiter was not granted on release")
			}
			ghost := *st.Holder
			// The status gives the claim deadline as its expiry (the node
			// takes it back then), the lease runs on to granted + lease.
			leaseEnd := ghost.GrantedAt.Add(time.Duration(ghost.Lease * float64(time.Second)))
			if !ghost.ExpiresAt.Before(leaseEnd) {
				t.Errorf("the unclaimed grant %d expires at %v, want its claim deadline, before its lease's end %v",
					ghost.Token, ghost.ExpiresAt.Format("15:04:05.000"), leaseEnd.Format("15:04:05.000"))
			}
			t.Logf("grant %d awaits its claim until %v; its lease ends %v", ghost.Token, ghost.ExpiresAt.Format("15:04:05.000"), leaseEnd.Format("15:04:05.000"))

			next := 2
			switch how {
			case "sigterm":
				c.signal(1, syscall.SIGTERM)
				c.waitActive(2)
			case "restart":
				c.start(0)
				c.waitActive(0, 1, 2)
				next = 0
			}
			if got := c.holderOf(next, "k"); got != ghost.Token {
				t.Fatalf("k is held by %d on node %d right after the handoff, want %d: the handoff came too late to test anything", got, next, ghost.Token)
			}
			// wait=8 ends long before the ghost's 30 s lease does: a grant comes
			// only from the claim deadline.
			b, err := do(http.MethodPost, "http://"+c.nodes[next].listen+"/locks/k?lease=5&wait=8")
			granted := time.Now()
			switch {
			case err != nil || b.status != http.StatusOK:
				t.Errorf("acquire after the handoff: %v %d %s; want a grant once the unclaimed grant %d passed its claim deadline", err, b.status, b.body, ghost.Token)
			case b.grant.Token <= ghost.Token || !granted.Before(leaseEnd):
				t.Errorf("granted %d at %v; want a token above %d before the unclaimed grant's lease ended (%v)",
					b.grant.Token, granted.Format("15:04:05.000"), ghost.Token, leaseEnd.Format("15:04:05.000"))
			default:
				received = append(received, history.Grant{Key: "k", Token: b.grant.Token})
			}
			close(stop)
			if !checkGhostGrants(t, received, samples.wait(), 0, nil, nil)[ghost.Token] {
				t.Errorf("the checker never saw the unclaimed grant %d", ghost.Token)
			}
		})
	}
}
