package cluster_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestAcquiresThatWaitedForAFailoverQueueInTheirOrder: acquires that reach
// a standby while no node is active (the active killed, the standby not yet
// promoted) wait there, and once it is promoted they take their places in
// the key's queue in the order they came, so that they are granted in
// that order. They were granted in any order, often the reverse (a
// tester's 7 of 7 kill -9 runs, over HTTP and baton://, 2026-12-06): woken
// together, they raced to the queue. Over HTTP and the native protocol.
func TestAcquiresThatWaitedForAFailoverQueueInTheirOrder(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "native"}[native], func(t *testing.T) {
			testArrivalOrder(t, native)
		})
	}
}

func testArrivalOrder(t *testing.T, native bool) {
	const n = 5
	c := newCluster(t, 2, false, syncFlags...)
	nativeAddr := freeAddr(t, nodeHost(1))
	c.args = map[int][]string{1: {"--native-listen", nativeAddr}}
	c.startAll()
	c.waitActive(0, 1)
	held := c.acquire(0, "order", "lease=120")
	c.waitReplicated(1, held.Token)
	c.kill9(0)
	// Until node 1 knows no active, an acquire would be told 307 to the
	// dead node instead of waiting.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, err := c.view(1); err == nil && v.Active == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 still names an active 10 s after the kill (roles %q)", c.roles())
		}
		time.Sleep(5 * time.Millisecond)
	}
	type granted struct {
		who   int
		token uint64
		err   string
	}
	grants := make(chan granted, n)
	for i := range n {
		if native {
			conn := dialLine(t, nativeAddr)
			conn.send(fmt.Sprintf("A order 60 60 id=w%d", i))
			go func() {
				f := strings.Fields(conn.read())
				if len(f) < 4 || f[2] != "OK" {
					grants <- granted{who: i, err: strings.Join(f, " ")}
					return
				}
				tok, _ := strconv.ParseUint(f[3], 10, 64)
				grants <- granted{who: i, token: tok}
			}()
		} else {
			go func() {
				req, _ := http.NewRequest(http.MethodPost, "http://"+c.nodes[1].listen+"/locks/order?lease=60&wait=60", nil)
				req.Header.Set(api.HeaderIdempotencyKey, fmt.Sprintf("w%d", i))
				cl := &http.Client{Timeout: 90 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := cl.Do(req)
				if err != nil {
					grants <- granted{who: i, err: err.Error()}
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var g api.Grant
				if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &g) != nil {
					grants <- granted{who: i, err: fmt.Sprintf("%d %s", resp.StatusCode, b)}
					return
				}
				grants <- granted{who: i, token: g.Token}
			}()
		}
		// Apart enough to come in this order, all within the failover
		// timeout.
		time.Sleep(failoverTimeout / (2 * n))
	}
	c.waitActive(1)
	deadline = time.Now().Add(20 * time.Second)
	for c.waitersOn(1, "order") != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d acquires queued on the promoted node", c.waitersOn(1, "order"), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tok := held.Token
	var order []int
	for range n {
		c.release(1, "order", tok)
		select {
		case g := <-grants:
			if g.err != "" {
				t.Fatalf("acquire %d: %s", g.who, g.err)
			}
			order = append(order, g.who)
			tok = g.token
		case <-time.After(20 * time.Second):
			t.Fatalf("no grant 20 s after a release; granted so far, in order: %v", order)
		}
	}
	for i, who := range order {
		if who != i {
			t.Fatalf("granted in the order %v; they came in the order 0 to %d", order, n-1)
		}
	}
}
