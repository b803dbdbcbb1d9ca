//go:build !linux

package api

import "time"

// suspendedSinceBoot is 0 where the monotonic clock is not known to stand
// still during a suspend (suspend_linux.go).
func suspendedSinceBoot() time.Duration { return 0 }

// suspendCheck: a keep-alive sleeps until its renewal is due.
const suspendCheck = time.Duration(1<<63 - 1)
