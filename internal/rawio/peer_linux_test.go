//go:build linux

package rawio

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// arrived waits (up to 5 s) until the socket under c has events: POLLIN
// (bytes or the peer's close there to read), with rdhup also POLLRDHUP
// (the peer's close itself), so that a peek that follows sees them.
func arrived(t *testing.T, c net.Conn, rdhup bool) {
	t.Helper()
	ev := int16(unix.POLLIN)
	if rdhup {
		ev |= unix.POLLRDHUP
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int16
	err = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: ev}}
		if _, perr := unix.Poll(fds, 5000); perr == nil {
			got = fds[0].Revents
		}
	})
	if err != nil || got&ev != ev {
		t.Fatalf("the socket's events: %#x, want %#x (err %v)", got, ev, err)
	}
}

// gone is ConnPeerGone of c, asked until it reports want or 5 s pass (a
// close on loopback reaches the other socket within the closing call,
// but the test does not rely on it).
func gone(t *testing.T, c net.Conn, want bool) bool {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for {
		got := ConnPeerGone(c)
		if got == want || time.Now().After(end) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// PeerGone is the test of a client gone before a grant is written (SPEC
// section 1): false while the peer is there, also with bytes it sent left
// unread, and after its close as long as those bytes are unread; true once
// its close (a FIN) or a reset has arrived with nothing left unread.
func TestPeerGoneSeesACloseOrAResetAndNothingElse(t *testing.T) {
	t.Run("open", func(t *testing.T) {
		c, _ := pair(t)
		if ConnPeerGone(c) {
			t.Fatal("an open connection with nothing sent: gone")
		}
	})
	t.Run("bytes unread", func(t *testing.T) {
		c, s := pair(t)
		if _, err := s.Write([]byte("GET")); err != nil {
			t.Fatal(err)
		}
		arrived(t, c, false)
		if ConnPeerGone(c) {
			t.Fatal("an open connection with bytes unread: gone")
		}
		s.Close()
		arrived(t, c, true)
		if ConnPeerGone(c) {
			t.Fatal("a closed connection with bytes still unread: gone (the bytes come first)")
		}
		b := make([]byte, 3)
		if _, err := c.Read(b); err != nil {
			t.Fatal(err)
		}
		if !gone(t, c, true) {
			t.Fatal("the bytes read, the close behind them: not gone")
		}
		if !gone(t, c, true) {
			t.Fatal("a second peek: not gone (a peek must not consume the close)")
		}
	})
	t.Run("close", func(t *testing.T) {
		c, s := pair(t)
		s.Close()
		if !gone(t, c, true) {
			t.Fatal("the peer closed: not gone")
		}
	})
	t.Run("reset", func(t *testing.T) {
		c, s := pair(t)
		if err := s.(*net.TCPConn).SetLinger(0); err != nil {
			t.Fatal(err)
		}
		s.Close() // linger 0: a reset instead of a FIN
		if !gone(t, c, true) {
			t.Fatal("the peer reset the connection: not gone")
		}
	})
}
