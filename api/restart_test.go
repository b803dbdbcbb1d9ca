package api_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// A call made while every connection is down waiting for its next dial
// failed with the error of the connections' end ("connection closed")
// until the next redial, ReconnectInterval later: after every node was
// killed and restarted it still said so, though the node was answering,
// and with the node still down it never said what failed now. Such a
// call now has the connections dialled at once: it is served by the
// restarted node, and its error while the node is down is that dial's
// (connection refused). Over HTTP and baton://. ReconnectInterval is a minute here, so that no
// background redial comes in between.
func TestCallWithEveryConnectionDownDialsAgain(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) {
			srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
			c := newClient(t, func(cfg *api.Config) { cfg.ReconnectInterval = time.Minute }, srv.Base(proto))
			ctx := ctxBound(t)
			acquire := func(key string) error {
				_, err := c.Acquire(ctx, key, api.WithLease(time.Minute), api.WithWait(time.Second))
				return err
			}
			if err := acquire("a"); err != nil {
				t.Fatal(err)
			}
			srv.Stop()
			var last error
			eventually(t, "failing with the dial's error", func() bool {
				last = acquire("b")
				return errors.Is(last, syscall.ECONNREFUSED)
			})
			if !errors.Is(last, api.ErrUnavailable) {
				t.Fatalf("acquire with the node down: %v, want ErrUnavailable", last)
			}
			srv.Restart(t)
			if err := acquire("c"); err != nil {
				t.Fatalf("acquire once the node is back: %v", err)
			}
		})
	}
}
