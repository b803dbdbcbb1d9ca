package native_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// awaitGate is a node in a handoff or a failover: it serves until
// demoted, then knows no active until the test names one (name), and its
// AwaitActive waits for that, as cluster.Node's does (bounded there by
// failover_timeout and two heartbeats; here by giveUp).
type awaitGate struct {
	mu      sync.Mutex
	serving bool
	active  string
	changed chan struct{} // closed by name, serve and giveUp
	asked   chan struct{} // closed by the first AwaitActive
	once    sync.Once
}

func newAwaitGate(serving bool) *awaitGate {
	return &awaitGate{serving: serving, changed: make(chan struct{}), asked: make(chan struct{})}
}

func (g *awaitGate) Serving() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.serving
}
func (g *awaitGate) HoldsBack(uint64) bool { return false }
func (g *awaitGate) RefusedByPeers() bool  { return false }
func (g *awaitGate) ActiveNative() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.serving {
		return ""
	}
	return g.active
}

// AwaitActive returns once an active is known (or this node serves), the
// gate gives up, or ctx ends.
func (g *awaitGate) AwaitActive(ctx context.Context) func() {
	g.mu.Lock()
	ch, known := g.changed, g.serving || g.active != ""
	g.mu.Unlock()
	// Asked only once ch is taken: a test that hears of it and gives up
	// (giveUp changes nothing a later look would see) closes this ch,
	// not a new one that nobody closes (the wait then hung the test
	// under load until go test's timeout).
	g.once.Do(func() { close(g.asked) })
	if known {
		return func() {}
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
	return func() {}
}

func (g *awaitGate) set(f func()) {
	g.mu.Lock()
	f()
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func (g *awaitGate) demote()            { g.set(func() { g.serving = false }) }
func (g *awaitGate) serve()             { g.set(func() { g.serving = true }) }
func (g *awaitGate) name(active string) { g.set(func() { g.active = active }) }
func (g *awaitGate) giveUp()            { g.set(func() {}) }

// answerOrAsked reads c's next line in the background and returns it if
// it comes before g is asked to wait for an active; "" once g is asked
// (the line then comes on the returned channel).
func answerOrAsked(t *testing.T, c *client, g *awaitGate) (string, <-chan string) {
	t.Helper()
	lines := make(chan string, 1)
	go func() {
		line, _ := c.br.ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		return line, nil
	case <-g.asked:
		return "", lines
	}
}

// TestParkedAcquireAwaitsTheNewActive: an acquire parked on an active
// that hands off is answered M with the new active's address once the
// handoff has named it, as HTTP's redirect waits for it (handlers' Gate
// ActiveURL), not "E unavailable" at once, which the Go client answered
// with a second's sleep while the new active served (SPEC section 3:
// the time with no active is kept minimal).
func TestParkedAcquireAwaitsTheNewActive(t *testing.T) {
	g := newAwaitGate(true)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	h := e.dial()
	h.send("A d 60 -")
	grant(t, h.read(), "d")
	w := e.dial()
	w.send("A d 60 - id=w1")
	waitFor(t, func() bool { li, _ := e.eng.Status("d"); return li.Waiters == 1 })
	g.demote()
	e.eng.Demote()
	line, later := answerOrAsked(t, w, g)
	if line != "" {
		t.Fatalf("the parked acquire was answered %q during the handoff; want it to wait for the new active", line)
	}
	g.name("10.0.0.2:7071")
	if line := <-later; line != "A d M 10.0.0.2:7071\n" {
		t.Fatalf("got %q, want A d M 10.0.0.2:7071", line)
	}
	if li, _ := e.eng.Status("d"); li.Waiters != 1 {
		t.Fatalf("%d waiters after the handoff; want the moved one kept", li.Waiters)
	}
}

// TestAcquireOnStandbyAwaitsAnActive: an acquire that reaches a node
// that knows no active waits for one (M then), as HTTP's redirect
// does; when none becomes known it is answered E unavailable. The
// connection's other requests are not held up meanwhile, and a second
// acquire of the key is answered after the first.
func TestAcquireOnStandbyAwaitsAnActive(t *testing.T) {
	g := newAwaitGate(false)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	c := e.dial()
	c.send("A s 60 -", "A s 60 - id=two")
	line, later := answerOrAsked(t, c, g)
	if line != "" {
		t.Fatalf("an acquire on a node that knows no active was answered %q at once; want it to wait for one", line)
	}
	c.send("P still-here")
	if line := <-later; line != "P still-here OK\n" {
		t.Fatalf("got %q while an acquire waited for an active, want the ping's answer", line)
	}
	g.name("10.0.0.3:7071")
	for _, want := range []string{"A s M 10.0.0.3:7071", "A s M 10.0.0.3:7071"} {
		if line := c.read(); line != want {
			t.Fatalf("got %q, want %q", line, want)
		}
	}

	g2 := newAwaitGate(false)
	e2 := newEnv(t, engine.Config{}, native.Config{Gate: g2})
	c2 := e2.dial()
	c2.send("A u 60 -")
	line, later = answerOrAsked(t, c2, g2)
	if line != "" {
		t.Fatalf("answered %q at once; want a wait for an active", line)
	}
	g2.giveUp()
	if line := <-later; line != "A u E unavailable no active node is known at the moment; retry\n" {
		t.Fatalf("got %q after the wait found no active, want E unavailable", line)
	}
}

// TestAwaitedAcquireResumesWhenTheRoleComesBack: a handoff that the
// successor refuses gives the role back to this node (cluster's
// finishHandoff): a parked acquire that waited for the new active runs
// here again under its id and keeps its place.
func TestAwaitedAcquireResumesWhenTheRoleComesBack(t *testing.T) {
	g := newAwaitGate(true)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	h := e.dial()
	h.send("A b 60 -")
	tok := grant(t, h.read(), "b")
	w1, w2 := e.dial(), e.dial()
	w1.send("A b 60 - id=first")
	waitFor(t, func() bool { li, _ := e.eng.Status("b"); return li.Waiters == 1 })
	w2.send("A b 60 - id=second")
	waitFor(t, func() bool { li, _ := e.eng.Status("b"); return li.Waiters == 2 })
	g.demote()
	e.eng.Demote()
	line, later := answerOrAsked(t, w1, g)
	if line != "" {
		t.Fatalf("answered %q during the handoff; want a wait", line)
	}
	e.eng.Promote(engine.Handoff)
	g.serve()
	h.send("R b " + strconv.FormatUint(tok, 10))
	if line := h.read(); line != "R b OK" {
		t.Fatalf("release: %q", line)
	}
	first := grant(t, strings.TrimSuffix(<-later, "\n"), "b")
	h.send("R b " + strconv.FormatUint(first, 10))
	if line := h.read(); line != "R b OK" {
		t.Fatalf("release: %q", line)
	}
	if second := grant(t, w2.read(), "b"); second <= first {
		t.Fatalf("second token %d after %d", second, first)
	}
}

// TestCloseAnswersTheAcquiresThatAwaitAnActive: a node that closes (after
// its handoff) first lets the acquires that wait for an active be
// answered: M with the successor named meanwhile, not a closed
// connection.
func TestCloseAnswersTheAcquiresThatAwaitAnActive(t *testing.T) {
	g := newAwaitGate(false)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	c := e.dial()
	c.send("A s 60 -")
	line, later := answerOrAsked(t, c, g)
	if line != "" {
		t.Fatalf("answered %q at once; want a wait for an active", line)
	}
	closed := make(chan struct{})
	go func() {
		_ = e.srv.Close()
		close(closed)
	}()
	// Close has begun once the listener refuses connections.
	waitFor(t, func() bool {
		nc, err := net.Dial("tcp", e.addr)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	g.name("10.0.0.4:7071")
	if line := <-later; line != "A s M 10.0.0.4:7071\n" {
		t.Fatalf("got %q from a closing node, want A s M 10.0.0.4:7071", line)
	}
	<-closed
}

// TestCancelOfAnAcquireThatAwaitsAnActive: "C <key> <id>" withdraws an
// acquire that waits for an active at once (README: the acquire "leaves
// the queue at once ... and is answered A <key> T"), and the
// connection's next acquire of the key takes its turn.
func TestCancelOfAnAcquireThatAwaitsAnActive(t *testing.T) {
	g := newAwaitGate(false)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	c := e.dial()
	c.send("A s 60 - id=x", "A s 60 - id=y")
	line, later := answerOrAsked(t, c, g)
	if line != "" {
		t.Fatalf("answered %q at once; want a wait for an active", line)
	}
	c.send("C s x")
	if line := <-later; line != "A s T\n" {
		t.Fatalf("got %q after C, want A s T at once", line)
	}
	if line := c.read(); line != "C s OK" {
		t.Fatalf("got %q, want C s OK", line)
	}
	g.name("10.0.0.5:7071")
	if line := c.read(); line != "A s M 10.0.0.5:7071" {
		t.Fatalf("the next acquire of the key got %q, want A s M 10.0.0.5:7071", line)
	}
}

// TestCloseAnswersUnavailableWhenNoActiveCame: a node that closes while
// an acquire waits for an active that never comes (its handoff failed:
// no successor took the role) answers it E unavailable before its
// socket closes, as it answered a parked acquire before the wait for an
// active existed: the client is told, not left with a closed connection.
func TestCloseAnswersUnavailableWhenNoActiveCame(t *testing.T) {
	g := newAwaitGate(false)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	c := e.dial()
	c.send("A s 60 -")
	line, later := answerOrAsked(t, c, g)
	if line != "" {
		t.Fatalf("answered %q at once; want a wait for an active", line)
	}
	_ = e.srv.Close()
	if line := <-later; line != "A s E unavailable no active node is known at the moment; retry\n" {
		t.Fatalf("got %q from a node that closed with no active known, want E unavailable", line)
	}
}

// TestMovedAcquireSettledAfterTheRoleCameBackIsServedHere: a handoff
// that the successor refuses at once gives the role back (cluster's
// finishHandoff) before the writers have made the answers of the
// acquires the demotion moved. Such an acquire runs here again under
// its id and keeps its place (ActiveAwaiter: "served here if the role
// came back"), not "E unavailable no active node is known" from the
// active itself.
func TestMovedAcquireSettledAfterTheRoleCameBackIsServedHere(t *testing.T) {
	g := newAwaitGate(true)
	e := newEnv(t, engine.Config{}, native.Config{Gate: g})
	h := e.dial()
	h.send("A q 60 -")
	tok := grant(t, h.read(), "q")
	var ws []*client
	for i := range 4 {
		w := e.dial()
		w.send("A q 60 - id=w" + strconv.Itoa(i))
		waitFor(t, func() bool { li, _ := e.eng.Status("q"); return li.Waiters == i+1 })
		ws = append(ws, w)
	}
	g.demote()
	e.eng.Demote()
	e.eng.Promote(engine.Handoff)
	g.serve()
	for _, w := range ws {
		h.send("R q " + strconv.FormatUint(tok, 10))
		if line := h.read(); line != "R q OK" {
			t.Fatalf("release: %q", line)
		}
		next := grant(t, w.read(), "q")
		if next <= tok {
			t.Fatalf("token %d after %d", next, tok)
		}
		tok = next
	}
}
