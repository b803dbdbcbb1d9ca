package api_test

import (
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// TestNativeSameKeyAcquiresNotSerialized: over baton://, an acquire of a
// key that every connection already has an acquire of waiting is not held
// behind them (a node answers a connection's acquires of one key in
// order, SPEC section 2b): it reaches the node's queue at once, on a
// connection of its own, so its wait runs there and ends on time. It sat
// behind the first: a 1 s WithWait came back after 4 s.
func TestNativeSameKeyAcquiresNotSerialized(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	c := newClient(t, nil, srv.Base("native")) // two connections
	ctx := ctxBound(t)
	held, err := hc.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	first := acquireAsync(ctx, c, "k")
	waitWaiters(t, hc, "k", 1)
	second := acquireAsync(ctx, c, "k")
	waitWaiters(t, hc, "k", 2) // each connection has one waiting now
	third := acquireAsync(ctx, c, "k", api.WithWait(bound))
	waitWaiters(t, hc, "k", 3) // failed here: the third was not sent
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan result{first, second, third} {
		l := get(t, ch) // in the node's FIFO order
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
