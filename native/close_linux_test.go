package native_test

import (
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// sendAndClose writes line and closes c's sending side so that the line
// and the FIN leave in one segment (TCP_CORK holds the line until the
// shutdown, which puts its FIN on it): the server reads the line with
// the close already there.
func sendAndClose(t *testing.T, c net.Conn, line string) {
	t.Helper()
	tc := c.(*net.TCPConn)
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if _, err := tc.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := tc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
}

// TestOwnGrantRacingCloseIsReleased: a client releases a lock and closes
// its connection at once, while its own second acquire of the key waits
// behind the first on the same connection. The release hands the lock to
// that acquire, whose grant the connection's reader would write as the
// close is there to be read: the grant is released, not written into a
// socket nobody reads (the reader's check before it writes grants).
func TestOwnGrantRacingCloseIsReleased(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	for i := range 20 {
		key := "own" + strconv.Itoa(i)
		w := e.dial()
		w.send("A "+key+" 30 -", "A "+key+" 30 -")
		tok := grant(t, w.read(), key)
		waitFor(t, func() bool { li, _ := e.eng.Status(key); return li.Waiters == 1 })
		sendAndClose(t, w.nc, "R "+key+" "+strconv.FormatUint(tok, 10))
		waitFor(t, func() bool { li, _ := e.eng.Status(key); return li.Holder == nil && li.Waiters == 0 })
	}
}

// TestCloseWithTheLastLineIsSeen: a client's close that arrives with its
// last line (one segment: the reader reads the line with the close
// already there, and the poller has no readiness left to report) ends the
// connection on the node: a parked acquire sent that way leaves the
// queue (SPEC section 2b: a connection that closes is a waiter that goes
// away), and after a release sent that way the node closes its side. The
// reader waited after such a short read without reading again, so the
// waiter stayed queued and the connection open until the lock came to it.
func TestCloseWithTheLastLineIsSeen(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h := e.dial()
	h.send("A held 30 -")
	grant(t, h.read(), "held")
	for range 30 {
		w := e.dial()
		sendAndClose(t, w.nc, "A held 30 -")
		_ = w.nc.SetReadDeadline(time.Now().Add(patience))
		if n, err := w.br.Read(make([]byte, 16)); err != io.EOF {
			t.Fatalf("after a parked acquire and a close: %d bytes, %v; want EOF (the node closes its side)", n, err)
		}
		// The waiter left before the node closed the socket.
		if li, _ := e.eng.Status("held"); li.Waiters != 0 {
			t.Fatalf("%d waiters after their connections closed", li.Waiters)
		}
	}
	for i := range 30 {
		w := e.dial()
		sendAndClose(t, w.nc, "R free"+strconv.Itoa(i)+" 5")
		if line := w.read(); !strings.HasPrefix(line, "R free"+strconv.Itoa(i)+" E not_held") {
			t.Fatalf("answer %q", line)
		}
		_ = w.nc.SetReadDeadline(time.Now().Add(patience))
		if n, err := w.br.Read(make([]byte, 16)); err != io.EOF {
			t.Fatalf("after the answer: %d bytes, %v; want EOF (the node closes its side)", n, err)
		}
	}
}
