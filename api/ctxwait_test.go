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

// TestNativeDeadlineLeavesNoGhost: a baton:// acquire without WithWait
// whose ctx has a deadline leaves the node's queue when ctx ends: the
// deadline is sent as its wait, which holds for a node without the cancel
// op (C) too. Before, such an acquire stayed queued until the holder
// released: a WithLock retried with a short timeout left one ghost waiter
// per try.
func TestNativeDeadlineLeavesNoGhost(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	holder, err := hc.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nil, srv.Base("native"))
	const tries = 3
	for i := range tries {
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := c.Acquire(actx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("try %d: acquire of a held key: %v, want the ctx's deadline", i, err)
		}
	}
	// The node's timer starts after the client's: allow it a generous
	// moment (a loaded machine), still well below the holder's minute,
	// which a ghost waiter would stay queued for.
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := status(t, hc, "k")
		if st.Waiters == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters still queued on the node after their acquires' ctx ended", st.Waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNativeDeadlineBeyondWaitMax: a ctx deadline longer than the node's
// wait_max is not refused as a wait the caller never named: the acquire
// waits as without it (up to wait_max).
func TestNativeDeadlineBeyondWaitMax(t *testing.T) {
	srv := startBoth(t, engine.Config{WaitMax: 300 * time.Millisecond}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	if _, err := hc.Acquire(ctx, "k", api.WithLease(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nil, srv.Base("native"))
	_, err := c.Acquire(ctx, "k")
	if !errors.Is(err, api.ErrTimeout) {
		t.Fatalf("acquire of a held key with a deadline beyond wait_max: %v, want ErrTimeout (wait_max)", err)
	}
}
