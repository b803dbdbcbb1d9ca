package cluster_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// An acquire over baton:// whose caller gives up while its active hands
// off (SIGINT) or has just died (kill -9, before the promotion) leaves no
// place on the promoted node: the waiter's place, replicated there, is
// settled (asked again under the acquire's id with a 1 ms wait) as over
// HTTP. Before, a late M (the demoted active naming its successor, the
// answer to the acquire that the cancel, C, met) was taken for an answer
// that leaves nothing: the kept place stayed queued on the new active,
// took the lock at the holder's release and held it for nobody until its
// claim deadline (5 s after the promotion), the queue behind it waiting
// (breaker W: 11 of 13 runs after a SIGINT, 11 of 11 after a kill -9;
// over http:// 0 of 19). Client.Close waits for the settling, so the
// place is gone when it returns.
// The same over http://. The cancels come 1, 2 and 3 ms after the
// SIGINT too, where an acquire whose M (307 over HTTP) came as its caller
// gave up, or whose repeat on the successor had not gone out yet, was not
// settled (a verifier's harness: 4 of 20 such native cases, 1 of 30 over
// HTTP). Those two are races of a millisecond that this test meets only
// now and then (two runs without their fixes passed): the harness's
// repeats were what showed them.
func TestNativeAcquireCancelledAtAFailoverLeavesNoPlace(t *testing.T) {
	for _, name := range []string{"native/handoff/1ms", "native/handoff/2ms", "native/handoff/3ms", "native/kill-9/300ms",
		"http/handoff/1ms", "http/handoff/2ms", "http/handoff/3ms", "http/kill-9/300ms"} {
		t.Run(name, func(t *testing.T) {
			f := strings.Split(name, "/")
			proto, how := f[0], f[1]
			after, err := time.ParseDuration(f[2]) // from the signal to the cancel
			if err != nil {
				t.Fatal(err)
			}
			c := newCluster(t, 2, false)
			var addrs []string
			if proto == "http" {
				for _, nd := range c.nodes {
					addrs = append(addrs, nd.url)
				}
			} else {
				addrs = nativeAddrs(t, c)
			}
			c.startAll()
			c.waitActive(0, 1)
			held := c.acquire(0, "nc", "lease=60")
			c.waitReplicated(1, held.Token)

			cl, err := api.NewClient(api.Config{Addresses: addrs})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				l, err := cl.Acquire(ctx, "nc", api.WithWait(time.Minute), api.WithLease(time.Minute))
				if err == nil {
					err = errors.New("granted " + l.Node)
				}
				done <- err
			}()
			c.waitQueuedOnBoth("nc", 1)
			// After a kill -9: before the promotion (failover_timeout, 1
			// s). After a SIGINT: as the M (307) comes, or the repeat
			// on the successor is about to go out.
			if how == "kill-9" {
				c.kill9(0)
			} else {
				c.signal(0, syscall.SIGINT)
			}
			time.Sleep(after)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled acquire: %v, want context.Canceled", err)
			}
			c.waitActive(1)
			cl.Close() // waits for the settling of what the acquire left
			if n := c.waitersOn(1, "nc"); n != 0 {
				t.Fatalf("the promoted node still queues %d waiter(s) for the cancelled acquire", n)
			}
			c.release(1, "nc", held.Token)
			if got := c.holder(1, "nc"); got != 0 {
				t.Errorf("after the holder's release nc is held by %d, a grant nobody claims", got)
			}
		})
	}
}

// An acquire over baton:// whose caller gives up while the client dials a
// connection of its own for it (every connection to the node already
// carries an acquire of the key: the client's other waiters) leaves no
// place either: its earlier attempt, on the active that died, left one
// that the standby holds (replicated) and keeps once promoted. Before,
// such an acquire returned context.Canceled without settling it, and the
// kept place took the lock at the holder's release and held it for
// nobody until its claim deadline (breaker W's stress, 16 waiters of one
// key over four clients with 20 % of the acquires cancelled and the
// active killed every few seconds: gaps of 4.7-6 s without a holder).
// Here new connections to the standby's native port are dropped (a SYN
// with no answer) from just before the kill until after the cancels, so
// that the client's dials of connections of its own to it are what the
// cancels meet; the connection it had stays up.
func TestNativeAcquireCancelledWhileDialingLeavesNoPlace(t *testing.T) {
	c := newCluster(t, 2, false)
	fw := newFirewall(t, c)
	addrs := nativeAddrs(t, c)
	_, standbyPort, _ := strings.Cut(strings.TrimPrefix(addrs[1], "baton://"), ":")
	c.startAll()
	c.waitActive(0, 1)
	held := c.acquire(0, "nd", "lease=60")
	c.waitReplicated(1, held.Token)

	cl, err := api.NewClient(api.Config{Addresses: addrs, ConnsPerAddress: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const waiters = 4
	done := make(chan error, waiters)
	for range waiters {
		go func() {
			l, err := cl.Acquire(ctx, "nd", api.WithWait(time.Minute), api.WithLease(time.Minute))
			if err == nil {
				err = errors.New("granted " + l.Node)
			}
			done <- err
		}()
	}
	c.waitQueuedOnBoth("nd", waiters)
	noSyn := []string{fw.chain + "-in", "-p", "tcp", "--syn", "-d", nodeHost(1), "--dport", standbyPort, "-j", "DROP"}
	fw.ipt(append([]string{"-A"}, noSyn...)...)
	c.kill9(0)
	time.Sleep(500 * time.Millisecond) // the attempts move to the standby
	cancel()
	for range waiters {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled acquire: %v, want context.Canceled", err)
		}
	}
	fw.ipt(append([]string{"-D"}, noSyn...)...)
	c.waitActive(1)
	cl.Close() // waits for the settling of what the acquires left
	if n := c.waitersOn(1, "nd"); n != 0 {
		t.Fatalf("the promoted node still queues %d waiter(s) for the cancelled acquires", n)
	}
}

// nativeAddrs gives each node of c (not started yet) a native listener
// and returns their baton:// addresses, in node order.
func nativeAddrs(t *testing.T, c *testCluster) []string {
	c.args = map[int][]string{}
	var addrs []string
	for i := range c.nodes {
		addr := freeAddr(t, nodeHost(i))
		c.args[i] = []string{"--native-listen", addr}
		addrs = append(addrs, "baton://"+addr)
	}
	return addrs
}

// waitQueuedOnBoth waits (15 s at most) until nodes 0 (the active) and 1
// (its standby) each queue n waiters of key.
func (c *testCluster) waitQueuedOnBoth(key string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for c.waitersOn(0, key) != n || c.waitersOn(1, key) != n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%d waiter(s) of %s are not queued on both nodes (active %d, standby %d)", n, key, c.waitersOn(0, key), c.waitersOn(1, key))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
