//go:build unix

package native

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peeker answers peerGone for one connection. Its raw connection and the
// function it runs on the socket are made once (newPeeker), not for every
// batch of grants: SyscallConn and a closure were two allocations a batch.
// Only the connection's writer uses it.
type peeker struct {
	rc   syscall.RawConn // nil: not a socket; peerGone is false
	peek func(fd uintptr)
	gone bool // peek's result
}

// newPeeker returns the peeker of nc. With TLS it peeks under the TLS
// layer: a close_notify alert counts as data, the FIN after it as gone.
func newPeeker(nc net.Conn) *peeker {
	p := &peeker{}
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return p
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return p
	}
	p.rc = rc
	p.peek = func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.gone = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
	}
	return p
}

// peerGone reports whether the client has closed its side of the
// connection (its FIN or a reset has arrived), without reading or
// waiting: a peek at the socket. The writer asks before it writes grants,
// so that a grant made as the client went away is released instead of
// being written into a socket nobody reads (SPEC section 1, "A waiter
// that goes away").
func (p *peeker) peerGone() bool {
	if p.rc == nil {
		return false
	}
	p.gone = false
	_ = p.rc.Control(p.peek)
	return p.gone
}
