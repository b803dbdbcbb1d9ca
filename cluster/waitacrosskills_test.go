package cluster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestWaitingAcquireOutlivesManyFailovers: an acquire that waits (60 s)
// behind a holder lives through more kill -9 failovers than the client
// has addresses. Each kill breaks the connection it is parked on; the
// client moves it to the promoted node (same Idempotency-Key), and the
// restarted node takes the role back by a handoff, whose 307 moves it
// again. Nodes answered it all along (307s, 503s, a place in the queue):
// it must still be waiting when the holder releases, and be granted.
// Before, the Go client counted every broken connection of the acquire's
// life against the number of its connections, never reset by an answer:
// the sixth kill (3 nodes) failed it with "3 attempts failed, last:
// unexpected EOF" (seen with `baton run --wait 30s` under repeated kills).
func TestWaitingAcquireOutlivesManyFailovers(t *testing.T) {
	testWaitingAcquireOutlivesManyFailovers(t, false)
}

// TestNativeWaitingAcquireOutlivesManyFailovers is the same over baton://.
func TestNativeWaitingAcquireOutlivesManyFailovers(t *testing.T) {
	testWaitingAcquireOutlivesManyFailovers(t, true)
}

func testWaitingAcquireOutlivesManyFailovers(t *testing.T, native bool) {
	c := newCluster(t, 3, false, syncFlags...)
	var addrs []string
	if native {
		addrs = nativeAddrs(t, c)
	} else {
		for _, nd := range c.nodes {
			addrs = append(addrs, nd.url)
		}
	}
	c.startAll()
	c.waitActive(0, 1, 2)
	held := c.acquire(0, "across", "lease=120")
	c.waitReplicated(1, held.Token)
	c.waitReplicated(2, held.Token)

	cl, err := api.NewClient(api.Config{Addresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		l   *api.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := cl.Acquire(ctx, "across", api.WithWait(time.Minute), api.WithLease(time.Minute))
		done <- result{l, err}
	}()
	kills := 3*len(addrs) + 1
	for k := range kills {
		deadline := time.Now().Add(15 * time.Second)
		for c.waitersOn(0, "across") != 1 {
			select {
			case r := <-done:
				t.Fatalf("after %d kills of the active: the waiting acquire ended: %v, %v", k, r.l, r.err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %d kills: the waiter is not queued on node 0 (roles %q)", k, c.roles())
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Each failover its own: the client's patience with a cluster
		// that knows no active (10 s) starts anew once an attempt has
		// been served (in flight) for a second.
		time.Sleep(2500 * time.Millisecond)
		c.kill9(0)
		c.waitActive(-1, 1, 2)
		c.start(0)
		c.waitActive(0, 1, 2) // node 0 syncs and takes the role back
	}
	// The holder releases on the active: the waiter is granted.
	if r, err := do("DELETE", c.nodes[0].url+"/locks/across", "Lock-Token", strconv.FormatUint(held.Token, 10)); err != nil || r.status != 200 {
		t.Fatalf("release of the holder: %v %+v", err, r)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the waiting acquire failed after %d kills of the active: %v", kills, r.err)
	}
	if r.l.Token <= held.Token {
		t.Errorf("granted token %d, not above the holder's %d", r.l.Token, held.Token)
	}
	_ = r.l.Release(context.Background())
}
