//go:build unix

package native

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"syscall"

	"github.com/baton-io/baton/internal/rawio"
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
	p.peek = func(fd uintptr) { p.gone = rawio.PeerGone(fd) }
	if _, ok := nc.(*net.TCPConn); ok && direct {
		p.direct = true
		p.write = func(fd uintptr) bool {
			for p.wrote < len(p.buf) {
				n, err := rawio.Write(int(fd), p.buf[p.wrote:])
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

// unacked returns the bytes written to the socket that the client's TCP
// has not acknowledged (0: what the connection sent is in the client's
// socket, which a reset of the connection no longer takes from it), and
// ok, whether this system could tell.
func (p *peeker) unacked() (n int, ok bool) {
	if p.rc == nil {
		return 0, false
	}
	_ = p.rc.Control(func(fd uintptr) { n, ok = sendQueue(fd) })
	return n, ok
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

// readDirect is readLoop on a plain TCP connection (c.peer.direct): it
// reads the socket and dispatches the lines it read from inside one raw
// read (syscall.RawConn.Read) for the connection's whole life, returning
// to the poller only to wait. A read that takes fewer bytes than it asked
// for took all there were: the reader then writes the answers of the
// lines it dispatched (flushNow) and reads once more (check) before it
// waits: none waiting (EAGAIN), and it waits, since a byte or a close
// that arrives after that read wakes the wait (the poller is not re-armed
// in between, as it is when a raw read begins); bytes, and they are
// dispatched next; the end of the connection, and the reader ends. The
// wait alone would miss a close that came with the bytes just read: it
// makes no readiness of its own. Before it writes grants, the flush makes
// that read itself (after their log wait, instead of a peek), so that a
// grant made as the client went away is released. A burst dispatches
// Server.batch lines at most before their answers leave, and pauses
// while they cannot leave (pause: a reader that writes does not outrun
// its client's reads into MaxQueue). *authed is as dispatch's.
func (c *conn) readDirect(authed *bool) {
	buf := make([]byte, MaxLine+2)
	var r, w int // buf[r:w]: bytes read and not yet dispatched
	var fd int
	// inBatch: c.reading is set, the answers of the lines dispatched
	// since the last flush wait for the reader's flushNow.
	inBatch, stop := false, false
	// What check found: got bytes into buf[w:], or gotErr; checked: it
	// ran since the last flush.
	var got int
	var gotErr error
	var checked bool
	check := func() (gone bool) {
		checked = true
		if got > 0 {
			return false // as a peek would: a close behind bytes is not seen
		}
		if gotErr != nil {
			return true
		}
		for {
			n, err := rawio.Read(fd, buf[w:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false
			case err != nil:
				gotErr = err
				return true
			case n == 0:
				gotErr = io.EOF
				return true
			}
			got = n
			return false
		}
	}
	flush := func(chk func() bool) {
		inBatch = false
		got, gotErr, checked = 0, nil, false
		c.flushNow(true, chk)
	}
	// lines dispatches the complete lines of buf[r:w], which arrived at
	// start (the read that returned them: one reading of the clock for
	// them all), and moves what is left to the front of buf; false: the
	// reader stops.
	lines := func(start instant) bool {
		for {
			if inBatch && c.queued() >= c.s.batch {
				flush(nil)
				if c.pause() {
					return false
				}
			}
			i := bytes.IndexByte(buf[r:w], '\n')
			if i < 0 {
				break
			}
			line := buf[r : r+i]
			r += i + 1
			if !inBatch {
				inBatch = true
				c.mu.Lock()
				c.reading = true
				c.mu.Unlock()
			}
			if c.dispatch(line, authed, start) {
				return false
			}
		}
		if w-r == len(buf) {
			c.tooLong(c.s.now())
			return false
		}
		w = copy(buf, buf[r:w])
		r = 0
		return true
	}
	// took dispatches n bytes just read into buf[w:]. It reports whether
	// the reader waits (the socket had no more bytes) or stops; neither:
	// the raw read begins again (so that a client that keeps sending does
	// not keep one going past a Close, which waits for it).
	took := func(n int) (wait, end bool) {
		w += n
		short := w < len(buf)
		if !lines(c.s.now()) {
			return false, true
		}
		if !short {
			return false, false
		}
		// The socket had no more bytes: the answers leave now.
		if inBatch {
			flush(check)
		} else {
			got, gotErr, checked = 0, nil, false
		}
		if !checked {
			// One more read before the wait, unless the flush made it:
			// a close that came with these bytes (before the poller
			// reported them) makes no readiness of its own, so a wait
			// now would never see it (the connection, and its waiters,
			// would stay).
			check()
		}
		if gotErr != nil {
			return false, true
		}
		if got == 0 {
			return true, false
		}
		// Bytes the check read: dispatched now, answered after the next
		// read.
		w += got
		return false, !lines(c.s.now())
	}
	read := func(sfd uintptr) bool {
		fd = int(sfd)
		c.idling.Store(true)
		defer c.idling.Store(false)
		for {
			n, err := rawio.Read(fd, buf[w:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				if !inBatch {
					return false // wait
				}
				flush(check)
				if gotErr != nil {
					stop = true
					return true
				}
				if got == 0 {
					return false
				}
				n = got
			case err != nil || n == 0:
				stop = true
				return true
			}
			wait, end := took(n)
			stop = end
			return !wait
		}
	}
	for !stop {
		if err := c.peer.rc.Read(read); err != nil {
			return
		}
	}
}
