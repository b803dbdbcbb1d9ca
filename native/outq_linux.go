//go:build linux

package native

import "golang.org/x/sys/unix"

// sendQueue returns the bytes of the socket fd's send queue that the
// peer's TCP has not acknowledged (SIOCOUTQ, tcp(7)); ok is false when
// the ioctl fails.
func sendQueue(fd uintptr) (n int, ok bool) {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	return n, err == nil
}
