package api_test

import (
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// A keep-alive follows a renewal to a shorter lease (Lock.Renew): it
// slept on the schedule of the lease it last renewed, in steps of a
// second at most on Linux (until the renewal was due elsewhere), so a
// lease renewed to 300 ms under a keep-alive of 30 s ran out under it and
// the lock was lost (breaker report of 2026-12-05, as Redisson's watchdog
// lost locks whose lease was changed). A renewal wakes it.
func TestProtoKeepAliveFollowsARenewalToAShorterLease(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "shorter", api.WithLease(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l.KeepAlive(ctx)
		if err := l.Renew(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Lost():
			t.Fatalf("lost under a keep-alive after a renewal to 300 ms: %v", l.Err())
		case <-time.After(2 * time.Second): // over six of the new leases
		}
		st, err := newClient(t, nil, srv.Base("http")).Status(ctx, "shorter")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Token != l.Token {
			t.Fatalf("holders %+v, want token %d", st.Holders, l.Token)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
