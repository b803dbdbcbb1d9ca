package engine

import (
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
	for i, b := range log.raw() {
		if err := low.Replay(b); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
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
