package native_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/testproc"
	"github.com/baton-io/baton/native"
)

// TestClientThatStopsReadingGetsTheGrantsSentToIt: a client that
// pipelines acquires and stops reading is closed once its answers back up
// (as in TestClientThatNeverReads), but the grants whose answers were
// already in the connection's socket still reach it once it reads again:
// every lock the server holds for it is one whose answer it read; the
// answers the server could not send are released. Also when the client
// goes on sending after the close, for longer than a fatal line's
// linger, and while it reads (testers' reports: a close at once, then
// one 500 ms later that a line sent after it turned into a reset, lost
// the answers in the server's socket, and their locks stayed held by
// nobody for their whole lease).
func TestClientThatStopsReadingGetsTheGrantsSentToIt(t *testing.T) {
	t.Run("silent", func(t *testing.T) { stopReading(t, false, false) })
	t.Run("sending", func(t *testing.T) { stopReading(t, true, false) })
}

// TestShutdownDeliversTheGrantsInTheSocket: the server closing (a
// graceful shutdown) while a client's answers back up in its socket
// still delivers them when the client reads, also when the client goes
// on sending (a release, a ping) after the server stopped reading it:
// every lock the server holds for it is one whose answer it read (a
// tester's report: the close at shutdown reset such a connection, and
// the answers its socket held, 32,000 to 66,000 grants, were lost while
// their locks stayed held by nobody until their leases).
func TestShutdownDeliversTheGrantsInTheSocket(t *testing.T) {
	t.Run("silent", func(t *testing.T) { stopReading(t, false, true) })
	t.Run("sending", func(t *testing.T) { stopReading(t, true, true) })
}

// stopReading is the case of TestClientThatStopsReadingGetsTheGrantsSentToIt
// (the server closes the connection for not reading) and, with shutdown,
// of TestShutdownDeliversTheGrantsInTheSocket (the server closes while the
// client's answers back up): after the close, the client sends a ping
// every 10 ms (sending) or nothing, and reads after a second (1.2 s from
// the shutdown, past the second the server's writer waits for room).
func stopReading(t *testing.T, sending, shutdown bool) {
	var logs testproc.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	e := newEnvOn(t, engine.Config{}, native.Config{MaxQueue: 64, Logger: log}, smallSendBuffers)
	nc := testproc.DialSmallReceive(t, e.addr, 4096)
	const n = 5000
	flood := testproc.AcquireLines("stall-", n, 600)
	var wg sync.WaitGroup
	wg.Go(func() {
		// The server stops taking lines once its answers back up: the
		// rest of this write waits, and ends with the connection.
		_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, _ = nc.Write(flood)
	})
	closed := make(chan struct{})
	if shutdown {
		// Not reading, until the server's answers back up in the
		// socket, then the server closes...
		waitFor(t, func() bool { li, _ := e.eng.Status("stall-200"); return li.Holder != nil })
		wg.Go(func() {
			defer close(closed)
			_ = e.srv.Close()
		})
	} else {
		// Not reading, past the server's patience (a second without the
		// socket taking anything)...
		close(closed)
		waitFor(t, func() bool { return strings.Contains(logs.String(), "does not read its answers") })
	}
	stop := make(chan struct{})
	if sending {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if _, err := nc.Write([]byte("P still-here\n")); err != nil {
					return
				}
			}
		})
	}
	if shutdown {
		time.Sleep(1200 * time.Millisecond) // past the second the writer waits for room
	} else if sending {
		time.Sleep(time.Second) // past the 500 ms a fatal line lingers
	}
	// ...then reading everything the connection still brings.
	got, _ := testproc.ReadAcquireAnswers(nc, time.Now().Add(30*time.Second))
	close(stop)
	wg.Wait()
	<-closed
	var lost []string
	for i := range n {
		k := fmt.Sprintf("stall-%d", i)
		if li, _ := e.eng.Status(k); li.Holder != nil && !got[k] {
			lost = append(lost, k)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of the locks the server holds for the closed connection were granted in answers the client never got (read %d), e.g. %s", len(lost), len(got), lost[0])
	}
	if len(got) == 0 {
		t.Fatal("the client read no grant at all")
	}
}
