package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// livenessPair starts two nodes (HTTP and native listeners) on host,
// the first the active, waits for the standby's sync, and returns them
// with a client of proto ("http" or "native") on the library's defaults
// (as a program's would be) that has talked to the active.
func livenessPair(t *testing.T, host, proto string) (n1, n2 *serveProc, c *api.Client) {
	t.Helper()
	needBinary(t)
	a1, a2 := testproc.FreeAddr(t, host), testproc.FreeAddr(t, host)
	na1, na2 := testproc.FreeAddr(t, host), testproc.FreeAddr(t, host)
	peers := "--peers=http://" + a1 + ",http://" + a2
	n1 = startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1, "--native-listen", na1)
	n2 = startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2, "--native-listen", na2)
	eventually(t, "the standby synced", func() string {
		if res, _ := get(t, "GET", n2.url+"/locks"); res.Header.Get(api.HeaderReplicaLag) == "" {
			return "not yet"
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
	t.Cleanup(func() { c.Close() })
	warm, err := c.Acquire(t.Context(), "warm", api.WithWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	return n1, n2, c
}

// pause stops n (SIGSTOP) until the test ends.
func pause(t *testing.T, n *serveProc) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testproc.WaitStopped(t, n.cmd.Process.Pid)
	t.Cleanup(func() { _ = n.cmd.Process.Signal(syscall.SIGCONT) })
}

// An acquire waiting without a wait of its own on an active that is then
// paused (SIGSTOP) notices the silent node by its connection's ping
// (Config.PingInterval + PingTimeout, 5 s by default; a paused node keeps
// its connections open) and asks again on the promoted standby, which
// grants it once the holder has released there. Before, an HTTP acquire
// waited for a PING sent after 15 s of quiet (answered in 5), and a
// baton:// one, whose connections had no ping, until its ctx ended: the
// 18 s given here (a hang bound) ran out either way.
func TestWaitingAcquireMovesOnFromAPausedActive(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) {
			n1, n2, c := livenessPair(t, "127.0.46.1", proto)
			res, body := get(t, "POST", n1.url+"/locks/k?lease=600")
			if res.StatusCode != 200 {
				t.Fatalf("acquire of the holder: %d %s", res.StatusCode, body)
			}
			var g api.Grant
			if err := json.Unmarshal([]byte(body), &g); err != nil {
				t.Fatal(err)
			}
			type result struct {
				l   *api.Lock
				err error
			}
			const patience = 18 * time.Second // a hang bound; above the old HTTP PING's 20 s it passes
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan result, 1)
			go func() {
				l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
				done <- result{l, err}
			}()
			n1.waitWaiters("k", 1)
			// Replication is asynchronous here: the standby promoted
			// after the pause has what it received before it. Without
			// the holder's grant it granted the waiter's repeat on a
			// free key, and the holder's release there was 409 (CI of
			// 419c623, a loaded race build).
			eventually(t, "the holder's grant and the waiter replicated", func() string {
				if st := n2.status("k"); st.Holder == nil || st.Holder.Token != g.Token || st.Waiters != 1 {
					return fmt.Sprintf("holder %+v, %d waiters", st.Holder, st.Waiters)
				}
				return ""
			})
			pause(t, n1)
			stopped := time.Now()
			timer := time.AfterFunc(patience, cancel)
			defer timer.Stop()
			// The holder releases on the promoted standby.
			eventually(t, "the holder's release on the promoted standby", func() string {
				res, body := get(t, "DELETE", n2.url+"/locks/k?token="+strconv.FormatUint(g.Token, 10))
				if res.StatusCode != 200 {
					return strconv.Itoa(res.StatusCode) + " " + body
				}
				return ""
			})
			r := <-done
			if r.err != nil {
				t.Fatalf("the waiting acquire with the active paused: %v after %v; want a grant from the promoted standby", r.err, time.Since(stopped).Round(time.Millisecond))
			}
			t.Logf("granted by %s %v after the pause", r.l.Node, time.Since(stopped).Round(time.Millisecond))
			if st := n2.status("k"); st.Holder == nil || st.Holder.Token != r.l.Token {
				t.Fatalf("the promoted node's holder of k: %+v, want token %d", st.Holder, r.l.Token)
			}
			if err := r.l.Release(t.Context()); err != nil {
				t.Fatalf("release on the promoted node: %v", err)
			}
			_ = n1.cmd.Process.Kill()
		})
	}
}

// A lock held with KeepAlive while its active is paused (SIGSTOP) is
// renewed by the promoted standby: its expiry there moves on, and the
// lock is never reported lost.
func TestKeepAliveRenewsOnThePromotedNode(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) {
			n1, n2, c := livenessPair(t, "127.0.46.2", proto)
			const lease = 8 * time.Second
			l, err := c.Acquire(t.Context(), "held", api.WithLease(lease))
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "the grant replicated", func() string {
				if st := n2.status("held"); st.Holder == nil || st.Holder.Token != l.Token {
					return "not yet"
				}
				return ""
			})
			first := n2.status("held").Holder.ExpiresAt
			l.KeepAlive(t.Context())
			pause(t, n1)
			stopped := time.Now()
			const patience = 20 * time.Second // a hang bound: lease 8 s, renewals every 4 s
			for {
				select {
				case <-l.Lost():
					t.Fatalf("lost %v after the pause: %v", time.Since(stopped).Round(time.Millisecond), l.Err())
				case <-time.After(100 * time.Millisecond):
				}
				st := n2.status("held")
				if st.Holder == nil || st.Holder.Token != l.Token {
					t.Fatalf("the promoted node's holder: %+v, want token %d", st.Holder, l.Token)
				}
				if st.Holder.ExpiresAt.After(first.Add(lease / 2)) {
					t.Logf("renewed on the promoted node %v after the pause (expiry %v → %v)", time.Since(stopped).Round(time.Millisecond), first, st.Holder.ExpiresAt)
					break
				}
				if time.Since(stopped) > patience {
					t.Fatalf("not renewed on the promoted node within %v: expiry %v", patience, st.Holder.ExpiresAt)
				}
			}
			if err := l.Release(t.Context()); err != nil {
				t.Fatalf("release on the promoted node: %v", err)
			}
			_ = n1.cmd.Process.Kill()
		})
	}
}
