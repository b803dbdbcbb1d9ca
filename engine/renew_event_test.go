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
