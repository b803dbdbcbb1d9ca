//go:build unix

package native

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerGone reports whether the client has closed its side of nc (its FIN
// or a reset has arrived), without reading or waiting: a peek at the
// socket. The writer asks before it writes grants, so that a grant made as
// the client went away is released instead of being written into a socket
// nobody reads (SPEC section 1, "A waiter that goes away"). With TLS it
// peeks under the TLS layer: a close_notify alert counts as data, the FIN
// after it as gone.
func peerGone(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
	})
	return gone
}
