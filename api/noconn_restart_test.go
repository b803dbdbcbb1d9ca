package api_test

import (
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// A single node restarted (an upgrade, a crash and its restart) while an
// acquire waited on it, or before an acquire's first connection: the
// acquire keeps asking while no connection can be made, for
// failoverPatience within its wait, as it does through 503s, and is
// granted by the node once it is back. It failed at once with
// "connection refused" (the Go client and the CLI; the JavaScript client
// kept trying). Over HTTP and baton://.
func TestAcquireRidesOutASingleNodeRestart(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		if _, err := c.Acquire(ctx, "k", api.WithLease(time.Minute)); err != nil {
			t.Fatal(err)
		}
		type result struct {
			l   *api.Lock
			err error
		}
		acquire := func(key string) <-chan result {
			ch := make(chan result, 1)
			go func() {
				l, err := c.Acquire(ctx, key, api.WithLease(time.Minute), api.WithWait(30*time.Second))
				ch <- result{l, err}
			}()
			return ch
		}

		// A waiter queued behind the holder when the node stops.
		waiting := acquire("k")
		// Reads are HTTP's (baton:// has none).
		waitWaiters(t, newClient(t, nil, srv.URL), "k", 1)
		srv.Stop()
		time.Sleep(time.Second) // the node stays down a while: a fault, not a timing claim
		srv.Restart(t)          // an engine without a log: the holder is gone
		r := <-waiting
		if r.err != nil {
			t.Fatalf("an acquire waiting across the node's restart: %v, want granted once it is back", r.err)
		}
		if r.l.Token == 0 {
			t.Fatalf("granted with token 0")
		}

		// An acquire made while the node is down.
		srv.Stop()
		later := acquire("other")
		time.Sleep(time.Second)
		srv.Restart(t)
		if r := <-later; r.err != nil {
			t.Fatalf("an acquire made while the node was down: %v, want granted once it is back", r.err)
		}
	})
}
