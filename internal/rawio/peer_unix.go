//go:build unix

package rawio

import (
	"errors"
	"net"
	"syscall"
)

// PeerGone reports whether the peer of the socket fd has closed its side
// of the connection (its FIN or a reset has arrived) with nothing it sent
// left unread, without reading or waiting: a peek (recv(2) with
// MSG_PEEK|MSG_DONTWAIT) that finds the end of the stream, or ECONNRESET.
// Bytes still unread, or none and no close: false. Under TLS, a
// close_notify alert is such bytes, the FIN after it the close. A server
// asks before it answers a grant, so that a grant made as its client went
// away is released instead of written into a socket nobody reads, whether
// or not the connection's reader has seen the close yet (SPEC section 1,
// "A waiter that goes away"). The one test of a client gone for both
// protocols (package native, package handlers). On Linux outside -race
// the peek is a raw system call, as Read and Write are (the package doc):
// it never blocks, and made the ordinary way it woke the scheduler's
// monitor thread once per grant answered.
func PeerGone(fd uintptr) bool {
	var b [1]byte
	n, err := peek(fd, b[:])
	return (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
}

// ConnPeerGone is PeerGone for the socket under c, found through the
// wrappers that give it by NetConn (TLS's, a listener's); false for a
// connection without a socket.
func ConnPeerGone(c net.Conn) bool {
	for {
		if sc, ok := c.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return false
			}
			gone := false
			_ = rc.Control(func(fd uintptr) { gone = PeerGone(fd) })
			return gone
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = w.NetConn()
	}
}
