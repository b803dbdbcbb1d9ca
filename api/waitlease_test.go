package api_test

import (
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// TestProtoKeepAliveAfterAWaitLongerThanTheLease: a lock granted after a
// wait in the queue longer than its lease is kept alive. The node runs the
// lease from the grant, but the Lock counted it from the acquire's send,
// so its keep-alive found the lease run out before it began and marked the
// lock lost at once ("lease ran out before a renewal succeeded"), and
// WithLock cancelled fn: under contention every WithLock whose wait
// outlasted its lease failed. The client side of etcd-io/etcd#9921 ("Lock
// response when lease has expired": a waiter granted after a wait longer
// than its lease) and #11456: Acquire now renews such a grant at once and
// counts the lease from the renewal.
func TestProtoKeepAliveAfterAWaitLongerThanTheLease(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		h, err := hc.Acquire(ctx, "k", api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		const lease = 2 * time.Second
		go func() {
			// The waiter below waits longer than its lease.
			time.Sleep(lease + lease/2)
			_ = h.Release(ctx)
		}()
		l, err := c.Acquire(ctx, "k", api.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		l.KeepAlive(ctx)
		first := l.Expiry()
		eventually(t, "renewed", func() bool {
			select {
			case <-l.Lost():
				t.Fatalf("a lock granted after a wait longer than its lease was lost before its first renewal: %v", l.Err())
			default:
			}
			return l.Expiry().After(first)
		})
		heldOnce(t, hc, "k", l.Token)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
