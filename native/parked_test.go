package native_test

import (
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// TestParkedAcquiresRunNoGoroutine: acquires parked in their keys' queues
// cost the server no goroutine each (issue 17: a parked acquire is the
// engine's waiter and a callback); closing their connection makes them
// all leave, and the keys' holders release to nobody.
func TestParkedAcquiresRunNoGoroutine(t *testing.T) {
	const n = 2000
	e := newEnv(t, engine.Config{}, native.Config{})
	h := e.dial()
	lines := make([]string, n)
	for i := range lines {
		lines[i] = "A p/" + strconv.Itoa(i) + " 60 -"
	}
	h.send(lines...)
	toks := map[string]uint64{}
	for range n {
		line := h.read()
		key := strings.Fields(line)[1]
		toks[key] = grant(t, line, key)
	}
	w := e.dial()
	base := runtime.NumGoroutine()
	w.send(lines...)
	waitFor(t, func() bool { _, ws := e.eng.Counts(); return ws == n })
	if g := runtime.NumGoroutine(); g-base > n/10 {
		t.Fatalf("%d parked acquires run %d goroutines more (want none per acquire)", n, g-base)
	}
	w.nc.Close()
	waitFor(t, func() bool { _, ws := e.eng.Counts(); return ws == 0 })
	rel := make([]string, 0, n)
	for key, tok := range toks {
		rel = append(rel, "R "+key+" "+strconv.FormatUint(tok, 10))
	}
	h.send(rel...)
	for range n {
		if line := h.read(); !strings.HasSuffix(line, " OK") {
			t.Fatalf("release: %q", line)
		}
	}
	if keys, ws := e.eng.Counts(); keys != 0 || ws != 0 {
		t.Fatalf("after the releases: %d keys, %d waiters; want none (no grant to a waiter that left)", keys, ws)
	}
}

// TestSameKeyAcquiresWaitTheirTurn: a connection's acquires of one key
// are answered in the order sent; only the first is in the key's queue,
// the others wait on the connection, and each joins the queue when the
// one before it is answered (here: granted, then a wait that runs out).
func TestSameKeyAcquiresWaitTheirTurn(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h := e.dial()
	h.send("A s 60 -")
	tok := grant(t, h.read(), "s")
	w := e.dial()
	w.send("A s 60 -", "A s 60 0.05", "A s 60 -", "A other 60 -")
	grant(t, w.read(), "other") // not held up by the parked ones
	waitFor(t, func() bool { li, _ := e.eng.Status("s"); return li.Waiters == 1 })
	if !w.quiet(20 * time.Millisecond) {
		t.Fatal("an answer to a parked acquire before the release")
	}
	if li, _ := e.eng.Status("s"); li.Waiters != 1 {
		t.Fatalf("%d waiters on s; want 1 (the connection's first acquire)", li.Waiters)
	}
	h.send("R s " + strconv.FormatUint(tok, 10))
	if line := h.read(); line != "R s OK" {
		t.Fatal(line)
	}
	t1 := grant(t, w.read(), "s")
	// The second acquire joins the queue behind the connection's own
	// grant and runs out; the third then queues.
	if line := w.read(); line != "A s T" {
		t.Fatalf("got %q, want A s T", line)
	}
	waitFor(t, func() bool { li, _ := e.eng.Status("s"); return li.Waiters == 1 })
	w.send("R s " + strconv.FormatUint(t1, 10))
	// The release hands on to the third acquire in the same step: the
	// two answers (different ops) come in either order.
	l1, l2 := w.read(), w.read()
	if l1 == "R s OK" {
		l1, l2 = l2, l1
	}
	if l2 != "R s OK" {
		t.Fatalf("got %q and %q, want R s OK among them", l1, l2)
	}
	if t3 := grant(t, l1, "s"); t3 <= t1 {
		t.Fatalf("third grant's token %d is not above %d", t3, t1)
	}
}

// TestPollTimeoutResumesWithID: with poll_timeout, a parked native
// acquire with an id resumes its place at once (no proxy cuts a native
// connection); one without an id is told E poll_timeout.
func TestPollTimeoutResumesWithID(t *testing.T) {
	e := newEnv(t, engine.Config{PollTimeout: 20 * time.Millisecond}, native.Config{})
	h := e.dial()
	h.send("A q 60 -")
	tok := grant(t, h.read(), "q")
	w := e.dial()
	w.send("A q 60 - id=w1")
	// Queued first (on a loaded machine the line may take a while to be
	// read), then several poll timeouts later still queued: resumed, not
	// dropped.
	waitFor(t, func() bool { li, _ := e.eng.Status("q"); return li.Waiters == 1 })
	time.Sleep(100 * time.Millisecond) // several poll timeouts
	if li, _ := e.eng.Status("q"); li.Waiters != 1 {
		t.Fatalf("%d waiters on q; want the resumed one", li.Waiters)
	}
	h.send("R q " + strconv.FormatUint(tok, 10))
	if line := h.read(); line != "R q OK" {
		t.Fatal(line)
	}
	grant(t, w.read(), "q")
	a := e.dial()
	a.send("A q 60 -")
	if line := a.read(); !strings.HasPrefix(line, "A q E poll_timeout ") {
		t.Fatalf("got %q, want E poll_timeout", line)
	}
}

// SPEC section 2b: "same semantics, same errors as §1–2". A parked
// acquire without an id that poll_timeout ends has lost its place (nothing
// could resume it): its E poll_timeout says so, as HTTP's 408 does for a
// request without an Idempotency-Key, instead of "the place in the queue
// is kept".
func TestPollTimeoutWithoutIDSaysThePlaceIsGone(t *testing.T) {
	e := newEnv(t, engine.Config{PollTimeout: 20 * time.Millisecond}, native.Config{})
	h := e.dial()
	h.send("A q 60 -")
	grant(t, h.read(), "q")
	a := e.dial()
	a.send("A q 60 -")
	line := a.read()
	if !strings.HasPrefix(line, "A q E poll_timeout ") || strings.Contains(line, "is kept") || !strings.Contains(line, "not kept") {
		t.Fatalf("got %q, want E poll_timeout saying the place was not kept", line)
	}
	if li, _ := e.eng.Status("q"); li.Waiters != 0 {
		t.Fatalf("%d waiters on q after the poll_timeout of an acquire without an id; want 0", li.Waiters)
	}
}

// switchGate serves until demoted, then names the new active.
type switchGate struct {
	mu      sync.Mutex
	standby bool
}

func (g *switchGate) Serving() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.standby
}
func (g *switchGate) HoldsBack(uint64) bool { return false }
func (g *switchGate) RefusedByPeers() bool  { return false }
func (g *switchGate) ActiveNative() string {
	if g.Serving() {
		return ""
	}
	return "10.0.0.2:7071"
}

// TestParkedAcquireMovedOnDemote: an acquire parked (without a goroutine)
// on an active that hands off is answered M with the new active's
// address; its waiter stays queued for its repeat there.
func TestParkedAcquireMovedOnDemote(t *testing.T) {
	g := &switchGate{}
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	h := e.dial()
	h.send("A d 60 -")
	grant(t, h.read(), "d")
	w := e.dial()
	w.send("A d 60 - id=w1")
	waitFor(t, func() bool { li, _ := e.eng.Status("d"); return li.Waiters == 1 })
	g.mu.Lock()
	g.standby = true
	g.mu.Unlock()
	e.eng.Demote()
	if line := w.read(); line != "A d M 10.0.0.2:7071" {
		t.Fatalf("got %q, want A d M 10.0.0.2:7071", line)
	}
	if li, _ := e.eng.Status("d"); li.Waiters != 1 {
		t.Fatalf("%d waiters after the handoff; want the moved one kept", li.Waiters)
	}
}

// TestGrantsToParkedAcquiresNeverOverflow: a client that pipelines more
// acquires than MaxQueue, all of which park, and reads slowly, gets every
// grant when the holders release at once: the answers to its own parked
// acquires are bounded by what it sent, and never count as unread answers
// past MaxQueue. They closed the connection: its waiters left, and the
// grants that did not fit were handed on to nobody.
func TestGrantsToParkedAcquiresNeverOverflow(t *testing.T) {
	const n = 2000
	e := newEnvOn(t, engine.Config{}, native.Config{MaxQueue: 64}, smallSendBuffers)
	h := e.dial()
	lines := make([]string, n)
	for i := range lines {
		lines[i] = "A parked/" + strconv.Itoa(i) + " 60 -"
	}
	h.send(lines...)
	rel := make([]string, 0, n)
	for range n {
		line := h.read()
		key := strings.Fields(line)[1]
		rel = append(rel, "R "+key+" "+strconv.FormatUint(grant(t, line, key), 10))
	}
	w := e.dial()
	// A slow reader: its socket takes little before the client reads.
	if tc, ok := w.nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(smallBuffer)
	}
	w.send(lines...)
	waitFor(t, func() bool { _, ws := e.eng.Counts(); return ws == n })
	h.send(rel...)
	for range n {
		if line := h.read(); !strings.HasSuffix(line, " OK") {
			t.Fatalf("release: %q", line)
		}
	}
	got := 0
	for range n {
		line, err := w.br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d of %d grants: %v (the connection was closed)", got, n, err)
		}
		key := strings.Fields(line)[1]
		grant(t, strings.TrimSuffix(line, "\n"), key)
		got++
	}
	if keys, _ := e.eng.Counts(); keys != n {
		t.Fatalf("%d keys held, want %d (every grant with the slow reader)", keys, n)
	}
}
