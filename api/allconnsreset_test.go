package api_test

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// resettable is a client connection that reset() breaks the way a
// middlebox's RST does when it is noticed: the next write fails, and the
// read it unblocks fails too.
type resettable struct {
	net.Conn
	mu   sync.Mutex
	dead bool
}

func (c *resettable) reset() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
}

func (c *resettable) Write(b []byte) (int, error) {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		c.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return c.Conn.Write(b)
}

// Every connection of the client reset at once (a proxy, a NAT or a load
// balancer in front of the single node dropped them all) while acquires
// wait on them: an acquire moves on to the other connection, which is
// broken too but not yet noticed (its reader is parked), and then to a
// connection dialled afresh to the node, which is up: it keeps its place
// (same Idempotency-Key) and gets the lock. Seen with real processes (300
// acquires over one client through a TCP proxy that reset every
// connection): 2 of them failed "service unavailable: acquire: 2 attempts
// failed, last: broken pipe / connection reset" while the node answered,
// over HTTP and over baton:// alike. The README says a call that finds
// every connection down dials at once, its error being that dial's.
func TestAcquireSurvivesEveryConnectionReset(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		var mu sync.Mutex
		var conns []*resettable
		c := newClient(t, func(c *api.Config) {
			c.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				rc := &resettable{Conn: nc}
				mu.Lock()
				conns = append(conns, rc)
				mu.Unlock()
				return rc, nil
			}
		}, srv.Base(proto))
		direct := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		holder, err := direct.Acquire(ctx, "k", api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		res := acquireAsync(ctx, c, "k", api.WithLease(time.Minute))
		waitWaiters(t, direct, "k", 1)
		mu.Lock()
		old := append([]*resettable(nil), conns...)
		mu.Unlock()
		if len(old) != 2 {
			t.Fatalf("%d connections dialled, want 2", len(old))
		}
		// Every connection is reset; the first, which carries the
		// waiting acquire (the client's first call), notices at once.
		for _, rc := range old {
			rc.reset()
		}
		_ = old[0].Conn.(*net.TCPConn).CloseRead()
		time.Sleep(200 * time.Millisecond)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-res:
			if r.err != nil {
				t.Fatalf("acquire after every connection was reset: %v, want the lock", r.err)
			}
			heldOnce(t, direct, "k", r.l.Token)
		case <-ctx.Done():
			t.Fatal("acquire never ended")
		}
	})
}
