package api_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// refusingLog is an engine.Log that refuses every record while refuse is
// set, as a log on a full disk does (the node answers its changes 503).
type refusingLog struct {
	mu     sync.Mutex
	n      uint64
	refuse atomic.Bool
}

func (l *refusingLog) Append([]byte) (uint64, error) {
	if l.refuse.Load() {
		return 0, errors.New("no space left on device")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

func (l *refusingLog) Wait(uint64) error { return nil }

// A keep-alive whose renewals the node refuses as unavailable (503: its log
// cannot write) until the lease runs out ends in Lost with an Err that says
// why: the node's answer, not only that no renewal succeeded in time (Go's
// "context deadline exceeded", which `baton run` printed as "no node
// answered in time" although the node answered every renewal).
func TestProtoKeepAliveRefusedUntilTheLeaseEndsSaysWhy(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		log := &refusingLog{}
		srv := startBoth(t, engine.Config{Log: log}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "refused", api.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		log.refuse.Store(true)
		l.KeepAlive(ctx)
		select {
		case <-l.Lost():
		case <-time.After(bound):
			t.Fatalf("Lost not closed %v after the node refused every renewal of a 1 s lease", bound)
		}
		err = l.Err()
		if !errors.Is(err, api.ErrLost) || !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "cannot write") {
			t.Fatalf("Err() = %v; want ErrLost wrapping the node's refusal (ErrUnavailable, its message saying the log cannot write)", err)
		}
	})
}
