package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// fakeNode is a native-protocol peer driven line by line by the test.
type fakeNode struct {
	ln *net.TCPListener
}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &fakeNode{ln: ln.(*net.TCPListener)}
}

func (f *fakeNode) Base() string { return "baton://" + f.ln.Addr().String() }

// accept takes the next connection of the client.
func (f *fakeNode) accept(t *testing.T) *fakeConn {
	t.Helper()
	_ = f.ln.SetDeadline(time.Now().Add(bound))
	nc, err := f.ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &fakeConn{nc: nc, br: bufio.NewReader(nc)}
}

type fakeConn struct {
	nc net.Conn
	br *bufio.Reader
}

// read returns the next request line, without its "\n".
func (c *fakeConn) read(t *testing.T) string {
	t.Helper()
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(bound))
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !answerPing(c.nc, line) {
			return strings.TrimSuffix(line, "\n")
		}
	}
}

// answerPing answers line as a node does when it is a ping ("P <word>",
// the client's liveness check), and reports whether it was one: the
// fakes answer pings without the test seeing them. A cancel ("C <key>
// <id>", sent by a client whose acquire's ctx ended) is answered "C
// <key> OK" and nothing else, as by a node that had answered the
// acquire already: the tests of the fakes script what the acquire gets.
func answerPing(nc net.Conn, line string) bool {
	line = strings.TrimSuffix(line, "\n")
	if word, ok := strings.CutPrefix(line, "P "); ok {
		_, _ = nc.Write([]byte("P " + word + " OK\n"))
		return true
	}
	if rest, ok := strings.CutPrefix(line, "C "); ok {
		key, _, _ := strings.Cut(rest, " ")
		_, _ = nc.Write([]byte("C " + key + " OK\n"))
		return true
	}
	return false
}

// send writes answer lines, in one write.
func (c *fakeConn) send(t *testing.T, lines ...string) {
	t.Helper()
	if _, err := c.nc.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func grantLine(key string, token uint64) string {
	return fmt.Sprintf("A %s OK %d 30 %d", key, token, time.Now().Add(30*time.Second).UnixMilli())
}

// Requests are pipelined on one connection: every line goes out before
// any answer comes; answers in any order reach their callers, matched by
// (op, key), and in order for the same (op, key). An acquire of a key
// that has one waiting on every connection goes out on a connection of
// its own (a node serves a connection's acquires of a key in turn).
func TestNativePipelinedOutOfOrder(t *testing.T) {
	f := newFakeNode(t)
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1 }, f.Base())
	ctx := t.Context() // no deadline: the lines checked name no wait (ctxWait)
	fc := f.accept(t)
	a1 := acquireAsync(ctx, c, "a")
	if l := fc.read(t); !strings.HasPrefix(l, "A a - - id=") {
		t.Fatalf("first line %q", l)
	}
	b := acquireAsync(ctx, c, "b", api.WithWait(time.Second))
	if l := fc.read(t); !strings.HasPrefix(l, "A b - 1 id=") {
		t.Fatalf("second line %q", l)
	}
	a2 := acquireAsync(ctx, c, "a")
	solo := f.accept(t)
	if l := solo.read(t); !strings.HasPrefix(l, "A a - - id=") {
		t.Fatalf("line on a connection of its own %q", l)
	}
	rel, rel2 := make(chan error, 1), make(chan error, 1)
	go func() { rel <- c.Release(ctx, "c d", 9) }()
	if l := fc.read(t); l != "R c%20d 9" {
		t.Fatalf("third line %q", l)
	}
	go func() { rel2 <- c.Release(ctx, "c d", 10) }()
	if l := fc.read(t); l != "R c%20d 10" {
		t.Fatalf("fourth line %q", l)
	}
	solo.send(t, grantLine("a", 8))
	fc.send(t, "R c%20d OK", "R c%20d E not_held nobody holds it", "A b T", grantLine("a", 7))
	if err := <-rel; err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := <-rel2; !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("second release of the key: %v, want ErrNotHeld", err)
	}
	if r := <-b; !errors.Is(r.err, api.ErrTimeout) {
		t.Fatalf("acquire b: %v, want ErrTimeout", r.err)
	}
	if l := get(t, a1); l.Token != 7 || l.Key != "a" {
		t.Fatalf("first acquire of a: %+v", l)
	}
	if l := get(t, a2); l.Token != 8 {
		t.Fatalf("second acquire of a: %+v", l)
	}
}

// A release is repeated every ReleaseRetry until a node confirms it; a
// not_held (or not_holder) ends it without a repeat.
func TestNativeReleaseRetried(t *testing.T) {
	f := newFakeNode(t)
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1 }, f.Base())
	ctx := ctxBound(t)
	fc := f.accept(t)
	rel := make(chan error, 1)
	go func() { rel <- c.Release(ctx, "k", 5) }()
	for range 2 {
		if l := fc.read(t); l != "R k 5" {
			t.Fatalf("release line %q", l)
		}
		fc.send(t, "R k E unavailable the node cannot write its log; retry")
	}
	if l := fc.read(t); l != "R k 5" {
		t.Fatalf("release line %q", l)
	}
	fc.send(t, "R k OK")
	if err := <-rel; err != nil {
		t.Fatalf("release: %v", err)
	}
	go func() { rel <- c.Release(ctx, "j", 5) }()
	if l := fc.read(t); l != "R j 5" {
		t.Fatalf("release line %q", l)
	}
	fc.send(t, "R j E not_held nobody holds the lock")
	if err := <-rel; !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("release of a lock nobody holds: %v", err)
	}
	go func() { rel <- c.Release(ctx, "z", 6) }()
	if l := fc.read(t); l != "R z 6" {
		t.Fatalf("a not_held release was repeated: next line %q", l)
	}
	fc.send(t, "R z OK")
	if err := <-rel; err != nil {
		t.Fatal(err)
	}
	// An attempt answered unavailable may have been made (a node whose
	// log took the release but could not write it): a not_held after it
	// means the release is done.
	go func() { rel <- c.Release(ctx, "u", 7) }()
	for _, answer := range []string{"R u E unavailable the node made the change but cannot write it to its log", "R u E not_held nobody holds the lock"} {
		if l := fc.read(t); l != "R u 7" {
			t.Fatalf("release line %q", l)
		}
		fc.send(t, answer)
	}
	if err := <-rel; err != nil {
		t.Fatalf("release answered unavailable, then not_held: %v; want nil", err)
	}
}

// A release attempt that gets no answer within its bound (a second) is
// given up and repeated; the late answer to the attempt given up is
// matched to it, in order, and dropped (not to the repeat, and without
// ending the connection), and the repeat's own answer decides.
func TestNativeReleaseAttemptBound(t *testing.T) {
	f := newFakeNode(t)
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1; c.ReleaseRetry = 10 * time.Millisecond }, f.Base())
	ctx := ctxBound(t)
	fc := f.accept(t)
	rel := make(chan error, 1)
	go func() { rel <- c.Release(ctx, "k", 5) }()
	for range 2 {
		if l := fc.read(t); l != "R k 5" {
			t.Fatalf("release line %q", l)
		}
	}
	// The first answer is the silent attempt's: were it taken as the
	// repeat's, not_holder after an unanswered attempt would be success.
	fc.send(t, "R k E not_holder held under another token", "R k E invalid_argument token: refused here")
	if err := <-rel; !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("release: %v, want the repeat's own answer (invalid_argument)", err)
	}
	go func() { rel <- c.Release(ctx, "k", 6) }()
	if l := fc.read(t); l != "R k 6" {
		t.Fatalf("release line %q", l)
	}
	fc.send(t, "R k OK")
	if err := <-rel; err != nil {
		t.Fatalf("release on the same connection: %v", err)
	}
}

// recordingDialer keeps every connection the client dials and what the
// client wrote on it.
type recordingDialer struct {
	mu       sync.Mutex
	conns    []*recConn
	noCancel bool // the connections drop cancel lines (recConn)
}

type recConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
	// noCancel drops the client's cancel lines ("C ..."): a node that
	// does not know the op, as far as the client's acquires go.
	noCancel bool
}

func (c *recConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(b)
	c.mu.Unlock()
	if c.noCancel {
		var kept []byte
		for l := range bytes.Lines(b) {
			if !bytes.HasPrefix(l, []byte("C ")) {
				kept = append(kept, l...)
			}
		}
		if _, err := c.Conn.Write(kept); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *recConn) written() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (d *recordingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: nc, noCancel: d.noCancel}
	d.mu.Lock()
	d.conns = append(d.conns, rc)
	d.mu.Unlock()
	return rc, nil
}

// carrying returns the connections whose client wrote s.
func (d *recordingDialer) carrying(s string) []*recConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*recConn
	for _, c := range d.conns {
		if strings.Contains(c.written(), s) {
			out = append(out, c)
		}
	}
	return out
}

var idRE = regexp.MustCompile(`A k - - id=(\S+)`)

// When the connection of a waiting acquire breaks, the acquire moves to
// the next connection with the same id, and is granted there.
func TestNativeAcquireMovesOnWithSameID(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	ctx := t.Context() // no deadline: the lines checked name no wait (ctxWait)
	holder, err := hc.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var d recordingDialer
	c := newClient(t, func(c *api.Config) { c.DialContext = d.dial }, srv.Base("native"))
	res := acquireAsync(ctx, c, "k")
	waitWaiters(t, hc, "k", 1)
	first := d.carrying("A k ")
	if len(first) != 1 {
		t.Fatalf("%d connections carried the acquire, want 1", len(first))
	}
	first[0].Conn.Close() // the connection breaks under the waiting acquire
	eventually(t, "the acquire repeated on the other connection", func() bool { return len(d.carrying("A k ")) == 2 })
	waitWaiters(t, hc, "k", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := get(t, res)
	heldOnce(t, hc, "k", l.Token)
	var ids []string
	for _, rc := range d.carrying("A k ") {
		m := idRE.FindStringSubmatch(rc.written())
		if m == nil {
			t.Fatalf("no id in %q", rc.written())
		}
		ids = append(ids, m[1])
	}
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Fatalf("ids %v: want the same id on both connections", ids)
	}
}

// A standby's M answer is followed: the client then talks to the active
// directly, even once the standby is gone.
func TestNativeMovedFollowed(t *testing.T) {
	active := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, active.URL)
	seng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer seng.Close()
	standby := native.New(seng, native.Config{Gate: standbyGate(active.Native)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = standby.Serve(ln)
	}()
	stopStandby := sync.OnceFunc(func() { standby.Close(); <-done })
	defer stopStandby()

	c := newClient(t, nil, "baton://"+ln.Addr().String())
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if l.Node != active.Base("native") {
		t.Fatalf("granted by %q, want the active %q", l.Node, active.Base("native"))
	}
	heldOnce(t, hc, "k", l.Token)
	if li, _ := seng.Status("k"); li.Holder != nil {
		t.Fatal("the standby granted")
	}
	stopStandby()
	if err := l.Renew(ctx, 0); err != nil {
		t.Fatalf("renew after the standby went: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release after the standby went: %v", err)
	}
	l, err = c.Acquire(ctx, "k2")
	if err != nil {
		t.Fatalf("acquire after the standby went: %v", err)
	}
	heldOnce(t, hc, "k2", l.Token)
}

type standbyGate string

func (g standbyGate) Serving() bool         { return false }
func (g standbyGate) HoldsBack(uint64) bool { return false }
func (g standbyGate) RefusedByPeers() bool  { return false }
func (g standbyGate) ActiveNative() string  { return string(g) }

// Renewals and releases on a connection are answered while acquires wait
// on it: nothing waits behind a parked request.
func TestNativeRenewNotStarved(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1 }, srv.Base("native"))
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "mine", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var held []*api.Lock
	var parked []<-chan result
	for i := range n {
		key := fmt.Sprintf("p%d", i)
		h, err := hc.Acquire(ctx, key, api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
		parked = append(parked, acquireAsync(ctx, c, key))
	}
	for i := range n {
		waitWaiters(t, hc, fmt.Sprintf("p%d", i), 1)
	}
	for range 10 {
		if err := l.Renew(ctx, 0); err != nil {
			t.Fatalf("renew while %d acquires wait: %v", n, err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release while %d acquires wait: %v", n, err)
	}
	for i := range n {
		if st := status(t, hc, fmt.Sprintf("p%d", i)); st.Waiters != 1 {
			t.Fatalf("p%d: %d waiters, want its acquire still waiting", i, st.Waiters)
		}
	}
	for i, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := get(t, parked[i]).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The native protocol has no read calls: they fail with an error that Is
// errors.ErrUnsupported. Addresses: a port is needed, protocols do not mix.
func TestNativeUnsupportedAndAddresses(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	c := newClient(t, nil, srv.Base("native"))
	ctx := ctxBound(t)
	if _, err := c.Status(ctx, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Status: %v", err)
	}
	if _, err := c.List(ctx, "", 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("List: %v", err)
	}
	if _, err := c.Cluster(ctx); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "baton://") {
		t.Fatalf("Cluster: %v", err)
	}
	for _, addrs := range [][]string{
		{"baton://127.0.0.1"},
		{"baton://127.0.0.1:1/path"},
		{"baton://127.0.0.1:1", "http://127.0.0.1:2"},
		{"http://127.0.0.1:2", "batons://127.0.0.1:1"},
	} {
		if _, err := api.NewClient(api.Config{Addresses: addrs}); err == nil {
			t.Errorf("NewClient(%q) accepted", addrs)
		}
	}
	cl, err := api.NewClient(api.Config{Addresses: []string{"baton://127.0.0.1:1", "batons://127.0.0.1:2"}})
	if err != nil {
		t.Fatalf("two native addresses: %v", err)
	}
	cl.Close()
}

// A node restarted on the same port is redialled (every 3 s) and serves
// the client again.
func TestNativeReconnect(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	c := newClient(t, nil, srv.Base("native"))
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	var l2 *api.Lock
	eventually(t, "served again after the restart", func() bool {
		l2, err = c.Acquire(ctx, "other")
		return err == nil
	})
	if l2.Token <= l.Token {
		t.Fatalf("token %d after the restart, not above %d", l2.Token, l.Token)
	}
}

// batons:// addresses: TLS with the Config's TLSConfig.
func TestNativeTLS(t *testing.T) {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	eng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := native.New(eng, native.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: ts.TLS.Certificates}))
	}()
	defer func() { srv.Close(); <-done }()
	tlsCfg := ts.Client().Transport.(*http.Transport).TLSClientConfig
	c := newClient(t, func(c *api.Config) { c.TLSConfig = tlsCfg }, "batons://"+ln.Addr().String())
	ctx := ctxBound(t)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Without the test CA the handshake fails: no connection.
	bad := newClient(t, func(c *api.Config) { c.ReconnectInterval = time.Hour }, "batons://"+ln.Addr().String())
	if _, err := bad.Acquire(ctx, "k"); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("acquire without the CA: %v", err)
	}
}

// A cancelled acquire leaves its request on the node; when its
// connection then breaks before an answer, the client asks again under
// the same id (with a 1 ms wait) on another connection (and would release
// what that repeat is granted): nothing stays held or queued by nobody.
func TestNativeCancelledThenBroken(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	holder, err := hc.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// A node that does not know the cancel op (the lines are dropped):
	// the waiter stays queued.
	d := recordingDialer{noCancel: true}
	c := newClient(t, func(c *api.Config) { c.DialContext = d.dial }, srv.Base("native"))
	// No deadline: an acquire without a wait (a deadline would be sent
	// as its wait).
	actx, cancel := context.WithCancel(t.Context())
	res := acquireAsync(actx, c, "k")
	waitWaiters(t, hc, "k", 1)
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", r.err)
	}
	waitWaiters(t, hc, "k", 1) // still queued: no cancel reached the node
	first := d.carrying("A k ")
	if len(first) != 1 {
		t.Fatalf("%d connections carried the acquire, want 1", len(first))
	}
	m := idRE.FindStringSubmatch(first[0].written())
	if m == nil {
		t.Fatalf("no id in %q", first[0].written())
	}
	first[0].Conn.Close()
	eventually(t, "asked again under the same id", func() bool {
		return len(d.carrying("A k - 0.001 id="+m[1])) == 1
	})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "free", func() bool {
		st := status(t, hc, "k")
		return st.Holder == nil && st.Waiters == 0
	})
}

// BenchmarkNativeCycle is one acquire+release of a free key per
// iteration through the client, against an in-process node (client and
// node share the CPU: use it for profiles, not for figures).
func BenchmarkNativeCycle(b *testing.B) {
	srv := startBoth(b, engine.Config{}, handlers.Config{}, native.Config{})
	c := newClient(b, nil, srv.Base("native"))
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("bench/%d", n.Add(1))
		for pb.Next() {
			l, err := c.Acquire(ctx, key, api.WithLease(time.Minute))
			if err != nil {
				b.Error(err)
				return
			}
			if err := c.Release(ctx, key, l.Token); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// An acquire that followed an M to the active, whose connection to it then
// breaks (the active was killed: a failover), is repeated on the other
// connection with the same id at once, not a second time on the broken
// one before the client has noticed it broke (which failed the acquire
// with "2 attempts failed" within a millisecond of the kill).
func TestNativeAcquireAfterMovedActiveDies(t *testing.T) {
	f1, f2 := newFakeNode(t), newFakeNode(t)
	c := newClient(t, nil, f1.Base(), f2.Base())
	ctx := t.Context() // no deadline: the lines checked name no wait (ctxWait)
	conns := []*fakeConn{f1.accept(t), f2.accept(t)}
	lines, next := requestLines(t, conns)
	res := acquireAsync(ctx, c, "k")
	first := next()
	m := idRE.FindStringSubmatch(first.line)
	if !strings.HasPrefix(first.line, "A k ") || m == nil {
		t.Fatalf("first line %q", first.line)
	}
	x, y := first.node, 1-first.node
	fakes := []*fakeNode{f1, f2}
	conns[x].send(t, "A k M "+fakes[y].ln.Addr().String())
	moved := next()
	if moved.node != y || moved.line != first.line {
		t.Fatalf("after M: node %d got %q, want node %d to get %q", moved.node, moved.line, y, first.line)
	}
	fakes[y].ln.Close() // the active dies under the acquire
	conns[y].nc.Close()
	var again nodeLine
	select {
	case again = <-lines:
	case r := <-res:
		t.Fatalf("the acquire ended (%v, %v) instead of moving on to node %d", r.l, r.err, x)
	case <-time.After(bound):
		t.Fatal("the acquire was not repeated")
	}
	if again.node != x || again.line != first.line {
		t.Fatalf("after the active died: node %d got %q, want node %d to get %q", again.node, again.line, x, first.line)
	}
	conns[x].send(t, grantLine("k", 7))
	if l := get(t, res); l.Token != 7 {
		t.Fatalf("token %d, want 7", l.Token)
	}
}

// Over the native protocol too, an acquire goes on while the node answers
// E unavailable (a failover), beyond the attempts a broken connection
// counts (one connection here), until it is granted.
func TestNativeAcquireWaitsOutAFailover(t *testing.T) {
	f := newFakeNode(t)
	c := newClient(t, func(c *api.Config) { c.ConnsPerAddress = 1 }, f.Base())
	ctx := t.Context() // no deadline: the lines checked name no wait (ctxWait)
	fc := f.accept(t)
	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "k")
		if err == nil && l.Token != 7 {
			err = fmt.Errorf("token %d, want 7", l.Token)
		}
		got <- err
	}()
	for range 3 {
		if l := fc.read(t); !strings.HasPrefix(l, "A k - - id=") {
			t.Fatalf("acquire line %q", l)
		}
		fc.send(t, "A k E unavailable no active node is known at the moment; retry")
	}
	if l := fc.read(t); !strings.HasPrefix(l, "A k - - id=") {
		t.Fatalf("acquire line %q", l)
	}
	fc.send(t, grantLine("k", 7))
	if err := <-got; err != nil {
		t.Fatalf("acquire after 3 answers of E unavailable: %v", err)
	}
}

// lineNode is a fakeNode whose connections are accepted and read in the
// background: next returns the next request line of any of them, with
// the connection's number (1 for the first accepted).
type lineNode struct {
	*fakeNode
	lines  chan numberedLine
	conns  chan *fakeConn
	byConn map[int]*fakeConn // the test's goroutine only
}

type numberedLine struct {
	conn int
	text string
}

func newLineNode(t *testing.T) *lineNode {
	f := &lineNode{fakeNode: newFakeNode(t), lines: make(chan numberedLine, 16),
		conns: make(chan *fakeConn, 16), byConn: map[int]*fakeConn{}}
	go func() {
		for i := 1; ; i++ {
			nc, err := f.ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
			fc := &fakeConn{nc: nc, br: bufio.NewReader(nc)}
			f.conns <- fc
			go func() {
				for {
					l, err := fc.br.ReadString('\n')
					if err != nil {
						return
					}
					if answerPing(fc.nc, l) {
						continue
					}
					f.lines <- numberedLine{i, strings.TrimSuffix(l, "\n")}
				}
			}()
		}
	}()
	return f
}

func (f *lineNode) next(t *testing.T) numberedLine {
	t.Helper()
	select {
	case l := <-f.lines:
		for len(f.conns) > 0 {
			f.byConn[len(f.byConn)+1] = <-f.conns
		}
		return l
	case <-time.After(bound):
		t.Fatal("no request line")
	}
	return numberedLine{}
}

// upOnTwo returns once c has sent requests on two connections of f (both
// are up): releases of a probe key, answered not_held.
func (f *lineNode) upOnTwo(t *testing.T, c *api.Client) {
	t.Helper()
	seen := map[int]bool{}
	for len(seen) < 2 {
		done := make(chan error, 1)
		go func() { done <- c.Release(t.Context(), "probe", 1) }()
		l := f.next(t)
		if l.text != "R probe 1" {
			t.Fatalf("probe: %q", l.text)
		}
		seen[l.conn] = true
		f.byConn[l.conn].send(t, "R probe E not_held nobody holds the lock")
		if err := <-done; !errors.Is(err, api.ErrNotHeld) {
			t.Fatalf("probe: %v", err)
		}
	}
}

// An acquire repeated after its connection broke does not go behind
// another acquire of the same key waiting on the client's other
// connection: a node serves a connection's acquires of one key one after
// the other, and the repeat's id may already hold the grant (or a place)
// the other acquire waits for, which the repeat would then get only
// after its lease ran out. With every live connection so taken, the
// repeat goes out on a connection of its own.
func TestNativeRepeatNotBehindSameKey(t *testing.T) {
	f := newLineNode(t)
	c := newClient(t, func(c *api.Config) { c.ReconnectInterval = time.Hour }, f.Base())
	ctx := ctxBound(t)
	f.upOnTwo(t, c)
	x := acquireAsync(ctx, c, "k")
	lx := f.next(t)
	y := acquireAsync(ctx, c, "k")
	ly := f.next(t)
	if lx.conn == ly.conn {
		t.Fatalf("both acquires on connection %d", lx.conn)
	}
	f.byConn[lx.conn].nc.Close() // X's connection breaks, X's grant unheard
	lr := f.next(t)
	if lr.text != lx.text {
		t.Fatalf("repeat %q, want %q", lr.text, lx.text)
	}
	if lr.conn == ly.conn {
		t.Fatalf("the repeat went out behind the waiting acquire of the same key on connection %d", ly.conn)
	}
	f.byConn[lr.conn].send(t, grantLine("k", 7))
	if l := get(t, x); l.Token != 7 {
		t.Fatalf("repeated acquire: token %d, want 7", l.Token)
	}
	f.byConn[ly.conn].send(t, grantLine("k", 8))
	if l := get(t, y); l.Token != 8 {
		t.Fatalf("other acquire: token %d, want 8", l.Token)
	}
}

// The same for the repeat (wait 1 ms) that settles an acquire given up
// by its caller whose connection then broke: it must find, and release,
// a grant that the other acquire of the key may be waiting for.
func TestNativeSettleNotBehindSameKey(t *testing.T) {
	f := newLineNode(t)
	c := newClient(t, func(c *api.Config) { c.ReconnectInterval = time.Hour }, f.Base())
	ctx := t.Context() // no deadline: the lines checked name no wait (ctxWait)
	f.upOnTwo(t, c)
	xctx, cancel := context.WithCancel(ctx)
	x := acquireAsync(xctx, c, "k")
	lx := f.next(t)
	y := acquireAsync(ctx, c, "k")
	ly := f.next(t)
	if lx.conn == ly.conn {
		t.Fatalf("both acquires on connection %d", lx.conn)
	}
	cancel()
	if r := <-x; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", r.err)
	}
	f.byConn[lx.conn].nc.Close()
	lr := f.next(t)
	if want := strings.Replace(lx.text, "A k - - ", "A k - 0.001 ", 1); lr.text != want {
		t.Fatalf("settling repeat %q, want %q", lr.text, want)
	}
	if lr.conn == ly.conn {
		t.Fatalf("the settling repeat went out behind the waiting acquire of the same key on connection %d", ly.conn)
	}
	f.byConn[lr.conn].send(t, grantLine("k", 7))
	if l := f.next(t); l.text != "R k 7" {
		t.Fatalf("after the settling grant: %q, want the release R k 7", l.text)
	} else {
		f.byConn[l.conn].send(t, "R k OK")
	}
	f.byConn[ly.conn].send(t, grantLine("k", 8))
	if l := get(t, y); l.Token != 8 {
		t.Fatalf("other acquire: token %d, want 8", l.Token)
	}
}

// An acquire whose attempt a silent node left unanswered (stopped, its
// socket open) and whose next attempt another node answered T (its wait
// ran out) releases the grant the silent node makes late for that
// attempt: the caller holds nothing under the acquire's id. In
// TestHistoryChaosTimeouts (CHAOS_NODES=5 CHAOS_SEED=2607) a node stopped
// with such acquires in its socket granted them as it resumed, won the
// split brain, and three grants that no client held kept their keys for
// their 12 s lease.
func TestNativeLateGrantOfAGivenUpAcquireReleased(t *testing.T) {
	f1, f2 := newFakeNode(t), newFakeNode(t)
	c := newClient(t, func(c *api.Config) { c.AcquireGrace = 100 * time.Millisecond }, f1.Base(), f2.Base())
	conns := []*fakeConn{f1.accept(t), f2.accept(t)}
	_, next := requestLines(t, conns)
	res := make(chan error, 1)
	go func() {
		_, err := c.Acquire(t.Context(), "k", api.WithWait(100*time.Millisecond))
		res <- err
	}()
	first := next()
	if !strings.HasPrefix(first.line, "A k ") {
		t.Fatalf("first line %q", first.line)
	}
	silent, other := first.node, 1-first.node
	// The silent node says nothing past the attempt's limit (its wait +
	// AcquireGrace): the acquire asks the other node under the same id.
	again := next()
	if again.node != other || !strings.HasPrefix(again.line, "A k ") {
		t.Fatalf("after the silent attempt: node %d got %q, want node %d to get the acquire", again.node, again.line, other)
	}
	conns[other].send(t, "A k T")
	if err := <-res; !errors.Is(err, api.ErrTimeout) {
		t.Fatalf("acquire: %v, want ErrTimeout", err)
	}
	// The silent node resumes and grants the first attempt.
	conns[silent].send(t, grantLine("k", 77))
	rel := next()
	if rel.line != "R k 77" {
		t.Fatalf("node %d got %q after the late grant, want its release R k 77", rel.node, rel.line)
	}
	conns[rel.node].send(t, "R k OK")
}

// nodeLine is a request line a fake node read, with the node's index.
type nodeLine struct {
	node int
	line string
}

// requestLines reads the request lines of conns (one fake node each) as
// they come, into the channel it returns; the function it returns gives
// the next one, from whichever node, or fails the test after bound.
func requestLines(t *testing.T, conns []*fakeConn) (<-chan nodeLine, func() nodeLine) {
	lines := make(chan nodeLine, 8)
	for i, fc := range conns {
		go func() {
			for {
				l, err := fc.br.ReadString('\n')
				if err != nil {
					return
				}
				if answerPing(fc.nc, l) {
					continue
				}
				lines <- nodeLine{i, strings.TrimSuffix(l, "\n")}
			}
		}()
	}
	return lines, func() nodeLine {
		t.Helper()
		select {
		case g := <-lines:
			return g
		case <-time.After(bound):
			t.Fatal("no request line")
		}
		return nodeLine{}
	}
}
