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

// An acquire over baton:// whose ctx ends leaves the node's queue at
// once (the client sends "C <key> <id>"), as an HTTP acquire whose
// request is cancelled does: the waiter behind it is next, and is
// granted at the holder's release, within a hang bound far below the
// cancelled acquire's wait of an hour. Before, the node learned nothing:
// the cancelled waiter stayed queued (and counted toward the limits)
// until it was granted, and that grant, released by the client when it
// came, went before the next waiter's.
func TestNativeCancelLeavesTheQueue(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	holder, err := hc.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nil, srv.Base("native"))
	actx, cancel := context.WithCancel(ctx)
	res := acquireAsync(actx, c, "k", api.WithWait(time.Hour))
	waitWaiters(t, hc, "k", 1)
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", r.err)
	}
	waitWaiters(t, hc, "k", 0)
	next := acquireAsync(ctx, c, "k", api.WithWait(time.Hour))
	waitWaiters(t, hc, "k", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := get(t, next)
	if st := status(t, hc, "k"); st.Holder == nil || st.Holder.Token != l.Token || st.Waiters != 0 {
		t.Fatalf("after the release: %+v, want the next waiter (token %d) holding alone", st, l.Token)
	}
}
