package cluster_test

import (
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestPausedActiveAnswersNoTimeoutTheActiveMayNotHave: a waiter whose
// wait runs out while its active is paused (SIGSTOP) past a failover must
// not be told 408 by the resumed node's timer: the promoted standby has
// the waiter's place (with its Idempotency-Key) and granted it the lock
// when the holder released, so "408, nothing held" would be false, and
// the client's repeat gets the grant (README: a caller told 408 never
// holds the lock). Found by a fresh tester with sync_standbys 0: the
// resumed node wrote the timeout and answered 408 before it knew it had
// been replaced. With 1 the timeout waits for its acknowledgement across
// the step-down, and was answered 503 already.
func TestPausedActiveAnswersNoTimeoutTheActiveMayNotHave(t *testing.T) {
	for _, sync := range []string{"0", "1"} {
		t.Run("sync_standbys="+sync, func(t *testing.T) {
			c := newCluster(t, 2, false, "--sync-standbys", sync)
			c.startAll()
			c.waitActive(0, 1)
			held := c.acquire(0, "k", "lease=60")
			const key = "paused-timeout-waiter"
			waiter := postNoFollow("http://"+c.nodes[0].listen+"/locks/k?lease=60&wait=2", api.HeaderIdempotencyKey, key)
			deadline := time.Now().Add(20 * time.Second)
			// On both nodes: with sync_standbys 0 the grant and the place
			// reach node 1 a moment after they are answered, and a pause
			// before then would lose them (the README's asynchronous
			// failover), which is not what this test is about.
			for c.waitersOn(0, "k") != 1 || c.waitersOn(1, "k") != 1 || c.holderOf(1, "k") != held.Token {
				if time.Now().After(deadline) {
					t.Fatal("the holder and the waiter never reached node 1")
				}
				time.Sleep(20 * time.Millisecond)
			}
			queued := time.Now()
			c.signal(0, syscall.SIGSTOP)
			c.waitActive(1)
			// The holder releases on the promoted node, which hands k to
			// the waiter's place (it came with the stream).
			rel, err := do(http.MethodDelete, "http://"+c.nodes[1].listen+"/locks/k?token="+strconv.FormatUint(held.Token, 10))
			if err != nil || rel.status != http.StatusNoContent && rel.status != http.StatusOK {
				t.Fatalf("release on node 1: %v %d %s", err, rel.status, rel.body)
			}
			time.Sleep(time.Until(queued.Add(2500 * time.Millisecond)))
			c.signal(0, syscall.SIGCONT) // its timer ends the wait at once
			var a answer
			select {
			case a = <-waiter:
				t.Logf("waiter: %d %s", a.status, a.body)
			case <-time.After(20 * time.Second):
				t.Fatal("the waiter got no answer")
			}
			again, err := do(http.MethodPost, "http://"+c.nodes[1].listen+"/locks/k?lease=60&wait=2", api.HeaderIdempotencyKey, key)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("repeat on node 1: %d %s", again.status, again.body)
			if a.status == http.StatusRequestTimeout && again.status == http.StatusOK {
				t.Fatalf("the resumed node told the waiter 408 (%s), and its repeat on the active got the lock (%s)", a.body, again.body)
			}
			if a.status != http.StatusServiceUnavailable && a.status != http.StatusTemporaryRedirect {
				t.Errorf("the waiter got %d %s from the resumed node, want 503 or 307 (repeat on the active)", a.status, a.body)
			}
		})
	}
}
