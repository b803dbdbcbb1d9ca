package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestRenewEventNamesItsHolder: a renew event is a holder's event like a
// grant or a release, so it carries the holder's owner and mode (SPEC
// section 1: the owner is shown wherever the holder is), and the key's
// queue length after the change. It said "waiters 0" on a key with a
// waiter, and no owner (`baton events` printed `renew "k" … waiters 0`
// where the grant before it said `waiters 0 owner "me"` and the enqueue
// `waiters 1`).
func TestRenewEventNamesItsHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var renews []Event
		cfg := Config{DataDir: t.TempDir()}
		cfg.OnEvent = func(ev Event) {
			if ev.Kind == EventRenew {
				mu.Lock()
				renews = append(renews, ev)
				mu.Unlock()
			}
		}
		e := newEngine(t, cfg)
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key, Owner: "me", Mode: Shared})
		ctx, cancel := context.WithCancel(context.Background())
		w := goAcquire(e, ctx, AcquireRequest{Key: key, Owner: "writer"}) // exclusive: waits behind the reader
		synctest.Wait()
		if _, err := e.Renew(key, h.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-w
		mu.Lock()
		defer mu.Unlock()
		if len(renews) != 1 {
			t.Fatalf("renew events %+v; want one", renews)
		}
		if ev := renews[0]; ev.Owner != "me" || ev.Mode != Shared || ev.Waiters != 1 {
			t.Fatalf("renew event owner %q mode %v waiters %d; want owner \"me\", mode shared, waiters 1", ev.Owner, ev.Mode, ev.Waiters)
		}
	})
}

// TestEventsOfASemaphoreCarryItsLimit: every event of a key's holders or
// waiters but claim carries the key's limit, as its owner and mode, so
// that a release, an expiry, a renew, a timeout or a leave of a semaphore
// does not read as one of a plain lock (`baton events` printed `limit 3`
// on the grant and the enqueue only: breaker Q, 2026-12-06).
func TestEventsOfASemaphoreCarryItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var evs []Event
		cfg := Config{DataDir: t.TempDir()}
		cfg.OnEvent = func(ev Event) {
			mu.Lock()
			evs = append(evs, ev)
			mu.Unlock()
		}
		e := newEngine(t, cfg)
		defer e.Close()
		const key = "sem"
		a := mustAcquire(t, e, AcquireRequest{Key: key, Limit: 2, Lease: time.Minute})
		mustAcquire(t, e, AcquireRequest{Key: key, Limit: 2, Lease: time.Second})
		// Queued behind the two: one leaves (its client goes), one times out.
		ctx, cancel := context.WithCancel(context.Background())
		left := goAcquire(e, ctx, AcquireRequest{Key: key, Limit: 2})
		timed := goAcquire(e, context.Background(), AcquireRequest{Key: key, Limit: 2, Wait: 500 * time.Millisecond})
		synctest.Wait()
		cancel()
		<-left
		<-timed
		if _, err := e.Renew(key, a.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the second holder's lease runs out
		if err := e.Release(key, a.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		seen := map[EventKind]bool{}
		for _, ev := range evs {
			seen[ev.Kind] = true
			if ev.Limit != 2 {
				t.Errorf("%v event %+v: limit %d, want 2", ev.Kind, ev, ev.Limit)
			}
		}
		for _, k := range []EventKind{EventGrant, EventEnqueue, EventLeave, EventTimeout, EventRenew, EventExpire, EventRelease} {
			if !seen[k] {
				t.Errorf("no %v event among %+v", k, evs)
			}
		}
	})
}
