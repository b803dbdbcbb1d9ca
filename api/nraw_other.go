//go:build !unix

package api

import (
	"bufio"
	"net"
	"syscall"
)

// rawConn is nil where readRaw is not built: readLoop reads through bufio.
func rawConn(net.Conn) syscall.RawConn { return nil }

func (w *nwire) readRaw(syscall.RawConn, *bufio.Reader, *error) error {
	panic("api: readRaw on a platform without it")
}
