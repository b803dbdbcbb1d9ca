package engine

import "time"

// Resolution is the shortest lease or wait the engine keeps: it counts
// them in nanoseconds (time.Duration), on its monotonic clock. A lease or
// wait given in seconds that is above 0 but below it (1e-12) is refused
// by the protocols with BelowResolution: it has no duration here, and
// rounding it to 0 (no limit, for a wait) or up to 1 ns would each make
// it another request than the one sent.
const Resolution = time.Nanosecond

// BelowResolution is the refusal of a lease (wait false) or a wait (wait
// true) of seconds above 0 but below Resolution, after "<field>: ".
func BelowResolution(wait bool) string {
	if wait {
		return "must be 0 (no limit) or at least 0.000000001 seconds (1 ns, the node's resolution)"
	}
	return "must be at least 0.000000001 seconds (1 ns, the node's resolution)"
}

// SecondsBelowResolution reports whether seconds is above 0 but below
// Resolution (also when it is too small for a float64 and was read as the
// smallest one).
func SecondsBelowResolution(seconds float64) bool {
	return seconds > 0 && seconds*1e9 < 1
}
