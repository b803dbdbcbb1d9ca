//go:build linux && !race

package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Raw reports whether this build reads and writes through raw system
// calls.
const Raw = true

// Read is read(2) on the non-blocking socket fd, as a raw system call: it
// never waits. It returns the bytes read (0 at the end of the stream), or
// -1 and the syscall.Errno: syscall.EAGAIN when nothing is there,
// syscall.EINTR (interrupted: call again).
func Read(fd int, p []byte) (int, error) { return rawIO(syscall.SYS_READ, uintptr(fd), p, 0) }

// Write is write(2) on the non-blocking socket fd, as a raw system call:
// it never waits. It returns the bytes written, or -1 and the
// syscall.Errno: syscall.EAGAIN when the socket takes nothing,
// syscall.EINTR (interrupted: call again).
func Write(fd int, p []byte) (int, error) { return rawIO(syscall.SYS_WRITE, uintptr(fd), p, 0) }

// peek is recv(2) of p on the socket fd with MSG_PEEK|MSG_DONTWAIT, as a
// raw system call: it never waits (PeerGone). It returns the bytes there
// (0 at the end of the stream), or -1 and the syscall.Errno.
func peek(fd uintptr, p []byte) (int, error) {
	return rawIO(syscall.SYS_RECVFROM, fd, p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
}

// rawIO is the system call trap (read(2), write(2), or recvfrom(2) with
// flags and no address) of p on fd, as a raw system call; read and write
// take no fourth argument, and flags is 0 for them.
func rawIO(trap, fd uintptr, p []byte, flags uintptr) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall6(trap, fd, uintptr(ptr), uintptr(len(p)), flags, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// conn is Wrap's connection. Its reads (and its writes) are one at a time
// (rmu, wmu): each sets the fields its function, made once, works on.
type conn struct {
	*net.TCPConn
	rc syscall.RawConn

	rmu    sync.Mutex
	rb     []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool

	wmu     sync.Mutex
	wb      []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

func wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	w := &conn{TCPConn: tc, rc: rc}
	w.readFn = w.read
	w.writeFn = w.write
	return w
}

// read is the raw read of Read: false (wait) when nothing is there.
func (c *conn) read(fd uintptr) bool {
	for {
		n, err := Read(int(fd), c.rb)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			c.rerr = os.NewSyscallError("read", err)
		case n == 0 && len(c.rb) > 0:
			c.rerr = io.EOF
		default:
			c.rn = n
		}
		return true
	}
}

// write is the raw write of Write: false (wait) when the socket takes no
// more and some is left.
func (c *conn) write(fd uintptr) bool {
	for c.wn < len(c.wb) {
		n, err := Write(int(fd), c.wb[c.wn:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil:
			c.werr = os.NewSyscallError("write", err)
			return true
		}
		c.wn += n
	}
	return true
}

func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rb, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.readFn)
	n := c.rn
	if err == nil {
		err = c.rerr
	}
	c.rb, c.rerr = nil, nil
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: unwrapOp(err)}
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wb, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.writeFn)
	n := c.wn
	if err == nil {
		err = c.werr
	}
	c.wb, c.werr = nil, nil
	if err != nil {
		err = &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: unwrapOp(err)}
	}
	return n, err
}

// unwrapOp is the error inside err when err is the *net.OpError of the
// raw connection's wait (a deadline, the connection closed).
func unwrapOp(err error) error {
	if oe, ok := err.(*net.OpError); ok {
		return oe.Err
	}
	return err
}
