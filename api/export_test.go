package api

import (
	"testing"
	"time"
)

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
