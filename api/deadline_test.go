package api_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// slowGrant delays the header of a grant's answer to an acquire while
// armed, once: the node has made the grant (and counts its lease) before
// the client can hear of it.
type slowGrant struct {
	http.ResponseWriter
	armed *atomic.Bool
	pause time.Duration
}

func (w *slowGrant) WriteHeader(code int) {
	if code == http.StatusOK && w.armed.CompareAndSwap(true, false) {
		time.Sleep(w.pause)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *slowGrant) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The grant's answer is lost with its connection and the repeat on the
// other connection gets the same grant, made before the repeat was sent:
// the lease the node counts began at the grant, so the time the client
// counts it from (the keep-alive renews at half of it, and counts the lock
// lost at its end) must not be later than the node's expiry. It was the
// send time of the repeat, later than the grant by however long the
// answer took to be lost (here 300 ms; in a failover, the failover).
func TestAcquireRepeatedGrantLeaseCountsFromTheGrant(t *testing.T) {
	var armed atomic.Bool
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.Header.Get(api.HeaderIdempotencyKey) != "" {
				w = &slowGrant{ResponseWriter: w, armed: &armed, pause: 300 * time.Millisecond}
			}
			h.ServeHTTP(w, r)
		})
	}
	srv := startServer(t, engine.Config{}, slow)
	p := startProxy(t, srv.Addr)
	viaProxy := newClient(t, nil, p.URL())
	direct := newClient(t, nil, srv.URL)
	eventually(t, "two proxied connections", func() bool { return len(p.live()) == 2 })
	status(t, viaProxy, "warm")
	status(t, viaProxy, "warm")
	ctx := ctxBound(t)
	holder, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, viaProxy, "k", api.WithLease(time.Minute))
	waitWaiters(t, direct, "k", 1)
	armed.Store(true)
	p.DropOnReply()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.dropped:
	case <-time.After(bound):
		t.Fatal("the grant's answer never came")
	}
	l := get(t, res)
	heldOnce(t, direct, "k", l.Token)
	if d, e := api.LockDeadline(l), l.Expiry(); d.After(e) {
		t.Errorf("the client counts the lease to %v, %v after the node's expiry %v", d.Format(time.RFC3339Nano), d.Sub(e), e.Format(time.RFC3339Nano))
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// An acquire whose last attempt's connection breaks after the node wrote
// its grant, and whose node cannot be reached again for longer than
// failoverPatience (300 ms here; the dials the client makes meanwhile
// fail too: without that, a fresh connection gets the grant under the
// same Idempotency-Key, TestAcquireSurvivesEveryConnectionReset and
// TestAcquireRidesOutASingleNodeRestart), fails with ErrUnavailable:
// the grant its caller never got is
// released (settled under the Idempotency-Key, as after a cancel), not
// left held for the whole lease.
func TestAcquireUnavailableLeavesNoHolder(t *testing.T) {
	api.SetFailoverPatience(t, 300*time.Millisecond)
	srv := startServer(t, engine.Config{}, nil)
	p := startProxy(t, srv.Addr)
	one := newClient(t, func(c *api.Config) {
		c.ConnsPerAddress = 1
		c.ReconnectInterval = 50 * time.Millisecond
	}, p.URL())
	direct := newClient(t, nil, srv.URL)
	eventually(t, "one proxied connection", func() bool { return len(p.live()) == 1 })
	status(t, one, "warm")
	ctx := ctxBound(t)
	holder, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, one, "k", api.WithLease(time.Minute))
	waitWaiters(t, direct, "k", 1)
	// The node cannot be reached again: the attempt after the broken
	// connection (a fresh dial) fails too.
	p.mu.Lock()
	p.refuseUntil = time.Now().Add(time.Second) // then the settle reaches it
	p.mu.Unlock()
	p.DropOnReply()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err == nil {
		t.Fatalf("acquire granted %d over one connection that broke", r.l.Token)
	}
	if !errors.Is(r.err, api.ErrUnavailable) {
		t.Fatalf("acquire: %v, want ErrUnavailable", r.err)
	}
	noHolderWithin(t, direct, "k", 5*time.Second)
}
