package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// An acquire whose ctx ends just as the node grants it (the grant's
// answer on its way, here slowed by a proxy), followed at once by Close:
// the grant is released before Close returns, as Close promises for the
// settling of a cancelled acquire. Over baton:// the grant's late answer
// came after Close had begun, which then dropped it, and the key stayed
// held by nobody for the whole lease (7 in 100 rounds of the race without
// the proxy). Over HTTP and baton://.
func TestCloseWaitsForTheGrantOfACancelledAcquire(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		target := srv.Addr
		if proto == "native" {
			target = srv.Native
		}
		p := startProxy(t, target)
		addr := p.URL()
		if proto == "native" {
			addr = "baton://" + p.ln.Addr().String()
		}
		w, err := api.NewClient(api.Config{Addresses: []string{addr}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		direct := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		holder, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		res := acquireAsync(wctx, w, "k", api.WithLease(time.Minute))
		waitWaiters(t, direct, "k", 1)
		p.DelayReplies(300 * time.Millisecond)
		if err := holder.Release(ctx); err != nil { // the node grants k to w's acquire
			t.Fatal(err)
		}
		cancel() // before the grant's answer reaches w
		r := <-res
		if r.err == nil {
			t.Fatalf("the acquire returned a grant (token %d) after its ctx ended before the answer could arrive", r.l.Token)
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the cancelled acquire: %v, want context.Canceled", r.err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if st := status(t, direct, "k"); st.Holder != nil {
			t.Fatalf("after Close, k is held by token %d (lease %vs), the grant the cancelled acquire never received", st.Holder.Token, st.Holder.Lease)
		}
	})
}
