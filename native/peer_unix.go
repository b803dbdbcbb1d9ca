//go:build unix

package native

import (
	"crypto/tls"
	"errors"
	"io"
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

// sockReader is the reader's source on a direct connection: it reads the
// socket through its raw connection and, once the socket has no more
// bytes for the reader, calls idle before it waits for more, once per
// Read. The reader flushes its answers there. The socket has no more
// bytes when a read finds none (EAGAIN), or when the last read took fewer
// bytes than it asked for (short: it took all there were): then idle runs
// before the read, and a grant's check that the client is still there
// (check, instead of a peek) is that read, made after the grant's log
// wait: a batch costs one read fewer. Bytes that arrive while idle runs
// wake the wait at once (the poller was armed before it ran).
type sockReader struct {
	rc    syscall.RawConn
	idle  func()
	read  func(fd uintptr) bool
	p     []byte
	n     int
	err   error
	idled bool
	// short: the last read took fewer bytes than it asked for.
	short bool
	// fd is the socket while read runs; checked: a check during idle
	// found no bytes (EAGAIN), so the read need not be made again.
	fd      int
	checked bool
}

// newSockReader returns p's sockReader (p must be direct) calling idle.
func newSockReader(p *peeker, idle func()) *sockReader {
	s := &sockReader{rc: p.rc, idle: idle}
	s.read = func(fd uintptr) bool {
		s.fd = int(fd)
		if !s.idled && s.short {
			// The socket had no more bytes at the last read: flush first
			// (idle), and let a check made there be this read.
			s.short = false
			if s.runIdle() {
				return true
			}
			if s.checked {
				return false // wait: the check found no bytes
			}
		}
		for {
			n, err := syscall.Read(int(fd), s.p)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				if !s.idled && s.runIdle() {
					return true
				}
				return false // wait
			case err != nil:
				s.err = err
			case n == 0:
				s.err = io.EOF
			default:
				s.n = n
				s.short = n < len(s.p)
			}
			return true
		}
	}
	return s
}

// runIdle calls idle once for this Read and reports whether a check made
// there ended the read (bytes read, or the end of the connection).
func (s *sockReader) runIdle() bool {
	s.idled, s.checked = true, false
	s.idle()
	return s.n > 0 || s.err != nil
}

// check reports, from idle only (inside the socket's read), whether the
// client has closed its side: it reads into the reader's buffer without
// waiting. EOF or an error (a reset) is gone; bytes, or none waiting, are
// not (as the peek: a close behind unread bytes is not seen). Bytes it
// reads are the Read's; a check after them answers from them.
func (s *sockReader) check() (gone bool) {
	if s.n > 0 {
		return false
	}
	if s.err != nil {
		return true
	}
	for {
		n, err := syscall.Read(s.fd, s.p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			s.checked = true
			return false
		case err != nil:
			s.err = err
			return true
		case n == 0:
			s.err = io.EOF
			return true
		}
		s.n = n
		s.short = n < len(s.p)
		return false
	}
}

func (s *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.p, s.n, s.err, s.idled = p, 0, nil, false
	if err := s.rc.Read(s.read); err != nil {
		s.p = nil
		return 0, err
	}
	s.p = nil
	return s.n, s.err
}
