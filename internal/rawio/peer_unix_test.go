//go:build unix

package rawio

import (
	"net"
	"testing"
	"time"
)

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
		time.Sleep(10 * time.Millisecond) // let the bytes arrive; a wrong answer is "gone"
		if ConnPeerGone(c) {
			t.Fatal("an open connection with bytes unread: gone")
		}
		s.Close()
		time.Sleep(10 * time.Millisecond)
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
