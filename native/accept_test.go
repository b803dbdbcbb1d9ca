package native_test

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// emfileListener fails its first n Accepts as accept4 does when the
// process has run out of file descriptors (a reconnect storm above
// RLIMIT_NOFILE), then accepts as ln does.
type emfileListener struct {
	net.Listener
	left atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.left.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// A node out of file descriptors for a moment (more clients connecting
// at once than RLIMIT_NOFILE allows) must go on serving once descriptors
// are free again, as net/http's server does (it sleeps and retries a
// temporary accept error). Seen with real processes: `ulimit -n 120;
// baton serve --native-listen …`, 300 native connections opened at once:
// Serve returned "accept4: too many open files", cmd/baton logged
// "server stopped" and the whole node exited, its HTTP port and every
// holder's and waiter's service with it.
func TestAcceptOutOfFileDescriptorsKeepsServing(t *testing.T) {
	e := newEnvOn(t, engine.Config{}, native.Config{}, func(ln net.Listener) net.Listener {
		l := &emfileListener{Listener: ln}
		l.left.Store(3)
		return l
	})
	c := e.dial()
	c.send("P alive")
	if got := c.read(); got != "P alive OK" {
		t.Fatalf("after EMFILE from accept: got %q, want %q", got, "P alive OK")
	}
}
