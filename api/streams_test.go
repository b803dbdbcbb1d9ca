package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
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

// A node whose stream limit (10) is below the 100 streams Go's transport
// assumes until the node's SETTINGS arrive: a fresh Client fires more
// acquires at once than the limit, and every one reaches the node's queue.
// Without the first round trip on each new connection (handshake), the
// streams past the limit were refused (REFUSED_STREAM) and the acquires
// failed, or waited in the transport for a stream.
func TestStreamLimitBelowTransportDefault(t *testing.T) {
	srv := startServerStreams(t, 10)
	direct := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	busy, err := direct.Acquire(ctx, "busy", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nil, srv.URL)
	const n = 60
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Acquire(pctx, "busy", api.WithLease(time.Minute))
			ended <- err
		}()
	}
	eventually(t, fmt.Sprintf("%d waiters (or a failed acquire)", n), func() bool {
		select {
		case err := <-ended:
			t.Fatalf("acquire failed: %v", err)
		default:
		}
		return status(t, direct, "busy").Waiters == n
	})
	cancel()
	for range n {
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("parked acquire: %v, want context.Canceled", err)
		}
	}
	if err := busy.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A call whose stream alone is reset (the connection stays up) is
// repeated, not failed after as many attempts as there are connections:
// the node aborts the first three acquires (RST_STREAM), the fourth is
// granted.
func TestStreamResetRetried(t *testing.T) {
	var aborts atomic.Int32
	aborts.Store(3)
	srv := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && aborts.Add(-1) >= 0 {
				panic(http.ErrAbortHandler) // RST_STREAM, connection kept
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("acquire after 3 stream resets: %v", err)
	}
	if aborts.Load() >= 0 {
		t.Fatalf("the node aborted only %d acquires", 3-aborts.Load())
	}
	heldOnce(t, c, "k", l.Token)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An acquire goes on through a failover: while the nodes answer 503
// unavailable (no active node known), it asks again after Retry-After,
// beyond the attempts a broken connection counts (two here: one address,
// two connections), until an active grants it.
func TestAcquireWaitsOutAFailover(t *testing.T) {
	var unavailable atomic.Int32
	unavailable.Store(4)
	srv := startServer(t, engine.Config{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && unavailable.Add(-1) >= 0 {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":"unavailable","message":"no active node is known at the moment; retry"}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatalf("acquire after 4 answers of 503 unavailable: %v", err)
	}
	heldOnce(t, c, "k", l.Token)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
