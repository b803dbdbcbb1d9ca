package api_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// countingGate is a standby's native.Gate that never serves and counts
// the M answers it gives (each asks ActiveNative once).
type countingGate struct {
	active string
	moves  *atomic.Int32
}

func (g countingGate) Serving() bool         { return false }
func (g countingGate) HoldsBack(uint64) bool { return false }
func (g countingGate) RefusedByPeers() bool  { return false }
func (g countingGate) ActiveNative() string  { g.moves.Add(1); return g.active }

// An acquire whose connection to the active went silent (a cut between
// client and active that drops packets, iptables DROP both ways; no
// failover, for the standbys still reach the active) is served by the
// active once the cut heals and the client's connection to it is up
// again. The acquire passed over the silent connection, and the standbys'
// redirects naming the active kept it passed over even after a new
// connection to the active had answered: it went round the standbys'
// 307s (M) until failoverPatience and failed "unavailable: more than 10
// redirects" while the active served every other call, the lock free.
// Seen with real processes (3 nodes, the client cut from the active for
// 5 s, an acquire with a wait of 8 s: ErrUnavailable 15 s after it
// started, 9 s after the heal), over h2c and baton:// alike. Its grant,
// answered late, is renewed at once on the active that answered it.
func TestAcquireReturnsToTheActiveOnceItAnswersAgain(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) { acquireAfterHeal(t, proto) })
	}
}

func acquireAfterHeal(t *testing.T, proto string) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	var silent atomic.Bool
	var moves atomic.Int32
	active, standby := activeBehindProxy(t, srv, proto, &silent, &moves)
	ctx := ctxBound(t)
	holder := newClient(t, nil, srv.URL)
	h, err := holder.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, func(c *api.Config) {
		c.ConnsPerAddress = 1
		c.PingInterval = 100 * time.Millisecond
		c.PingTimeout = 200 * time.Millisecond
		c.ReconnectInterval = 50 * time.Millisecond
		c.DialTimeout = 500 * time.Millisecond
	}, active, standby)
	type result struct {
		l   *api.Lock
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute), api.WithWait(time.Minute))
		res <- result{l, err}
	}()
	eventually(t, "the acquire waits on the active", func() bool {
		st, err := holder.Status(ctx, "k")
		return err == nil && st.Waiters == 1
	})
	silent.Store(true) // the cut
	eventually(t, "the client's connection to the active broken", func() bool { return api.Up(c, active) == 0 })
	eventually(t, "the acquire redirected by the standby", func() bool { return moves.Load() >= 2 })
	silent.Store(false) // the heal
	healed := time.Now()
	eventually(t, "the client's connection to the active up again", func() bool { return api.Up(c, active) == 1 })
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("acquire after the active answers again: %v (%d redirects), want the grant the holder's release made", r.err, moves.Load())
	}
	// The grant was answered long after the acquire's first attempt
	// went out, so it is renewed at once (grantSince), on the active
	// that just answered: a renewal that passed over it went round the
	// standbys' redirects, failed, and left the lease counted from the
	// first attempt, which a short lease had outlived (the lock lost as
	// it was returned).
	// Renewed, its lease counts from the renewal's send, after the heal;
	// else from the first attempt's, before the cut.
	if d := api.LockDeadline(r.l); !d.After(healed.Add(time.Minute)) {
		t.Fatalf("the late grant was not renewed at once: the lease counts to %v, from before the heal at %v", d, healed)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A keep-alive whose renewal went unanswered on the active's connection
// (a short cut between client and active, no failover) goes back to the
// active once that same connection answers again: the cut healed before
// a ping broke the connection, and TCP delivered what it held. Its next
// attempts passed over the connection for the rest of the round, the
// standbys' redirects naming the active kept it passed over, and the
// lock was reported lost at the end of its lease while the active
// answered (and had even made the late renewal). Seen with real
// processes over h2c: a 6 s lease, the client cut from the active both
// ways for 1.5 s from just before a renewal, Lost at the lease end, the
// node showing the grant renewed.
func TestKeepAliveReturnsToTheActiveWhoseConnectionAnswersAgain(t *testing.T) {
	for _, proto := range []string{"http", "native"} {
		t.Run(proto, func(t *testing.T) { keepAliveAfterHeal(t, proto) })
	}
}

func keepAliveAfterHeal(t *testing.T, proto string) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	var silent atomic.Bool
	var moves atomic.Int32
	active, standby := activeBehindProxy(t, srv, proto, &silent, &moves)
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1 }, active, standby)
	ctx := ctxBound(t)
	const lease = 2 * time.Second
	l, err := c.Acquire(ctx, "k", api.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	first := l.Expiry()
	silent.Store(true) // the cut: the next renewal goes unanswered
	l.KeepAlive(ctx)
	eventually(t, "an attempt after the unanswered one, redirected by the standby", func() bool { return moves.Load() >= 1 })
	silent.Store(false) // the heal, on the same connection
	eventually(t, "the lock renewed or lost", func() bool {
		select {
		case <-l.Lost():
			return true
		default:
			return l.Expiry().After(first)
		}
	})
	if err := l.Err(); err != nil {
		t.Fatalf("lost while the active answers again (%d redirects): %v", moves.Load(), err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// activeBehindProxy puts srv (proto "http" or "native") behind a
// silentProxy, which stops forwarding while silent is set, and starts a
// standby that moves every lock call to it (307, M), counting them in
// moves. It returns the addresses of both for a client.
func activeBehindProxy(t *testing.T, srv *testServer, proto string, silent *atomic.Bool, moves *atomic.Int32) (active, standby string) {
	t.Helper()
	if proto == "native" {
		proxy := silentProxy(t, srv.Native, silent)
		active = "baton://" + proxy
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sb := native.New(srv.eng, native.Config{Gate: countingGate{proxy, moves}})
		done := make(chan struct{})
		go func() { defer close(done); _ = sb.Serve(ln) }()
		t.Cleanup(func() { sb.Close(); <-done })
		standby = "baton://" + ln.Addr().String()
	} else {
		proxy := silentProxy(t, srv.Addr, silent)
		active = "http://" + proxy
		sb := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/locks") {
				return
			}
			moves.Add(1)
			http.Redirect(w, r, active+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}))
		sb.Config.Protocols = new(http.Protocols)
		sb.Config.Protocols.SetUnencryptedHTTP2(true)
		sb.Start()
		t.Cleanup(sb.Close)
		standby = sb.URL
	}
	return active, standby
}
