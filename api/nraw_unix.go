//go:build unix

package api

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// rawConn returns the raw connection of nc when it is a plain TCP
// connection (not TLS, nor a DialContext's own net.Conn), else nil.
func rawConn(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// errLongAnswer ends a connection whose node sent a line longer than the
// reader's buffer.
var errLongAnswer = errors.New("an answer line longer than 16 KiB")

// readRaw is readLoop on a plain TCP connection: it reads the socket and
// matches the answers it read from inside one raw read
// (syscall.RawConn.Read) for the connection's whole life. A read that
// takes fewer bytes than there was room for took all there were: the
// reader then waits for the socket without reading again to find it
// empty (EAGAIN; a byte that arrives after that read wakes the wait,
// since the poller is not re-armed in between as it is when a raw read
// begins). With bufio that second read came between every batch of
// answers and the callers they woke, which run once the reader waits: a
// system call on the way from an answer to the caller's next request.
// br holds what the dial read past the AUTH answer, if anything. It
// returns why reading ended (the caller ends the connection: not from
// inside the raw read, which a Close waits for).
func (w *nwire) readRaw(rc syscall.RawConn, br *bufio.Reader, refused *error) error {
	buf := make([]byte, 16<<10)
	end := 0 // buf[:end]: bytes read and not yet matched
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		end = copy(buf, b)
	}
	var stop error
	// lines matches the complete lines of buf[:end] and moves what is
	// left to the front; false: the connection ends (stop).
	lines := func() bool {
		start := 0
		for {
			i := bytes.IndexByte(buf[start:end], '\n')
			if i < 0 {
				break
			}
			if err := w.answer(buf[start:start+i], refused); err != nil {
				stop = err
				return false
			}
			start += i + 1
		}
		end = copy(buf, buf[start:end])
		if end == len(buf) {
			stop = errLongAnswer
			return false
		}
		return true
	}
	if end > 0 && !lines() {
		return stop
	}
	read := func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf[end:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false // wait
			case err != nil:
				stop = os.NewSyscallError("read", err)
				return true
			case n == 0:
				stop = io.EOF
				return true
			}
			end += n
			short := end < len(buf)
			if !lines() {
				return true
			}
			if short {
				return false // the socket had no more: wait
			}
		}
	}
	for stop == nil {
		if err := rc.Read(read); err != nil && stop == nil {
			stop = err
		}
	}
	return readEnd(stop, *refused)
}
