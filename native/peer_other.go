//go:build !unix

package native

import "net"

// peeker cannot peek at a socket here: a grant racing the client's close
// is released only if the write fails. Nor can it write without waiting:
// the reader leaves every write to the writer (direct is false).
type peeker struct {
	direct bool
}

func newPeeker(net.Conn) *peeker { return &peeker{} }

func (*peeker) peerGone() bool { return false }

func (*peeker) unacked() (n int, ok bool) { return 0, false }

func (*peeker) writeNow(b []byte) (int, error) { return 0, nil }

// readDirect is never called here: no connection is direct.
func (c *conn) readDirect(*bool) {}
