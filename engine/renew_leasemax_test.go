package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A renewal that names no lease renews for the grant's own lease, but not
// beyond this node's lease_max: a grant made under a longer lease_max (by
// the active before a failover, or by this node before a restart with a
// lowered lease_max) was renewed for its full lease, a lease no acquire on
// this node may ask for. The renewal's answer says the lease it got, as
// the Go client's keep-alive reads it. One named above lease_max is still
// refused (checkLease).
func TestRenewWithoutLeaseKeepsWithinLeaseMax(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Log: log, LeaseMax: time.Hour})
	g := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: 30 * time.Minute})
	e.Close()

	low := newEngine(t, Config{Standby: true, LeaseDefault: 30 * time.Second, LeaseMax: time.Minute})
	defer low.Close()
	replayLog(t, low, log)
	low.Promote(Failover)
	r, err := low.Renew("k", g.Token, 0)
	if err != nil {
		t.Fatalf("Renew without a lease on the node with lease_max 1m: %v", err)
	}
	if r.Lease != time.Minute {
		t.Fatalf("Renew without a lease of a 30m grant on a node with lease_max 1m: lease %v, want 1m", r.Lease)
	}
	if left := time.Until(r.ExpiresAt); left > time.Minute+time.Second {
		t.Fatalf("Renew: expires in %v, want at most lease_max (1m)", left)
	}
	if _, err := low.Renew("k", g.Token, 2*time.Minute); err == nil {
		t.Fatal("Renew naming 2m on a node with lease_max 1m: accepted, want refused")
	}
}

// A repeat under the waiter ID of a grant made under a longer lease_max
// (before a restart that lowered it, or on the active before a failover)
// is answered with that grant, as every repeat of a standing grant is: it
// was refused 400 lease, and naming the new lease_max instead was a 422
// (another lease), so a client whose answer the restart cut could not
// learn the token of the lock held for it. The same holds for a wait
// above a lowered wait_max (the repeat's wait is cut to it). A new
// acquire, and one under a waiter ID the node does not know, are still
// refused naming the field.
func TestRepeatOfAGrantMadeUnderHigherBounds(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Log: log, LeaseMax: time.Hour})
	first := AcquireRequest{Key: "k", ID: "lm1", Lease: 30 * time.Minute, Wait: 10 * time.Minute}
	g := mustAcquire(t, e, first)
	e.Close()

	low := newEngine(t, Config{Standby: true, LeaseDefault: 30 * time.Second, LeaseMax: time.Minute, WaitMax: 10 * time.Second})
	defer low.Close()
	replayLog(t, low, log)
	low.Promote(Failover)
	again, err := low.Acquire(context.Background(), first)
	if err != nil {
		t.Fatalf("repeat of a 30m grant on a node with lease_max 1m, wait_max 10s: %v", err)
	}
	if again.Token != g.Token {
		t.Fatalf("repeat: token %d, want the grant's %d", again.Token, g.Token)
	}
	for _, req := range []AcquireRequest{
		{Key: "k2", ID: "new", Lease: 30 * time.Minute},
		{Key: "k2", Lease: 30 * time.Minute},
		{Key: "k2", ID: "new", Lease: time.Second, Wait: time.Minute},
	} {
		_, err := low.Acquire(context.Background(), req)
		var ae *ArgError
		if !errors.As(err, &ae) || (ae.Field != "lease" && ae.Field != "wait") {
			t.Fatalf("new acquire %+v over the bounds: %v, want an *ArgError naming lease or wait", req, err)
		}
	}
	if keys, waiters := low.Counts(); keys != 1 || waiters != 0 {
		t.Fatalf("refused acquires changed the state: %d keys, %d waiters, want 1 (k), 0", keys, waiters)
	}
}
