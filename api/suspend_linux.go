package api

import (
	"time"

	"golang.org/x/sys/unix"
)

// suspendedSinceBoot returns how long this machine has been suspended
// since it booted: CLOCK_BOOTTIME, which counts a suspend, less
// CLOCK_MONOTONIC, which Go's monotonic clock and timers use and which
// stands still during one.
func suspendedSinceBoot() time.Duration {
	var boot, mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return 0
	}
	return max(time.Duration(boot.Nano()-mono.Nano()), 0)
}

// suspendCheck is the longest a keep-alive sleeps before it looks at the
// clocks again: after a resume it finds within this much that a suspend
// ate the lease.
const suspendCheck = time.Second
