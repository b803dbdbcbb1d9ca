package testproc

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/internal/nline"
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
// prefix<n-1> (prefix needs no escaping), each for lease seconds with no
// wait (nline.AppendAcquire).
func AcquireLines(prefix string, n, lease int) []byte {
	var b []byte
	for i := range n {
		b = nline.AppendAcquire(b, prefix+strconv.Itoa(i), time.Duration(lease)*time.Second, 0, nline.AcquireOptions{})
	}
	return b
}

// ReadAcquireAnswers reads native answer lines from nc until it ends or
// deadline passes, and returns the keys of the grants read whole (an A
// answered OK) and the acquires' error lines (an A answered E), as
// nline.ParseAnswer reads them.
func ReadAcquireAnswers(nc net.Conn, deadline time.Time) (granted map[string]bool, refused []string) {
	granted = map[string]bool{}
	_ = nc.SetReadDeadline(deadline)
	br := bufio.NewReader(nc)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return granted, refused
		}
		line = strings.TrimSuffix(line, "\n")
		a, err := nline.ParseAnswer(line)
		switch {
		case err != nil || a.Op != nline.OpAcquire:
		case a.Outcome == nline.OK:
			granted[a.Key] = true
		case a.Outcome == nline.Error:
			refused = append(refused, line)
		}
	}
}
