//go:build !unix

package native

import "net"

// peeker cannot peek at a socket here: a grant racing the client's close
// is released only if the write fails.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return &peeker{} }

func (*peeker) peerGone() bool { return false }
