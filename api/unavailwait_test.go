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

// An acquire with a wait, on a node that answers unavailable (503, E
// unavailable: no active node known) for longer than the wait, gives up
// once its wait has run out rather than after the failover patience (an
// hour here): `baton acquire --wait 2s` took 15 s. Over HTTP and
// baton://.
func TestAcquireAnsweredUnavailableGivesUpWithItsWait(t *testing.T) {
	api.SetFailoverPatience(t, time.Hour)
	eachProto(t, func(t *testing.T, proto string) {
		// A standby engine that no cluster promotes: every change is
		// answered unavailable.
		srv := startBoth(t, engine.Config{Standby: true}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		_, err := c.Acquire(ctxBound(t), "k", api.WithWait(300*time.Millisecond))
		if !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("acquire with a 300 ms wait, answered unavailable: %v, want ErrUnavailable once the wait ran out", err)
		}
	})
}
