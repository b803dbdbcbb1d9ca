package native_test

import (
	"net"
	"strconv"
	"syscall"
	"testing"

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
