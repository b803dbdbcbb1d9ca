//go:build !unix

package rawio

import "net"

// ConnPeerGone is false off Unix: a client's close is seen by the
// connection's reader alone.
func ConnPeerGone(net.Conn) bool { return false }
