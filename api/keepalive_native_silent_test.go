package api_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// silentProxy forwards TCP connections to target until silent is set;
// from then on it forwards nothing either way and closes nothing, as a
// paused (SIGSTOPped) node whose connections stay open.
func silentProxy(t *testing.T, target string, silent *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := src.Read(buf)
			for silent.Load() {
				select { // paused: the bytes wait
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			wg.Add(2)
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return ln.Addr().String()
}

// promotableGate is a standby's native.Gate: it moves every call to active until
// promoted is set, then serves (the same engine: the grant replicated).
type promotableGate struct {
	promoted *atomic.Bool
	active   string
}

func (g promotableGate) Serving() bool         { return g.promoted.Load() }
func (g promotableGate) HoldsBack(uint64) bool { return false }
func (g promotableGate) RefusedByPeers() bool  { return false }
func (g promotableGate) ActiveNative() string  { return g.active }

// Over baton:// too, a keep-alive's renewal attempt left unanswered by a
// silent active makes the next attempts pass over that connection, to the
// promoted standby (as TestKeepAlivePassesOverASilentActive over HTTP).
// It failed when Client.renew gave nRenew no avoid and ncall returned
// ctx's error without naming its connection: npick picked the preferred
// (active) node again and the lease was lost.
func TestNativeKeepAlivePassesOverASilentActive(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	var silent, promoted atomic.Bool
	proxy := silentProxy(t, srv.Native, &silent)
	// The standby: its own native listener on the same engine, moving
	// calls to the active (the proxy) until promoted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	standby := native.New(srv.eng, native.Config{Gate: promotableGate{&promoted, proxy}})
	done := make(chan struct{})
	go func() { defer close(done); _ = standby.Serve(ln) }()
	t.Cleanup(func() { standby.Close(); <-done })

	c := newClient(t, nil, "baton://"+ln.Addr().String())
	ctx := ctxBound(t)
	const lease = 2 * time.Second
	l, err := c.Acquire(ctx, "k", api.WithLease(lease)) // moved to the active
	if err != nil {
		t.Fatal(err)
	}
	if l.Node != "baton://"+proxy {
		t.Fatalf("granted through %s, want the active %s", l.Node, proxy)
	}
	first := l.Expiry()
	silent.Store(true)
	promoted.Store(true)
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.KeepAlive(kctx)
	select {
	case <-l.Lost():
		t.Fatalf("lost while another node would renew: %v", l.Err())
	case <-time.After(lease + lease/2):
	}
	if !l.Expiry().After(first) {
		t.Fatalf("never renewed: expiry %v, first %v", l.Expiry(), first)
	}
}
