package history

import (
	"context"
	"testing"
	"time"
)

type expiringHeld struct{ expiry time.Time }

func (expiringHeld) Token() uint64                              { return 1 }
func (expiringHeld) Renew(context.Context, time.Duration) error { return nil }
func (expiringHeld) Release(context.Context) error              { return nil }
func (h expiringHeld) Expiry() time.Time                        { return h.expiry }

type plainHeld struct{ expiringHeld }

func (plainHeld) Expiry() {} // not the interface announcedEnd reads

// A grant answered after it waited longer than its lease (a waiter resumed
// across a failover) is held to the expires_at its node announced, less
// expirySlack, not to its ask plus the lease, which ended before it was
// received: its span would be empty, and no overlap of it judged.
func TestAnnouncedEndHoldsALateGrantToItsAnnouncedExpiry(t *testing.T) {
	asked := time.Now()
	lease := 2 * time.Second
	expiry := asked.Add(5 * time.Second) // granted 3 s after the ask
	if got, want := announcedEnd(expiringHeld{expiry}, asked.Add(lease)), expiry.Add(-expirySlack); !got.Equal(want) {
		t.Errorf("announcedEnd = %v, want %v", got, want)
	}
	// An earlier announced expiry never shortens the span counted from the ask.
	if got := announcedEnd(expiringHeld{asked.Add(time.Second)}, asked.Add(lease)); !got.Equal(asked.Add(lease)) {
		t.Errorf("announcedEnd = %v, want the ask plus the lease", got)
	}
	// Nothing announced, or a client that does not tell it: from the ask.
	if got := announcedEnd(expiringHeld{}, asked.Add(lease)); !got.Equal(asked.Add(lease)) {
		t.Errorf("announcedEnd without an expiry = %v", got)
	}
	if got := announcedEnd(plainHeld{expiringHeld{expiry}}, asked.Add(lease)); !got.Equal(asked.Add(lease)) {
		t.Errorf("announcedEnd of a client without Expiry = %v", got)
	}
}

// The official client's grants tell their expiry (announcedEnd reads it).
var _ interface{ Expiry() time.Time } = officialLock{}
var _ interface{ Expiry() time.Time } = (*h1Lock)(nil)
