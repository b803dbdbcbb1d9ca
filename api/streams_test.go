package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// startServerStreams starts a node whose HTTP/2 connections carry at most
// streams concurrent streams (baton serve: 1000).
func startServerStreams(t *testing.T, streams int) *testServer {
	t.Helper()
	s := &testServer{ecfg: engine.Config{DataDir: t.TempDir()}, streams: streams}
	s.start(t, "127.0.0.1:0")
	s.Addr = s.ln.Addr().String()
	s.URL = "http://" + s.Addr
	t.Cleanup(s.Stop)
	return s
}

// Renewals and releases never wait behind parked acquires (issue 11,
// defect 7): with more acquires parked through one Client than its two
// connections carry at the node's stream limit, a lock of that Client is
// still renewed and released, and every parked acquire reached the node's
// queue (the Client opened more connections past the limit instead of
// holding the rest back).
func TestShortCallsNeverWaitBehindParkedAcquires(t *testing.T) {
	const streams = 100
	srv := startServerStreams(t, streams)
	c := newClient(t, nil, srv.URL) // one address: two connections
	direct := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)

	busy, err := direct.Acquire(ctx, "busy", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := c.Acquire(ctx, "mine", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const parked = 2*streams + 50
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, parked)
	for range parked {
		go func() {
			_, err := c.Acquire(pctx, "busy", api.WithLease(time.Minute))
			ended <- err
		}()
	}
	// Two connections' worth of streams are taken (without the fix, the
	// rest of the acquires and every later call of c queue in c for one).
	eventually(t, "the parked acquires on two connections' streams", func() bool {
		return status(t, direct, "busy").Waiters >= 2*streams
	})

	before := mine.Expiry()
	if err := mine.Renew(ctx, 0); err != nil {
		t.Fatalf("renew behind %d parked acquires: %v", parked, err)
	}
	if !mine.Expiry().After(before) {
		t.Fatalf("renewed expiry %v, not after %v", mine.Expiry(), before)
	}
	if st := status(t, c, "mine"); st.Holder == nil || st.Holder.Token != mine.Token {
		t.Fatalf("status of mine through the same client: %+v", st)
	}
	if err := mine.Release(ctx); err != nil {
		t.Fatalf("release behind %d parked acquires: %v", parked, err)
	}
	if st := status(t, direct, "mine"); st.Holder != nil {
		t.Fatalf("mine still held after its release: %+v", st.Holder)
	}
	// Every parked acquire is in the node's queue, not held back in c.
	waitWaiters(t, direct, "busy", parked)
	if n := srv.Accepted(); n <= 4 {
		t.Errorf("the node accepted %d connections; want more than the two of each client", n)
	}

	cancel()
	for range parked {
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("parked acquire: %v, want context.Canceled", err)
		}
	}
	waitWaiters(t, direct, "busy", 0)
	if err := busy.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
