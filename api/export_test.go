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
