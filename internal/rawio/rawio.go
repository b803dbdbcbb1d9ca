// Package rawio reads and writes sockets with read(2) and write(2) made
// as raw system calls, on Linux outside the race detector's builds: the
// runtime's entersyscall, which an ordinary call goes through, wakes the
// Go scheduler's monitor thread (sysmon) from its deep sleep after every
// moment the process was idle and sets it polling every 20 µs again, a
// thread switch each time. A process that wakes for a short burst of work
// many times a second (a standby applying its active's stream batch by
// batch, an active whose changes wait for its standbys) pays that on each
// burst. The calls never block: the socket is non-blocking, and a call
// that finds nothing to read or no room to write waits in Go's poller, as
// the ordinary calls do. Elsewhere (and with -race, which tracks the
// bytes the ordinary calls read and write) they are the ordinary calls.
package rawio

import "net"

// Wrap returns c reading and writing through raw system calls (see the
// package doc) when it is a *net.TCPConn and the build has them; c itself
// otherwise. Deadlines, Close and every other method are c's.
func Wrap(c net.Conn) net.Conn { return wrap(c) }

// Listener returns ln whose accepted connections are Wrap's.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
