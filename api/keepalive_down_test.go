package api_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// A keep-alive whose only node is down (connections refused at once, not
// silent: keepalive_silent_test.go has that) ends in Lost once the lease
// has run out, with an Err that Is ErrLost, instead of retrying for as
// long as the Client lives while the holder goes on. Public report:
// etcd-io/etcd#5571 (concurrency.Session: with etcd down, the keep-alive
// retried forever and Session.Done() never closed).
func TestProtoKeepAliveNodeDownEndsInLost(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "down", api.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l.KeepAlive(ctx)
		srv.Stop()
		select {
		case <-l.Lost():
		case <-time.After(bound):
			t.Fatalf("Lost not closed %v after the node went down under a 1 s lease", bound)
		}
		if err := l.Err(); !errors.Is(err, api.ErrLost) {
			t.Fatalf("Err() = %v, want ErrLost", err)
		}
	})
}
