package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// The client's black-box behaviours, run over both protocols: "http" (an
// http:// address) and "native" (baton://, SPEC section 2b) against one
// node that serves both over one engine. Lock state is read over HTTP
// (the native protocol has no read op).

var protos = []string{"http", "native"}

func eachProto(t *testing.T, fn func(t *testing.T, proto string)) {
	for _, p := range protos {
		t.Run(p, func(t *testing.T) { fn(t, p) })
	}
}

// Errors map back to the same sentinels over both protocols.
func TestProtoErrors(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{LeaseMax: time.Hour}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if l.Token == 0 || l.Key != "k" || l.Lease <= 0 || l.ExpiresAt.IsZero() || l.Node != srv.Base(proto) {
			t.Fatalf("lock %+v", l)
		}
		_, err = c.Acquire(ctx, "k", api.WithWait(50*time.Millisecond))
		var se *api.StatusError
		if !errors.Is(err, api.ErrTimeout) || !errors.As(err, &se) || se.Code != api.CodeTimeout || proto == "http" && se.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("timed out acquire: %v", err)
		}
		if err := c.Release(ctx, "k", l.Token+1); !errors.Is(err, api.ErrNotHolder) {
			t.Fatalf("release under another token: %v", err)
		}
		if err := c.Release(ctx, "free", 1); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("release of a free lock: %v", err)
		}
		if _, err := c.Renew(ctx, "free", 1, 0); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("renew of a free lock: %v", err)
		}
		_, err = c.Acquire(ctx, "other", api.WithLease(2*time.Hour))
		if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &se) || se.Field != "lease" {
			t.Fatalf("lease over lease_max: %v", err)
		}
		_, err = c.Acquire(ctx, "")
		if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &se) || se.Field != "key" {
			t.Fatalf("empty key: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("second release: %v", err)
		}
		// Keys with spaces, percent signs and non-ASCII go through.
		for _, key := range []string{"with space/1", "100%", "ünï cödé"} {
			l, err := c.Acquire(ctx, key, api.WithLease(time.Minute))
			if err != nil {
				t.Fatalf("acquire %q: %v", key, err)
			}
			heldOnce(t, newClient(t, nil, srv.URL), key, l.Token)
			if l.Key != key {
				t.Fatalf("lock key %q, want %q", l.Key, key)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("release %q: %v", key, err)
			}
		}
	})
}

// A released lock passes to the waiters in the order they queued.
func TestProtoFIFO(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		holder, err := newClient(t, nil, srv.Base(proto)).Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var res []<-chan result
		for i := range 3 {
			res = append(res, acquireAsync(ctx, newClient(t, nil, srv.Base(proto)), "k"))
			waitWaiters(t, hc, "k", i+1)
		}
		prev := holder
		for i, ch := range res {
			if err := prev.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l := get(t, ch)
			if l.Token <= prev.Token {
				t.Fatalf("waiter %d: token %d not above %d", i, l.Token, prev.Token)
			}
			if st := status(t, hc, "k"); st.Holder == nil || st.Holder.Token != l.Token || st.Waiters != len(res)-i-1 {
				t.Fatalf("after release %d: holder %+v, %d waiters", i, st.Holder, st.Waiters)
			}
			for _, later := range res[i+1:] {
				select {
				case r := <-later:
					t.Fatalf("a later waiter returned before waiter %d: %+v", i, r)
				default:
				}
			}
			prev = l
		}
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// KeepAlive renews; a lock released from under it is reported lost.
func TestProtoKeepAliveAndLost(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "k", api.WithLease(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l.KeepAlive(ctx)
		first := l.Expiry()
		eventually(t, "renewed", func() bool {
			select {
			case <-l.Lost():
				t.Fatalf("lost before the first renewal: %v", l.Err())
			default:
			}
			return l.Expiry().After(first)
		})
		// Renewed past the first lease: still ours.
		eventually(t, "past the first lease", func() bool { return time.Now().After(first) })
		heldOnce(t, hc, "k", l.Token)
		if err := hc.Release(ctx, "k", l.Token); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Lost():
		case <-time.After(bound):
			t.Fatal("Lost not closed")
		}
		if err := l.Err(); !errors.Is(err, api.ErrLost) || !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("Err() = %v", err)
		}
		if err := l.Release(ctx); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("release of a lost lock: %v", err)
		}
	})
}

// Renew moves the expiry; renewing a released lock marks it lost.
func TestProtoRenew(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Renew(ctx, time.Hour-time.Second); err != nil {
			t.Fatal(err)
		}
		if !l.Expiry().After(l.ExpiresAt.Add(50 * time.Minute)) {
			t.Fatalf("expiry %v not an hour out (was %v)", l.Expiry(), l.ExpiresAt)
		}
		g, err := c.Renew(ctx, "k", l.Token, 0)
		if err != nil || g.Token != l.Token || g.Key != "k" || g.Lease < 3500 {
			t.Fatalf("renew with the grant's lease: %+v, %v", g, err)
		}
		if err := c.Release(ctx, "k", l.Token); err != nil {
			t.Fatal(err)
		}
		if err := l.Renew(ctx, 0); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("renew after release: %v", err)
		}
		select {
		case <-l.Lost():
		default:
			t.Fatal("not marked lost")
		}
	})
}

// WithLock runs fn under the lock and releases it after; a lock lost
// while fn runs cancels fn's context and is reported.
func TestProtoWithLock(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		var got uint64
		err := c.WithLock(ctx, "k", func(ctx context.Context, token uint64) error {
			got = token
			heldOnce(t, hc, "k", token)
			return nil
		})
		if err != nil || got == 0 {
			t.Fatalf("WithLock: %v, token %d", err, got)
		}
		if st := status(t, hc, "k"); st.Holder != nil {
			t.Fatalf("still held after WithLock: %+v", st.Holder)
		}

		boom := errors.New("boom")
		err = c.WithLock(ctx, "k", func(ctx context.Context, token uint64) error {
			if err := c.Release(ctx, "k", token); err != nil { // from under it
				return err
			}
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), api.ErrLost) {
				t.Errorf("cause %v", context.Cause(ctx))
			}
			return boom
			// The loss is seen by the renewal at half the lease (not_held):
			// 2 s, so that a slow Release on a loaded machine does not
			// see the lease run out first (its ctx is then cut, and fn
			// returns that, not boom).
		}, api.WithLease(2*time.Second))
		if !errors.Is(err, boom) || !errors.Is(err, api.ErrLost) {
			t.Fatalf("WithLock with the lock lost: %v", err)
		}
	})
}

// WithLock does not ask for the release of a lock it lost: with its node
// gone (the lock lost when the lease ran out under the keep-alive), it
// retried the release for 5 s after fn had returned, and its error held
// the release's failure beside the loss (breaker report of 2026-12-05).
func TestProtoWithLockReleasesNothingLost(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		err := c.WithLock(ctx, "gone", func(ctx context.Context, token uint64) error {
			srv.Stop()
			<-ctx.Done()
			return nil
		}, api.WithLease(time.Second))
		if !errors.Is(err, api.ErrLost) {
			t.Fatalf("WithLock with its node gone: %v, want ErrLost", err)
		}
		if strings.Contains(err.Error(), "release") {
			t.Fatalf("WithLock asked for the release of a lock it lost: %v", err)
		}
	})
}

// WithLock whose fn returns the cause of its context's end, the loss
// itself, reports the loss once: it was joined to itself, and its
// message came twice.
func TestProtoWithLockReturningTheLossReportsItOnce(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		err := c.WithLock(ctx, "k", func(ctx context.Context, token uint64) error {
			if err := c.Release(ctx, "k", token); err != nil { // from under it
				return err
			}
			<-ctx.Done()
			return context.Cause(ctx)
		}, api.WithLease(2*time.Second)) // as in TestProtoWithLock
		if !errors.Is(err, api.ErrLost) {
			t.Fatalf("WithLock with the lock lost: %v, want ErrLost", err)
		}
		if n := strings.Count(err.Error(), "lock lost"); n != 1 {
			t.Errorf("WithLock's error says %d times that the lock was lost, want once:\n%v", n, err)
		}
	})
}

// A panic in WithLock's fn (a net/http handler's, which the server
// recovers, and the process goes on) releases the lock on its way up: the
// keep-alive, whose context never ends, held it for as long as the Client
// lived.
func TestProtoWithLockPanicReleases(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		var got uint64
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want the panic of fn", r)
				}
			}()
			_ = c.WithLock(ctx, "k", func(ctx context.Context, token uint64) error {
				got = token
				panic("boom")
			}, api.WithLease(time.Minute))
		}()
		if st := status(t, hc, "k"); got == 0 || st.Holder != nil {
			t.Fatalf("token %d: still held after fn panicked: %+v", got, st.Holder)
		}
	})
}

// WithLimit(0) is refused as any limit out of 1 to MaxLimit is, and
// nothing is queued or held: it was sent as no limit, and granted under
// the key's limit.
func TestProtoLimitZeroRefused(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		for _, n := range []int{0, -1, api.MaxLimit + 1} {
			l, err := c.Acquire(ctx, "lim", api.WithLimit(n))
			if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "limit") {
				t.Errorf("WithLimit(%d): lock %v, err %v; want ErrInvalidArgument naming limit", n, l, err)
			}
		}
		if st := status(t, hc, "lim"); len(st.Holders) != 0 || st.Waiters != 0 {
			t.Errorf("after refused acquires: %+v, want the key free", st)
		}
	})
}

// Shared modes, limits, owners and forced releases, over both protocols.
func TestProtoModesAndOwner(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		a, err := c.Acquire(ctx, "sem", api.WithLimit(2), api.WithShared(), api.WithOwner("job a"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Acquire(ctx, "sem", api.WithShared())
		if err != nil {
			t.Fatal(err)
		}
		third := acquireAsync(ctx, c, "sem", api.WithMode(api.ModeShared), api.WithOwner(""))
		waitWaiters(t, hc, "sem", 1)
		st := status(t, hc, "sem")
		if st.Limit != 2 || len(st.Holders) != 2 || st.Holders[0].Token != a.Token || st.Holders[0].Owner != "job a" ||
			st.Holders[1].Owner != api.DefaultOwner() || st.Holders[1].Mode != api.ModeShared {
			t.Fatalf("status %+v; want job a then %q, both shared, limit 2", st, api.DefaultOwner())
		}
		if st.OldestWaiterOwner != "" {
			t.Fatalf("WithOwner(\"\") sent an owner: %q", st.OldestWaiterOwner)
		}
		_, err = c.Acquire(ctx, "sem", api.WithLimit(3), api.WithShared())
		var se *api.StatusError
		if !errors.Is(err, api.ErrLimitMismatch) || !errors.As(err, &se) || se.Field != "limit" || !strings.Contains(se.Message, "limit 2") {
			t.Fatalf("another limit: %v, want ErrLimitMismatch naming the field limit and the key's limit 2", err)
		}
		if err := c.ForceRelease(ctx, "sem"); err != nil {
			t.Fatal(err)
		}
		l := get(t, third)
		heldOnce(t, hc, "sem", l.Token)
		if err := c.Release(ctx, "sem", b.Token); !errors.Is(err, api.ErrNotHolder) {
			t.Fatalf("release after force: %v, want ErrNotHolder", err)
		}
		if err := c.ForceRelease(ctx, "free"); !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("force on a free key: %v, want ErrNotHeld", err)
		}
	})
}

// Tokens: the auth token is sent (AUTH over native); a wrong one is
// ErrUnauthorized; a forced release needs an admin token.
func TestProtoAuth(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}, AdminTokens: []string{"ops"}}, native.Config{})
		user := newClient(t, func(c *api.Config) { c.Token = "user" }, srv.Base(proto))
		ops := newClient(t, func(c *api.Config) { c.Token = "ops" }, srv.Base(proto))
		bad := newClient(t, func(c *api.Config) { c.Token = "wrong" }, srv.Base(proto))
		none := newClient(t, func(c *api.Config) { c.Token = "" }, srv.Base(proto))
		ctx := ctxBound(t)
		if _, err := user.Acquire(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if err := user.ForceRelease(ctx, "k"); !errors.Is(err, api.ErrForbidden) {
			t.Fatalf("force with a user token: %v, want ErrForbidden", err)
		}
		if err := ops.ForceRelease(ctx, "k"); err != nil {
			t.Fatalf("force with an admin token: %v", err)
		}
		l, err := user.Acquire(ctx, "j")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil { // the token goes with every call
			t.Fatalf("release with a user token: %v", err)
		}
		if _, err := bad.Acquire(ctx, "k"); !errors.Is(err, api.ErrUnauthorized) {
			t.Fatalf("acquire with a wrong token: %v", err)
		}
		if _, err := none.Acquire(ctx, "k"); !errors.Is(err, api.ErrUnauthorized) {
			t.Fatalf("acquire without a token: %v", err)
		}
	})
}

// A cancelled acquire returns at once, leaves the queue at once and
// leaves nothing held: over HTTP the request's end withdraws the waiter;
// over the native protocol the client sends the cancel op (C), at once
// or, on a connection whose first ping is not yet answered, when that
// answer comes (TestNativeCancelWaitsForTheFirstPing). To a node without
// the op the request stays queued and the grant it gets is released at
// once (TestNativeCancelledThenBroken).
func TestProtoAcquireCancelled(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithCancel(ctx)
		res := acquireAsync(actx, c, "k")
		waitWaiters(t, hc, "k", 1)
		cancel()
		if r := <-res; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v", r.err)
		}
		waitWaiters(t, hc, "k", 0) // left the queue at once
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "free", func() bool {
			st := status(t, hc, "k")
			return st.Holder == nil && st.Waiters == 0
		})
		// The client still works, and the key is free for the next.
		l, err = c.Acquire(ctx, "k", api.WithWait(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		// Eventually: over the native protocol the client settles the
		// withdrawn acquire in the background (nsettle repeats it with a
		// wait of 1 ms), which a loaded machine can show as a waiter for
		// that moment; none stays.
		heldAlone(t, hc, "k", l.Token)
	})
}

// Close ends waiting calls with ErrClosed; the keep-alive reports the
// lock lost; every goroutine ends (goleak in TestMain).
func TestProtoClose(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		hc := newClient(t, nil, srv.URL)
		ctx := ctxBound(t)
		l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		l.KeepAlive(ctx)
		res := acquireAsync(ctx, c, "k")
		waitWaiters(t, hc, "k", 1)
		c.Close()
		if r := <-res; !errors.Is(r.err, api.ErrClosed) {
			t.Fatalf("waiting acquire at Close: %v", r.err)
		}
		if err := l.Err(); !errors.Is(err, api.ErrLost) || !errors.Is(err, api.ErrClosed) {
			t.Fatalf("keep-alive at Close: %v", err)
		}
		if _, err := c.Acquire(ctx, "k"); !errors.Is(err, api.ErrClosed) {
			t.Fatalf("acquire after Close: %v", err)
		}
		if _, err := c.Status(ctx, "k"); proto == "http" && !errors.Is(err, api.ErrClosed) { // native: no read calls
			t.Fatalf("status after Close: %v", err)
		}
		waitWaiters(t, hc, "k", 0)
		c.Close()
	})
}
