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

// Lock.Release with a context already cancelled (a request's ctx that
// ended, a shutdown) fails with ctx's error and leaves the Lock as it
// was: the next Release, with a live ctx, releases it, where "a second
// call returns nil" holds only after a first that succeeded. A stale
// Release, or a Client.Release under the old token, after the same Client
// took the key again, never releases the new grant. Public report:
// etcd-io/etcd#22082 (a retried stale Mutex.Unlock deleted a newer lock of
// the same session); the first half is etcd's Mutex.Unlock(ctx) with a
// cancelled ctx, which leaves the key to its session. Passed as written.
func TestProtoReleaseCancelledThenAgainAndStale(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{LeaseMax: 2 * time.Hour}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		l1, err := c.Acquire(ctx, "k", api.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		l1.KeepAlive(ctx)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := l1.Release(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("release with a cancelled ctx: %v, want context.Canceled", err)
		}
		if err := l1.Release(ctx); err != nil {
			t.Fatalf("release after one that failed: %v", err)
		}
		if st := status(t, hc, "k"); st.Holder != nil {
			t.Fatalf("still held after the second release: %+v", st.Holder)
		}

		l2, err := c.Acquire(ctx, "k", api.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := l1.Release(ctx); err != nil {
			t.Fatalf("a released Lock's Release again: %v, want nil", err)
		}
		if err := c.Release(ctx, "k", l1.Token); !errors.Is(err, api.ErrNotHolder) {
			t.Fatalf("release under the old token: %v, want ErrNotHolder", err)
		}
		heldOnce(t, hc, "k", l2.Token)
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
