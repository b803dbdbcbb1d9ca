//go:build unix && !linux

package native

// sendQueue cannot tell the unacknowledged bytes of a socket's send
// queue here: ok is false.
func sendQueue(uintptr) (n int, ok bool) { return 0, false }
