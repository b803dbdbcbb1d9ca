package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// An acquire with a short wait sent to an active that is paused (SIGSTOP)
// gives up the attempt once its wait has run out and a grace passed, and
// asks the next node (SPEC section 4) for what is left of the wait: the
// promoted standby grants a free key, and answers a held one with a
// timeout. Without a bound per attempt it waited for the connection's
// PING (15 + 5 s by default over HTTP) or, over baton://, which has no
// ping, for ctx: a 2 s wait was not answered within 15 s. The library's
// defaults are used, as a program's would.
func TestAcquireWithAWaitMovesOnFromAPausedActive(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) {
			needBinary(t)
			const host = "127.0.0.25"
			a1, a2 := testproc.FreeAddr(t, host), testproc.FreeAddr(t, host)
			na1, na2 := testproc.FreeAddr(t, host), testproc.FreeAddr(t, host)
			peers := "--peers=http://" + a1 + ",http://" + a2
			n1 := startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1, "--native-listen", na1)
			n2 := startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2, "--native-listen", na2)
			eventually(t, "the standby synced", func() string {
				if res, _ := get(t, "GET", n2.url+"/locks"); res.Header.Get(api.HeaderReplicaLag) == "" {
					return "not yet"
				}
				return ""
			})
			if res, body := get(t, "POST", n1.url+"/locks/held?lease=600"); res.StatusCode != 200 {
				t.Fatalf("acquire: %d %s", res.StatusCode, body)
			}
			eventually(t, "the grant replicated", func() string {
				if st := n2.status("held"); st.Holder == nil {
					return "no holder yet"
				}
				return ""
			})
			cfg := api.DefaultConfig()
			cfg.Addresses = []string{n1.url, n2.url}
			if proto == "native" {
				cfg.Addresses = []string{"baton://" + na1, "baton://" + na2}
			}
			c, err := api.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The client talks to the active.
			warm, err := c.Acquire(t.Context(), "warm", api.WithWait(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(t.Context()); err != nil {
				t.Fatal(err)
			}

			if err := n1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			testproc.WaitStopped(t, n1.cmd.Process.Pid)
			t.Cleanup(func() { _ = n1.cmd.Process.Signal(syscall.SIGCONT) })

			// 15 s: room for the 2 s wait, the grace, a failover and a
			// loaded machine; not for the 20 s of the PING.
			const wait, patience = 2 * time.Second, 15 * time.Second
			ctx, cancel := context.WithTimeout(t.Context(), patience)
			defer cancel()
			began := time.Now()
			l, err := c.Acquire(ctx, "free", api.WithWait(wait), api.WithLease(time.Minute))
			if err != nil {
				t.Fatalf("acquire of a free key with the active paused: %v; want a grant from the promoted standby", err)
			}
			if st := n2.status("free"); st.Holder == nil || st.Holder.Token != l.Token {
				t.Fatalf("the promoted standby's holder of free: %+v, want token %d", st.Holder, l.Token)
			}
			t.Logf("free: granted by %s after %v", l.Node, time.Since(began).Round(time.Millisecond))
			if ctx.Err() != nil {
				t.Fatal("the acquire of free was complete only when its ctx ended: its renewal waited on the paused node")
			}
			ctx, cancel = context.WithTimeout(t.Context(), patience)
			defer cancel()
			began = time.Now()
			_, err = c.Acquire(ctx, "held", api.WithWait(wait))
			t.Logf("held: %v after %v", err, time.Since(began).Round(time.Millisecond))
			if !errors.Is(err, api.ErrTimeout) && !errors.Is(err, api.ErrUnavailable) {
				t.Fatalf("acquire of a held key with the active paused: %v; want ErrTimeout (or ErrUnavailable)", err)
			}
			_ = n1.cmd.Process.Kill()
		})
	}
}

// After an acquire moved on from a paused active (SIGSTOP) to the
// promoted standby and was granted there, the client's later calls go to
// that node first: its grant made it the node the client asks. Only a
// redirect did that: the release that followed went to the paused node
// first (and lost an attempt there), and so did the next acquire, which
// waited there for its wait + the grace. Here the next acquire names a
// wait of a minute and is given 15 s: it is granted by the promoted node
// only if it is not sent to the paused one first. The client knows only
// the standby at first; its redirect (an M over baton://) names the
// active, which the client then prefers, as a program's would.
func TestCallsAfterAFailoverGoToTheNodeThatGranted(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) {
			needBinary(t)
			const host = "127.0.0.28"
			a1, a2 := testproc.FreeAddr(t, host), testproc.FreeAddr(t, host)
			na1, na2 := testproc.FreeAddr(t, host), testproc.FreeAddr(t, host)
			peers := "--peers=http://" + a1 + ",http://" + a2
			n1 := startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1, "--native-listen", na1)
			n2 := startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2, "--native-listen", na2)
			eventually(t, "the standby synced", func() string {
				if res, _ := get(t, "GET", n2.url+"/locks"); res.Header.Get(api.HeaderReplicaLag) == "" {
					return "not yet"
				}
				return ""
			})
			cfg := api.DefaultConfig()
			cfg.Addresses = []string{n2.url}
			// The paused node's connections stay open for the test (as
			// over baton://, which has no PING): a failed PING (after
			// 15 + 5 s by default) would close them and hide which node
			// the client asks first.
			cfg.PingInterval = 10 * time.Minute
			if proto == "native" {
				cfg.Addresses = []string{"baton://" + na2}
			}
			c, err := api.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The standby redirects: the client prefers the active.
			warm, err := c.Acquire(t.Context(), "warm", api.WithWait(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(t.Context()); err != nil {
				t.Fatal(err)
			}

			if err := n1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			testproc.WaitStopped(t, n1.cmd.Process.Pid)
			t.Cleanup(func() { _ = n1.cmd.Process.Signal(syscall.SIGCONT) })

			const patience = 15 * time.Second // no room for a minute's wait on the paused node
			ctx, cancel := context.WithTimeout(t.Context(), patience)
			defer cancel()
			l, err := c.Acquire(ctx, "free", api.WithWait(2*time.Second), api.WithLease(time.Minute))
			if err != nil {
				t.Fatalf("acquire with the active paused: %v; want a grant from the promoted standby", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("release of the promoted node's grant: %v", err)
			}
			if st := n2.status("free"); st.Holder != nil {
				t.Fatalf("free still held on the promoted node after its release: %+v", st.Holder)
			}

			ctx, cancel = context.WithTimeout(t.Context(), patience)
			defer cancel()
			next, err := c.Acquire(ctx, "next", api.WithWait(time.Minute), api.WithLease(time.Minute))
			if err != nil {
				t.Fatalf("the next acquire: %v; want a grant from the promoted node, asked first (it was sent to the paused node, where a minute's wait + the grace is longer than %v)", err, patience)
			}
			if st := n2.status("next"); st.Holder == nil || st.Holder.Token != next.Token {
				t.Fatalf("the promoted node's holder of next: %+v, want token %d", st.Holder, next.Token)
			}
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
			_ = n1.cmd.Process.Kill()
		})
	}
}
