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

	// direct: the connection is the socket itself (not TLS), which
	// writeNow writes to without waiting.
	direct bool
	write  func(fd uintptr) bool
	buf    []byte // write's bytes, then the ones it did not write
	wrote  int    // write's results
	werr   error
}

// newPeeker returns the peeker of nc. With TLS it peeks under the TLS
// layer: a close_notify alert counts as data, the FIN after it as gone.
func newPeeker(nc net.Conn) *peeker {
	p := &peeker{}
	direct := true
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
		direct = false
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
	if _, ok := nc.(*net.TCPConn); ok && direct {
		p.direct = true
		p.write = func(fd uintptr) bool {
			for p.wrote < len(p.buf) {
				n, err := syscall.Write(int(fd), p.buf[p.wrote:])
				if n > 0 {
					p.wrote += n
				}
				if err == syscall.EINTR {
					continue
				}
				if err == syscall.EAGAIN {
					break
				}
				if err != nil {
					p.werr = err
					break
				}
			}
			return true // never wait for the socket
		}
	}
	return p
}

// writeNow writes as much of b as the socket takes without waiting (the
// connection must be direct): the bytes written, and an error that ends
// the connection.
func (p *peeker) writeNow(b []byte) (int, error) {
	p.buf, p.wrote, p.werr = b, 0, nil
	if err := p.rc.Write(p.write); err != nil {
		p.werr = err
	}
	n, err := p.wrote, p.werr
	p.buf = nil
	return n, err
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
