package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestClaimEventHasItsTime: a grant made while its waiter was away (its
// poll ended) and claimed by the waiter's repeat is reported as a claim
// event at the time of the repeat, like every other event (it was
// reported at the Unix epoch: its record carried no time).
func TestClaimEventHasItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var claims []Event
		cfg := pollConfig()
		cfg.OnEvent = func(ev Event) {
			if ev.Kind == EventClaim {
				mu.Lock()
				claims = append(claims, ev)
				mu.Unlock()
			}
		}
		e := newEngine(t, cfg)
		defer e.Close()
		const key = "k"
		grantToAbsentWaiter(t, e, key, "a")
		time.Sleep(time.Second)
		at := time.Now()
		g := mustAcquire(t, e, AcquireRequest{Key: key, ID: "a"}) // the claim
		mu.Lock()
		defer mu.Unlock()
		if len(claims) != 1 || claims[0].Token != g.Token {
			t.Fatalf("claim events %+v; want one for token %d", claims, g.Token)
		}
		if got := time.Unix(0, claims[0].At); !got.Equal(at) {
			t.Fatalf("claim event at %v; want the repeat's time %v", got.UTC(), at.UTC())
		}
	})
}

// grantToAbsentWaiter makes a grant of key that awaits its claim, in a
// synctest bubble, on an engine of pollConfig: a holder, then a waiter
// with ID id whose poll ends (10 s: it is away, its place kept), then the
// holder's release, which grants the lock to that waiter.
func grantToAbsentWaiter(t *testing.T, e *Engine, key, id string) {
	t.Helper()
	h := mustAcquire(t, e, AcquireRequest{Key: key})
	a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: id})
	synctest.Wait()
	time.Sleep(10 * time.Second)
	synctest.Wait()
	wantErr(t, id, answered(t, id, a).err, ErrPollTimeout)
	if err := e.Release(key, h.Token); err != nil {
		t.Fatal(err)
	}
}

// TestEventsOfAGrantAwaitingItsClaimSayWhenItEnds: the grant event of a
// grant made while its waiter was away gives as its ExpiresAt the claim
// deadline, when the slot is taken back unless the waiter's repeat
// claims it, as Status gives it (breaker J: the event said the lease's
// end, 25 s past the expire event that followed it); the claim event
// gives the lease's end the grant then runs to.
func TestEventsOfAGrantAwaitingItsClaimSayWhenItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		evs := map[EventKind]Event{}
		cfg := pollConfig()
		cfg.OnEvent = func(ev Event) {
			if ev.Key == "k" && ev.WaiterID == "a" && (ev.Kind == EventGrant || ev.Kind == EventClaim) {
				mu.Lock()
				evs[ev.Kind] = ev
				mu.Unlock()
			}
		}
		e := newEngine(t, cfg)
		defer e.Close()
		grantToAbsentWaiter(t, e, "k", "a")
		st, err := e.Status("k")
		if err != nil || len(st.Holders) != 1 {
			t.Fatalf("Status: %+v, %v; want one holder", st, err)
		}
		mu.Lock()
		grant := evs[EventGrant]
		mu.Unlock()
		if grant.ClaimBy == 0 || grant.ExpiresAt != grant.ClaimBy {
			t.Fatalf("grant event: ExpiresAt %d, ClaimBy %d; want the claim deadline", grant.ExpiresAt, grant.ClaimBy)
		}
		if want := st.Holders[0].ExpiresAt.UnixNano(); grant.ExpiresAt != want {
			t.Fatalf("grant event ExpiresAt %v; Status says %v", time.Unix(0, grant.ExpiresAt).UTC(), st.Holders[0].ExpiresAt.UTC())
		}
		time.Sleep(time.Second)
		g := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "a"}) // the claim
		mu.Lock()
		claim := evs[EventClaim]
		mu.Unlock()
		if claim.ExpiresAt != g.ExpiresAt.UnixNano() || claim.ExpiresAt <= grant.ExpiresAt {
			t.Fatalf("claim event ExpiresAt %v; want the grant's lease end %v", time.Unix(0, claim.ExpiresAt).UTC(), g.ExpiresAt.UTC())
		}
	})
}
