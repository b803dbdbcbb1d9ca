package api_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// A keep-alive reports the lock lost once the machine was suspended for
// longer than what was left of the lease: the node's clock ran on and
// ended it, while Go's monotonic clock (and the keep-alive's timer) stood
// still. Here the suspend is simulated (the node, in the same process,
// was not suspended and would renew): the client must not count on it.
// Without the suspended clock the keep-alive slept its half lease after
// the resume and renewed, and Lost stayed open.
func TestKeepAliveCountsASuspend(t *testing.T) {
	var slept atomic.Int64
	api.SetSuspended(t, func() time.Duration { return time.Duration(slept.Load()) })
	srv := startServer(t, engine.Config{}, nil)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	const lease = 10 * time.Second
	l, err := c.Acquire(ctx, "laptop", api.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	l.KeepAlive(ctx)
	slept.Store(int64(lease + time.Second)) // the machine resumes from a suspend
	select {
	case <-l.Lost():
	case <-time.After(bound):
		t.Fatalf("not lost %v after a suspend longer than the lease", bound)
	}
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), "suspended") {
		t.Fatalf("Err() = %v; want the suspend named", err)
	}
}
