package testproc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DialSmallReceive dials addr over TCP with a receive buffer of size bytes
// (SO_RCVBUF, which Linux doubles), so that a client that does not read
// backs the server's answers up after a few kilobytes. The connection is
// closed when t ends.
func DialSmallReceive(t testing.TB, addr string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size) })
		return errors.Join(err, serr)
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// AcquireLines returns n native acquire lines of the keys prefix0 to
// prefix<n-1>, each for lease seconds with no wait ("A <key> <lease> -").
func AcquireLines(prefix string, n, lease int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "A %s%d %d -\n", prefix, i, lease)
	}
	return []byte(b.String())
}

// ReadAcquireAnswers reads native answer lines from nc until it ends or
// deadline passes, and returns the keys of the grants read whole ("A
// <key> OK ...") and the acquires' error lines ("A <key> E ...").
func ReadAcquireAnswers(nc net.Conn, deadline time.Time) (granted map[string]bool, refused []string) {
	granted = map[string]bool{}
	_ = nc.SetReadDeadline(deadline)
	br := bufio.NewReader(nc)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return granted, refused
		}
		switch f := strings.Fields(line); {
		case len(f) >= 3 && f[0] == "A" && f[2] == "OK":
			granted[f[1]] = true
		case len(f) >= 3 && f[0] == "A" && f[2] == "E":
			refused = append(refused, strings.TrimSpace(line))
		}
	}
}
