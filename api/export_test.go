package api

import (
	"testing"
	"time"

	"github.com/baton-io/baton/internal/nline"
)

// DialPingLine is the line of the ping a native connection begins with.
func DialPingLine() []byte { return nline.AppendPing(nil, dialPing.key) }

// SetFailoverPatience sets failoverPatience to d for the test t.
func SetFailoverPatience(t testing.TB, d time.Duration) {
	old := failoverPatience
	failoverPatience = d
	t.Cleanup(func() { failoverPatience = old })
}

// LockDeadline returns the local time by which l's lease may have run out
// on the server, as the keep-alive counts it.
func LockDeadline(l *Lock) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// SetSuspended replaces, for the test t, the clock of how long the machine
// was suspended since it booted (Linux: CLOCK_BOOTTIME - CLOCK_MONOTONIC).
// Call it before the Locks it concerns are made.
func SetSuspended(t testing.TB, f func() time.Duration) {
	old := suspended
	suspended = f
	t.Cleanup(func() { suspended = old })
}

// Up returns how many of c's connections to the address base are up.
func Up(c *Client, base string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.slots {
		if s.addr.base.String() == base && s.state == slotUp {
			n++
		}
	}
	return n
}
