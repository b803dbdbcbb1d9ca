package native_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is one real engine behind a real native server on 127.0.0.1.
type env struct {
	t    testing.TB
	eng  *engine.Engine
	srv  *native.Server
	addr string
}

func newEnv(t testing.TB, cfg engine.Config, ncfg native.Config) *env {
	t.Helper()
	return newEnvOn(t, cfg, ncfg, nil)
}

// newEnvOn is newEnv with the server's listener wrapped by wrap (when not
// nil).
func newEnvOn(t testing.TB, cfg engine.Config, ncfg native.Config, wrap func(net.Listener) net.Listener) *env {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	srv := native.New(eng, ncfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != native.ErrServerClosed {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		_ = eng.Close()
	})
	return &env{t: t, eng: eng, srv: srv, addr: ln.Addr().String()}
}

// client is one raw connection: it writes lines and reads answer lines.
type client struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func (e *env) dial() *client {
	e.t.Helper()
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { nc.Close() })
	return &client{t: e.t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes the lines, each ended by "\n", in one write.
func (c *client) send(lines ...string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// patience bounds every wait in these tests for something that must
// happen (an answer, a close, a state): it only turns a hang into a
// failure, so it is far above what a loaded 2-core CI machine under the
// race detector needs.
const patience = 20 * time.Second

// read returns the next answer line, without "\n"; it fails the test
// after patience.
func (c *client) read() string {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(patience))
	line, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// closed reports whether the server closed the connection (EOF or reset)
// within patience, reading and discarding anything before it.
func (c *client) closed() bool {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(patience))
	for {
		if _, err := c.br.ReadString('\n'); err != nil {
			var ne net.Error
			return !(asNetErr(err, &ne) && ne.Timeout())
		}
	}
}

func asNetErr(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok
}

// quiet reports that no line arrives within d.
func (c *client) quiet(d time.Duration) bool {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	line, err := c.br.ReadString('\n')
	if err == nil {
		c.t.Errorf("unexpected answer %q", line)
		return false
	}
	// The deadline may have cut a partial line: the bufio.Reader keeps it.
	return line == ""
}

// grant checks that line is "A <key> OK <token> <lease> <ms>" and returns
// the token.
func grant(t testing.TB, line, key string) uint64 {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "A" || f[1] != key || f[2] != "OK" {
		t.Fatalf("got %q, want a grant of %s", line, key)
	}
	tok, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil || tok == 0 {
		t.Fatalf("bad token in %q", line)
	}
	ms, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil || ms < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("bad expiry in %q", line)
	}
	return tok
}

func TestGrantReleaseRenew(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	c := e.dial()
	c.send("A k1 10 -")
	tok := grant(t, c.read(), "k1")
	if line := c.read2("N k1 "+strconv.FormatUint(tok, 10)+" 20", c); !strings.HasPrefix(line, "N k1 OK "+strconv.FormatUint(tok, 10)+" 20 ") {
		t.Fatalf("renew: %q", line)
	}
	c.send("R k1 " + strconv.FormatUint(tok+1, 10))
	if line := c.read(); line != "R k1 E not_holder the lock is held under another token" {
		t.Fatalf("release by the wrong token: %q", line)
	}
	c.send("R k1 " + strconv.FormatUint(tok, 10))
	if line := c.read(); line != "R k1 OK" {
		t.Fatalf("release: %q", line)
	}
	c.send("R k1 " + strconv.FormatUint(tok, 10))
	if line := c.read(); line != "R k1 E not_held nobody holds the lock" {
		t.Fatalf("second release: %q", line)
	}
	c.send("A k1 - -")
	if tok2 := grant(t, c.read(), "k1"); tok2 <= tok {
		t.Fatalf("token %d after %d: tokens must rise", tok2, tok)
	}
}

// read2 sends line and reads one answer.
func (c *client) read2(line string, _ *client) string {
	c.t.Helper()
	c.send(line)
	return c.read()
}

func TestWaitRunsOut(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	a, b := e.dial(), e.dial()
	a.send("A k 10 -")
	grant(t, a.read(), "k")
	b.send("A k 10 0.2")
	if line := b.read(); line != "A k T" {
		t.Fatalf("got %q, want A k T", line)
	}
	if li, _ := e.eng.Status("k"); li.Waiters != 0 {
		t.Fatalf("%d waiters after the timeout", li.Waiters)
	}
}

func TestFIFOHandoff(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	holder := e.dial()
	holder.send("A q 10 -")
	tok := grant(t, holder.read(), "q")
	const n = 8
	waiters := make([]*client, n)
	for i := range waiters {
		waiters[i] = e.dial()
		waiters[i].send("A q 10 -")
		waitFor(t, func() bool { li, _ := e.eng.Status("q"); return li.Waiters == i+1 })
	}
	for i, w := range waiters {
		holder.send("R q " + strconv.FormatUint(tok, 10))
		if line := holder.read(); line != "R q OK" {
			t.Fatalf("release: %q", line)
		}
		next := grant(t, w.read(), "q")
		if next <= tok {
			t.Fatalf("waiter %d: token %d after %d", i, next, tok)
		}
		for _, later := range waiters[i+1:] {
			if !later.quiet(5 * time.Millisecond) {
				t.Fatalf("a later waiter was answered before waiter %d", i)
			}
		}
		holder, tok = w, next
	}
}

func TestLeaseExpiryHandsOver(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	a, b := e.dial(), e.dial()
	a.send("A x 0.2 -")
	tok := grant(t, a.read(), "x")
	b.send("A x 10 5")
	if next := grant(t, b.read(), "x"); next <= tok {
		t.Fatalf("token %d after %d", next, tok)
	}
	a.send("N x " + strconv.FormatUint(tok, 10) + " -")
	if line := a.read(); line != "N x E not_holder the lock is held under another token" {
		t.Fatalf("renew after expiry: %q", line)
	}
}

func TestIdempotentRepeat(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	a, b := e.dial(), e.dial()
	a.send("A i 10 - id=job-1")
	tok := grant(t, a.read(), "i")
	// The same id while the grant stands: the same grant, even from
	// another connection.
	b.send("A i 10 - id=job-1")
	if again := grant(t, b.read(), "i"); again != tok {
		t.Fatalf("repeat got token %d, want %d", again, tok)
	}
	// The same id with another mode, limit, lease or owner is not a
	// repeat: refused naming the option, the grant unchanged.
	for _, c := range []struct{ line, field string }{
		{"A i 10 - id=job-1 mode=shared", "mode"},
		{"A i 10 - id=job-1 limit=3", "limit"},
		{"A i 11 - id=job-1", "lease"},
		{"A i 10 - id=job-1 owner=job-2", "owner"},
	} {
		b.send(c.line)
		if line := b.read(); !strings.HasPrefix(line, "A i E idempotency_key_reused "+c.field+": ") {
			t.Fatalf("%q: %q, want E idempotency_key_reused naming %s", c.line, line, c.field)
		}
	}
	if li, _ := e.eng.Status("i"); li.Holder == nil || li.Holder.Token != tok || li.Holder.Mode != engine.Exclusive || len(li.Holders) != 1 || li.Waiters != 0 {
		t.Fatalf("after the refused requests: %+v", li)
	}
	b.send("A i 10 5 id=job-1") // another wait: a repeat
	if again := grant(t, b.read(), "i"); again != tok {
		t.Fatalf("repeat with another wait got token %d, want %d", again, tok)
	}
	// A waiter's repeat takes over its place: the first is superseded.
	c1, c2 := e.dial(), e.dial()
	c1.send("A i 10 - id=w%2D2")
	waitFor(t, func() bool { li, _ := e.eng.Status("i"); return li.Waiters == 1 })
	c2.send("A i 10 - id=w-2")
	if line := c1.read(); line != "A i E superseded a repeat of this request with the same Idempotency-Key took over its place" {
		t.Fatalf("first of the repeated waiter: %q", line)
	}
	a.send("R i " + strconv.FormatUint(tok, 10))
	if line := a.read(); line != "R i OK" {
		t.Fatal(line)
	}
	grant(t, c2.read(), "i")
	// After a timeout, the repeat gets T at once.
	d := e.dial()
	d.send("A i 10 0.05 id=late")
	if line := d.read(); line != "A i T" {
		t.Fatal(line)
	}
	d.send("A i 10 10 id=late")
	if line := d.read(); line != "A i T" {
		t.Fatalf("repeat after T: %q", line)
	}
}

// TestPipelinedOutOfOrder: a parked acquire does not hold up the requests
// behind it on its connection, and same-(op,key) requests are answered
// in the order sent.
func TestPipelinedOutOfOrder(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	other := e.dial()
	other.send("A busy 10 -")
	otok := grant(t, other.read(), "busy")

	c := e.dial()
	c.send("A busy 10 -", "A free 10 -", "A busy 10 0.01", "A free%20two 10 -")
	// The two free keys are granted at once, in either order.
	got := map[string]bool{}
	for range 2 {
		line := c.read()
		k := strings.Fields(line)[1]
		grant(t, line, k)
		got[k] = true
	}
	if !got["free"] || !got["free%20two"] {
		t.Fatalf("granted %v, want free and free%%20two", got)
	}
	// The second acquire of busy is answered after the first, which waits.
	if !c.quiet(50 * time.Millisecond) {
		t.Fatal("an answer for busy before the lock was released")
	}
	other.send("R busy " + strconv.FormatUint(otok, 10))
	if line := other.read(); line != "R busy OK" {
		t.Fatal(line)
	}
	grant(t, c.read(), "busy")
	if line := c.read(); line != "A busy T" {
		t.Fatalf("the second acquire of busy: %q", line)
	}
}

func TestDisconnectedWaiterLeaves(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h := e.dial()
	h.send("A d 10 -")
	tok := grant(t, h.read(), "d")
	w := e.dial()
	w.send("A d 10 -", "A d2 10 -")
	grant(t, w.read(), "d2")
	waitFor(t, func() bool { li, _ := e.eng.Status("d"); return li.Waiters == 1 })
	w.nc.Close()
	waitFor(t, func() bool { li, _ := e.eng.Status("d"); return li.Waiters == 0 })
	h.send("R d " + strconv.FormatUint(tok, 10))
	if line := h.read(); line != "R d OK" {
		t.Fatal(line)
	}
	if li, _ := e.eng.Status("d"); li.Holder != nil {
		t.Fatalf("the lock went to a waiter that left: %+v", li.Holder)
	}
}

// TestBadInput: every malformed line is answered E invalid_argument naming
// the field when op and key can be read, or closes the connection after
// an error line; none changes state or disturbs another connection.
func TestBadInput(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	bystander := e.dial()
	bystander.send("A held 10 -")
	tok := grant(t, bystander.read(), "held")

	answered := []struct{ line, want string }{
		{"A k", "A k E invalid_argument lease: is missing"},
		{"A k 10", "A k E invalid_argument wait: is missing"},
		{"A k abc -", "A k E invalid_argument lease: must be a number of seconds"},
		{"A k -1 -", "A k E invalid_argument lease: must be greater than 0 seconds"},
		{"A k 10 -1", "A k E invalid_argument wait: must be 0 (no limit) or more seconds"},
		{"A k 10 -1e-3", "A k E invalid_argument wait: must be 0 (no limit) or more seconds"},
		{"A k 10 --1", "A k E invalid_argument wait: must be a number of seconds"},
		{"A k 0 -", "A k E invalid_argument lease: must be greater than 0"},
		{"A k 1e -", "A k E invalid_argument lease: must be a number"},
		{"A k 0e3 -", "A k E invalid_argument lease: must be greater than 0"},
		{"A k 10 NaN", "A k E invalid_argument wait: must be a number"},
		{"A k 99999999 -", "A k E invalid_argument lease: must be at most"},
		{"A k 10 - id=", "A k E invalid_argument id: must be 1 to 256"},
		{"A k 10 - id=%zz", "A k E invalid_argument id: has a bad percent-encoding"},
		{"A k 10 - id=a id=b", "A k E invalid_argument id: is given more than once"},
		{"A k 10 - owner=", "A k E invalid_argument owner: must not be empty"},
		{"A k 10 - owner=%zz", "A k E invalid_argument owner: has a bad percent-encoding"},
		{"A k 10 - owner=a%07b", "A k E invalid_argument owner: contains the unprintable character U+0007"},
		{"A k 10 - owner=" + strings.Repeat("o", engine.MaxOwnerBytes+1), "A k E invalid_argument owner: is 129 bytes; at most 128"},
		{"A k 10 - owner=a owner=b", "A k E invalid_argument owner: is given more than once"},
		{"A k 10 - mode=", `A k E invalid_argument mode: must be shared or exclusive, got ""`},
		{"A k 10 - mode=Shared", `A k E invalid_argument mode: must be shared or exclusive, got "Shared"`},
		{"A k 10 - mode=read", `A k E invalid_argument mode: must be shared or exclusive, got "read"`},
		{"A k 10 - mode=%zz", "A k E invalid_argument mode: has a bad percent-encoding"},
		{"A k 10 - limit=0", `A k E invalid_argument limit: must be an integer from 1 to 10000, got "0"`},
		{"A k 10 - limit=-1", `A k E invalid_argument limit: must be an integer from 1 to 10000, got "-1"`},
		{"A k 10 - limit=02", `A k E invalid_argument limit: must be an integer from 1 to 10000, got "02"`},
		{"A k 10 - limit=1.5", `A k E invalid_argument limit: must be an integer from 1 to 10000, got "1.5"`},
		{"A k 10 - limit=", `A k E invalid_argument limit: must be an integer from 1 to 10000, got ""`},
		{"A k 10 - limit=10001", `A k E invalid_argument limit: must be at most 10000, got "10001"`},
		{"A k 10 - limit=99999999999999999999", `A k E invalid_argument limit: must be at most 10000, got "99999999999999999999"`},
		{"A k 10 - mode=shared limit=0", "A k E invalid_argument limit: must be an integer from 1"},
		{"A k 10 - colour=red", "A k E invalid_argument colour: is not an option of A"},
		{"A k 10 - noequals", "A k E invalid_argument option:"},
		{"A k  10 -", "A k E invalid_argument lease: is empty"},
		{"A k%2 10 -", "A k%2 E invalid_argument key: has a bad percent-encoding"},
		{"A k%zz 10 -", "A k%zz E invalid_argument key: has a bad percent-encoding"},
		{"A %0A 10 -", "A %0A E invalid_argument key: contains the control character"},
		{"A " + strings.Repeat("x", 257) + " 10 -", "A " + strings.Repeat("x", 257) + " E invalid_argument key: is 257 bytes"},
		{"A k 10 \xff", "A k E invalid_argument wait: is not valid UTF-8"},
		{"A k 10 - owner=\xff", "A k E invalid_argument owner: is not valid UTF-8"},
		{"A k 10 - mode=shared limit=\xfe", "A k E invalid_argument limit: is not valid UTF-8"},
		{"A k 10 - x\xff=1", "A k E invalid_argument option: is not valid UTF-8"},
		{"R held", "R held E invalid_argument fields: R takes 3 fields"},
		{"R held 1 2", "R held E invalid_argument fields: R takes 3 fields"},
		{"R held 0", "R held E invalid_argument token: must be a fencing token"},
		{"R held 01", "R held E invalid_argument token: must be a fencing token"},
		{"R held -5", "R held E invalid_argument token: must be a fencing token"},
		{"R held 9007199254740992", "R held E invalid_argument token: must be a fencing token"},
		{"R held FORCE", "R held E invalid_argument token: must be a fencing token"},
		{"R held force 1", "R held E invalid_argument option: \"1\" is not name=value"},
		{"R held force id=a id=b", "R held E invalid_argument fields: R takes 3 fields"},
		{"R held force owner=x", "R held E invalid_argument owner: is not an option of R force (id)"},
		{"R held force id=", "R held E invalid_argument id: must be 1 to 256"},
		{"R held force id=a%zz", "R held E invalid_argument id: has a bad percent-encoding"},
		{"R held 1 id=a", "R held E invalid_argument fields: R takes 3 fields"},
		{"N held " + strconv.FormatUint(tok, 10), "N held E invalid_argument fields: N takes 4 fields"},
		{"N held " + strconv.FormatUint(tok, 10) + " x", "N held E invalid_argument lease: must be a number"},
	}
	c := e.dial()
	for _, tc := range answered {
		c.send(tc.line)
		if got := c.read(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q...", tc.line, got, tc.want)
		}
	}
	// The connection still serves.
	c.send("A ok 10 -")
	grant(t, c.read(), "ok")

	closing := []struct{ line, want string }{
		{"GET / HTTP/1.1", "HTTP/1.1 400 Bad Request"}, // a first line: answered in HTTP (TestHTTPClientsAreTold…)
		{"", `- - E invalid_argument op: "" is not an op`},
		{"A", "- - E invalid_argument key: is missing"},
		{"A  10 -", "- - E invalid_argument key: is missing"},
		{"A \xff\xfe 10 -", "- - E invalid_argument key: is not valid UTF-8"},
		{"\xff 1 2", "- - E invalid_argument op: is not an op"},
		{"A " + strings.Repeat("k", native.MaxLine) + " 10 -", "- - E invalid_argument line: longer than 4096 bytes"},
	}
	for _, tc := range closing {
		c := e.dial()
		c.send(tc.line, "A after 10 -")
		if got := c.read(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q...", tc.line, got, tc.want)
		}
		if !c.closed() {
			t.Errorf("%q: the connection stays open", tc.line)
		}
	}
	// No state changed: "held" is held by the bystander alone, no other
	// key exists but "ok", and "after" was never read.
	var keys []string
	e.eng.Range(func(li engine.LockInfo) bool { keys = append(keys, li.Key); return true })
	if len(keys) != 2 {
		t.Fatalf("keys after bad input: %v", keys)
	}
	if li, _ := e.eng.Status("held"); li.Holder == nil || li.Holder.Token != tok {
		t.Fatalf("held: %+v", li.Holder)
	}
	bystander.send("R held " + strconv.FormatUint(tok, 10))
	if line := bystander.read(); line != "R held OK" {
		t.Fatal(line)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{AuthTokens: []string{"s3cret"}})
	good := e.dial()
	good.send("AUTH s3cret", "A k 10 -")
	if line := good.read(); line != "AUTH OK" {
		t.Fatal(line)
	}
	grant(t, good.read(), "k")

	for _, first := range []string{"AUTH wrong", "A k2 10 -", "AUTH", "AUTH a b"} {
		c := e.dial()
		c.send(first, "A k3 10 -")
		if line := c.read(); !strings.HasPrefix(line, "AUTH E unauthorized ") {
			t.Errorf("%q: got %q", first, line)
		}
		if !c.closed() {
			t.Errorf("%q: connection not closed", first)
		}
	}
	for _, k := range []string{"k2", "k3"} {
		if li, _ := e.eng.Status(k); li.Holder != nil || li.Waiters != 0 {
			t.Errorf("%s changed without AUTH: %+v", k, li)
		}
	}
}

// TestClientThatNeverReads: a client that pipelines requests and never
// reads its answers is closed once its answers back up into the server
// (its reader pauses at MaxQueue/2 of them, and the socket takes nothing
// more); its waiters leave; other connections are served throughout. On
// a connection that is not a *net.TCPConn too (as over TLS).
func TestClientThatNeverReads(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(net.Listener) net.Listener
	}{
		{"direct", nil},
		{"wrapped", func(ln net.Listener) net.Listener { return wrapConns{ln} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvOn(t, engine.Config{}, native.Config{MaxQueue: 64}, tc.wrap)
			// The holder's lease outlasts the test: the flood and its
			// close took 13 to 21 s on a loaded 2-core machine under the
			// race detector, and a 10 s lease ran out first (the waiter,
			// granted, left with its connection: "R slow E not_held").
			h := e.dial()
			h.send("A slow 600 -")
			tok := grant(t, h.read(), "slow")

			flood := e.dial()
			flood.send("A slow 600 -")
			waitFor(t, func() bool { li, _ := e.eng.Status("slow"); return li.Waiters == 1 })
			// Each release of a key nobody holds is answered at once: the answers
			// fill the socket buffers, then the queue.
			line := []byte(strings.Repeat("R nobody 1\n", 1000))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = flood.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
				for {
					if _, err := flood.nc.Write(line); err != nil {
						return
					}
				}
			}()
			waitFor(t, func() bool { li, _ := e.eng.Status("slow"); return li.Waiters == 0 })
			// The server reads and discards what the client still sends
			// until the answers in its socket are read (up to 30 s,
			// TestClientThatStopsReadingGetsTheGrantsSentToIt): this
			// client never reads, so it stops writing itself.
			flood.nc.Close()
			wg.Wait()
			h.send("R slow " + strconv.FormatUint(tok, 10))
			if line := h.read(); line != "R slow OK" {
				t.Fatal(line)
			}
			if li, _ := e.eng.Status("slow"); li.Holder != nil {
				t.Fatalf("the closed connection's waiter got the lock: %+v", li.Holder)
			}
		})
	}
}

func TestStandbyAnswersMoved(t *testing.T) {
	gate := &fakeGate{active: "10.0.0.7:7071"}
	e := newEnv(t, engine.Config{}, native.Config{Gate: gate})
	c := e.dial()
	c.send("A k 10 -", "R k 5", "N k 5 -")
	got := map[string]bool{}
	for range 3 {
		got[c.read()] = true
	}
	for _, want := range []string{"A k M 10.0.0.7:7071", "R k M 10.0.0.7:7071", "N k M 10.0.0.7:7071"} {
		if !got[want] {
			t.Errorf("no %q among %v", want, got)
		}
	}
	gate.mu.Lock()
	gate.active = ""
	gate.mu.Unlock()
	c.send("A k 10 -")
	if got := c.read(); got != "A k E unavailable no active node is known at the moment; retry" {
		t.Errorf("no active known: %q", got)
	}
	// Every other peer refuses this node: the answer says so.
	gate.mu.Lock()
	gate.refused = true
	gate.mu.Unlock()
	c.send("A k 10 -")
	if got := c.read(); !strings.HasPrefix(got, "A k E unavailable this node knows no active: every other node refuses its peer requests (its cluster_secret differs") {
		t.Errorf("no active known, refused by every peer: %q", got)
	}
	if li, _ := e.eng.Status("k"); li.Holder != nil {
		t.Fatal("a standby granted")
	}
}

type fakeGate struct {
	mu      sync.Mutex
	active  string
	refused bool // every other peer refuses this node
}

func (g *fakeGate) Serving() bool         { return false }
func (g *fakeGate) HoldsBack(uint64) bool { return false }
func (g *fakeGate) RefusedByPeers() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}
func (g *fakeGate) ActiveNative() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", patience)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPipelinedBurst: thousands of requests written at once on one
// connection are each answered exactly once, with their own key, while
// the writer drains answers queued from many goroutines.
func TestPipelinedBurst(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	c := e.dial()
	const n = 3000
	for round := range 3 {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf("A b%d 10 -", i)
		}
		c.send(lines...)
		tokens := map[string]uint64{}
		for range n {
			line := c.read()
			f := strings.Fields(line)
			if len(f) != 6 || f[0] != "A" || f[2] != "OK" {
				t.Fatalf("round %d: %q", round, line)
			}
			if _, dup := tokens[f[1]]; dup {
				t.Fatalf("round %d: %s answered twice", round, f[1])
			}
			tokens[f[1]] = grant(t, line, f[1])
		}
		for i := range lines {
			k := fmt.Sprintf("b%d", i)
			lines[i] = "R " + k + " " + strconv.FormatUint(tokens[k], 10)
		}
		c.send(lines...)
		for range n {
			if line := c.read(); !strings.HasSuffix(line, " OK") || !strings.HasPrefix(line, "R b") {
				t.Fatalf("round %d: %q", round, line)
			}
		}
	}
}

// TestBurstLargerThanMaxQueue: a client that sends far more lines than
// MaxQueue at once, reading the answers as they come, is served: answers
// leave while the server still has lines to read (MaxQueue bounds what a
// client leaves unread, not what it sends in one go).
func TestBurstLargerThanMaxQueue(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	c := e.dial()
	n := 3 * native.DefaultMaxQueue
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("A burst%d 10 -", i)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := c.nc.Write([]byte(strings.Join(lines, "\n") + "\n"))
		sent <- err
	}()
	for i := range n {
		line := c.read()
		if f := strings.Fields(line); len(f) != 6 || f[0] != "A" || f[2] != "OK" {
			t.Fatalf("answer %d: %q", i, line)
		}
	}
	if err := <-sent; err != nil {
		t.Fatalf("write: %v", err)
	}
}

// TestBurstReadLate: a client that sends a burst of lines far larger than
// MaxQueue at once and reads its answers a moment late, once the answers
// have filled the sockets' buffers and MaxQueue/2 of them wait in the
// server, is served: the server stops taking its lines while the answers
// wait for the client to read them, rather than queue answers until
// MaxQueue and close the connection as one that does not read them. The
// sockets' buffers are small so that the answers back up into the server
// early; the lines are releases of keys nobody holds, answered at once
// without the log. With a MaxQueue smaller than the reader's batch of
// answers too, and on a connection that is not a *net.TCPConn (as over
// TLS: the reader reads through a bufio.Reader, the writer writes all).
func TestBurstReadLate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxQueue int
		wrap     func(net.Listener) net.Listener
	}{
		{"direct", native.DefaultMaxQueue, smallSendBuffers},
		{"direct,MaxQueue=64", 64, smallSendBuffers},
		{"wrapped", native.DefaultMaxQueue, func(ln net.Listener) net.Listener { return wrapConns{smallSendBuffers(ln)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxQueue := tc.maxQueue
			var answers answerCount
			e := newEnvOn(t, engine.Config{}, native.Config{MaxQueue: maxQueue, Metrics: &answers}, tc.wrap)
			c := e.dial()
			if err := c.nc.(*net.TCPConn).SetReadBuffer(lateReadBuffer); err != nil {
				t.Fatal(err)
			}
			// Long keys: the buffers hold fewer answers.
			pad := strings.Repeat("k", 200)
			key := func(i int) string { return pad + strconv.Itoa(i) }
			n := 3 * native.DefaultMaxQueue
			lines := make([]string, n)
			for i := range lines {
				lines[i] = "R " + key(i) + " 1"
			}
			sent := make(chan error, 1)
			go func() {
				_, err := c.nc.Write([]byte(strings.Join(lines, "\n") + "\n"))
				sent <- err
			}()
			// The server has answered MaxQueue/2 lines and the client has
			// read none: the answers fill the buffers and wait in the
			// server. The client reads them a moment later.
			waitFor(t, func() bool { return answers.n.Load() >= int64(maxQueue/2) })
			time.Sleep(100 * time.Millisecond)
			for i := range n {
				line := c.read()
				if !strings.HasPrefix(line, "R "+key(i)+" E not_held ") {
					t.Fatalf("answer %d: %q", i, line)
				}
			}
			if err := <-sent; err != nil {
				t.Fatalf("write: %v", err)
			}
		})
	}
}

// wrapConns wraps the connections its listener accepts in a type of
// their own, which the server cannot write to without waiting (as a TLS
// connection).
type wrapConns struct{ net.Listener }

func (l wrapConns) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return struct{ net.Conn }{nc}, nil
}

// answerCount counts the answers a server made (native.Metrics).
type answerCount struct{ n atomic.Int64 }

func (a *answerCount) ObserveNative(string, string, time.Duration) { a.n.Add(1) }
func (a *answerCount) Delivered(string, uint64)                    {}

// smallBuffer is the size (bytes) asked for the send buffers of
// smallSendBuffers; lateReadBuffer for the receive buffer of
// TestBurstReadLate's client (not smaller: a window under two segments
// of the loopback's would hold the answers up by a delayed
// acknowledgment each).
const (
	smallBuffer    = 8 << 10
	lateReadBuffer = 64 << 10
)

// smallSendBuffers wraps ln so that the connections it accepts have a
// send buffer of smallBuffer (the kernel's autotuning would let it grow
// to megabytes of answers). They stay *net.TCPConn.
func smallSendBuffers(ln net.Listener) net.Listener { return smallSendLn{ln} }

type smallSendLn struct{ net.Listener }

func (l smallSendLn) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(smallBuffer)
	}
	return nc, err
}

// TestGrantRacingCloseIsReleased: a waiter's client closes its connection
// and the lock is released at once, before or after the server has seen
// the close: the lock does not stay with the gone client (the waiter left
// the queue, or the grant it got was released), and a later acquire gets
// it at once.
func TestGrantRacingCloseIsReleased(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h := e.dial()
	for i := range 50 {
		key := "race" + strconv.Itoa(i)
		h.send("A " + key + " 30 -")
		tok := grant(t, h.read(), key)
		w := e.dial()
		w.send("A " + key + " 30 -")
		waitFor(t, func() bool { li, _ := e.eng.Status(key); return li.Waiters == 1 })
		w.nc.Close()
		h.send("R " + key + " " + strconv.FormatUint(tok, 10))
		if line := h.read(); line != "R "+key+" OK" {
			t.Fatal(line)
		}
		waitFor(t, func() bool { li, _ := e.eng.Status(key); return li.Holder == nil && li.Waiters == 0 })
		h.send("A " + key + " 30 0.5")
		grant(t, h.read(), key)
	}
}

// TestPiledUpAcquiresAreBounded: acquires of one key piling up behind a
// parked one on a connection count against MaxQueue like unread answers:
// past it the connection is closed and its waiter leaves.
func TestPiledUpAcquiresAreBounded(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{MaxQueue: 64})
	h := e.dial()
	h.send("A pile 30 -")
	grant(t, h.read(), "pile")
	c := e.dial()
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = "A pile 30 -"
	}
	c.send(lines...)
	if !c.closed() {
		t.Fatal("the connection stays open with 99 acquires piled up")
	}
	waitFor(t, func() bool { li, _ := e.eng.Status("pile"); return li.Waiters == 0 })
}

// A line longer than MaxLine, followed by more bytes the client sends
// before it reads: the error line still arrives, then an orderly end of
// the connection (EOF), not a reset that could destroy the error line.
func TestOverlongLineErrorArrivesBeforeTheClose(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	for range 5 {
		c := e.dial()
		long := "A " + strings.Repeat("k", native.MaxLine+100) + " 10 -"
		c.send(long, strings.Repeat("A x 10 -\n", 2000))
		if got := c.read(); !strings.HasPrefix(got, "- - E invalid_argument line: longer than") {
			t.Fatalf("the first answer is %q, want the error line", got)
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(patience))
		if rest, err := c.br.ReadString('\n'); err != io.EOF {
			t.Fatalf("after the error line: %q, %v; want EOF", rest, err)
		}
	}
}

// holdingGate serves but holds back every grant, as a cluster node that
// has just resumed from a pause does (cluster.Node.HoldsBack).
type holdingGate struct{}

func (holdingGate) Serving() bool         { return true }
func (holdingGate) HoldsBack(uint64) bool { return true }
func (holdingGate) RefusedByPeers() bool  { return false }
func (holdingGate) ActiveNative() string  { return "" }

// A grant held back is answered E unavailable. Without an id nobody can
// ever claim it, so it is released at once (as over HTTP), not held by
// nobody for its lease; with an id it stays for the repeat.
func TestHeldBackGrant(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{Gate: holdingGate{}})
	c := e.dial()
	c.send("A anon 60 -")
	if got := c.read(); !strings.HasPrefix(got, "A anon E unavailable ") {
		t.Fatalf("held-back grant without id: %q", got)
	}
	if li, _ := e.eng.Status("anon"); li.Holder != nil {
		t.Fatalf("a held-back grant nobody can claim still holds the key: %+v", li.Holder)
	}
	c.send("A keyed 60 - id=retry-1")
	if got := c.read(); !strings.HasPrefix(got, "A keyed E unavailable ") {
		t.Fatalf("held-back grant with id: %q", got)
	}
	if li, _ := e.eng.Status("keyed"); li.Holder == nil {
		t.Fatal("a held-back grant with an id was not kept for its repeat")
	}
}

// timeoutHoldingGate holds back the timeouts only (HoldsBack(0)), as a
// cluster node that has just resumed from a pause does.
type timeoutHoldingGate struct{ holdingGate }

func (timeoutHoldingGate) HoldsBack(token uint64) bool { return token == 0 }

// A wait that runs out on a node whose gate holds back timeouts (it has
// just resumed from a pause: a promoted active may grant the waiter's
// place) is answered E unavailable, not T (nothing held), which may be
// false there; a grant goes through.
func TestHeldBackTimeout(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{Gate: timeoutHoldingGate{}})
	h := e.dial()
	h.send("A k 60 -")
	grant(t, h.read(), "k")
	w := e.dial()
	w.send("A k 60 0.05 id=late-1")
	if got := w.read(); !strings.HasPrefix(got, "A k E unavailable ") {
		t.Fatalf("a wait that ran out on a node that holds back timeouts: %q, want A k E unavailable", got)
	}
}

// TestCloseWritesTheParkedAcquiresAnswers: a node that stops closes its
// engine first (every parked acquire's answer is E unavailable) and then
// the server, which writes those lines before it closes the sockets: no
// client finds its connection closed with no answer (seen in CI as an
// EOF in cmd/baton's TestNativeServe).
func TestCloseWritesTheParkedAcquiresAnswers(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h := e.dial()
	h.send("A k 30 -")
	grant(t, h.read(), "k")
	const waiters = 32
	var ws []*client
	for range waiters {
		w := e.dial()
		w.send("A k 30 -")
		ws = append(ws, w)
	}
	waitFor(t, func() bool { li, _ := e.eng.Status("k"); return li.Waiters == waiters })
	_ = e.eng.Close()
	_ = e.srv.Close()
	for i, w := range ws {
		if line := w.read(); !strings.HasPrefix(line, "A k E unavailable ") {
			t.Fatalf("waiter %d at the node's close: %q, want A k E unavailable", i, line)
		}
	}
}

// A ping ("P <word>") is answered "P <word> OK" at once, on an active as
// on a standby, beside a parked acquire, with no state changed; a ping
// with another field count is answered E and the connection serves on;
// one without a word closes it (its key field cannot be read).
func TestPing(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	c := e.dial()
	c.send("A held 10 -")
	tok := grant(t, c.read(), "held")
	c.send("A held 10 -", "P 1", "P x%20y")
	if got := c.read(); got != "P 1 OK" {
		t.Fatalf("ping beside a parked acquire: %q", got)
	}
	if got := c.read(); got != "P x%20y OK" {
		t.Fatalf("second ping: %q", got)
	}
	c.send("P 1 2")
	if got := c.read(); !strings.HasPrefix(got, "P 1 E invalid_argument fields: P takes 2 fields") {
		t.Fatalf("ping with 3 fields: %q", got)
	}
	c.send("R held " + strconv.FormatUint(tok, 10))
	got := map[string]bool{c.read(): true}
	got[c.read()] = true
	if !got["R held OK"] || len(got) != 2 {
		t.Fatalf("after the pings: %v, want the release and the parked acquire's grant", got)
	}
	bad := e.dial()
	bad.send("P")
	if got := bad.read(); !strings.HasPrefix(got, "- - E invalid_argument word: is missing") {
		t.Fatalf("P without a word: %q", got)
	}
	if !bad.closed() {
		t.Fatal("P without a word: the connection stays open")
	}

	standby := newEnv(t, engine.Config{}, native.Config{Gate: &fakeGate{}})
	s := standby.dial()
	s.send("P 7")
	if got := s.read(); got != "P 7 OK" {
		t.Fatalf("ping on a standby with no active known: %q", got)
	}
}

// "C <key> <id>" withdraws the connection's acquire of key with that id:
// parked in the queue, it leaves it at once (answered "A <key> T"); one
// waiting its turn behind the connection's other acquire of the key
// never joins it (T in its turn). Either way "C <key> OK"; so is a C
// naming nothing. Nothing is granted to a withdrawn acquire.
func TestCancel(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	holder := e.dial()
	holder.send("A k 10 -")
	tok := grant(t, holder.read(), "k")
	c := e.dial()
	c.send("A k 10 3600 id=x1", "A k 10 3600 id=x2")
	waitFor(t, func() bool { li, _ := e.eng.Status("k"); return li.Waiters == 1 })
	c.send("C k x2")
	if got := c.read(); got != "C k OK" {
		t.Fatalf("cancel of the acquire waiting its turn: %q", got)
	}
	c.send("C k x1")
	for _, want := range []string{"A k T", "C k OK", "A k T"} {
		if got := c.read(); got != want {
			t.Fatalf("after the cancel of the parked acquire: %q, want %q", got, want)
		}
	}
	if li, _ := e.eng.Status("k"); li.Waiters != 0 {
		t.Fatalf("waiters after the cancels: %d", li.Waiters)
	}
	c.send("C k x1", "C k nobody")
	for range 2 {
		if got := c.read(); got != "C k OK" {
			t.Fatalf("cancel of nothing: %q", got)
		}
	}
	for line, want := range map[string]string{
		"C k":       "C k E invalid_argument fields: C takes 3 fields",
		"C k a b":   "C k E invalid_argument fields: C takes 3 fields",
		"C k %zz":   "C k E invalid_argument id: has a bad percent-encoding",
		"C k%zz id": "C k%zz E invalid_argument key: has a bad percent-encoding",
	} {
		c.send(line)
		if got := c.read(); !strings.HasPrefix(got, want) {
			t.Errorf("%q: got %q, want %q...", line, got, want)
		}
	}
	holder.send("R k " + strconv.FormatUint(tok, 10))
	if got := holder.read(); got != "R k OK" {
		t.Fatal(got)
	}
	if li, _ := e.eng.Status("k"); li.Holder != nil {
		t.Fatalf("a withdrawn acquire was granted: %+v", li.Holder)
	}
	if !c.quiet(100 * time.Millisecond) {
		t.Fatal("an answer after the release")
	}
}

// A line of MaxLine bytes is read whether it ends in "\n" or "\r\n" (the
// README: "a \r before it is ignored"; MaxLine counts the line without
// them): the "\r" was counted, so the same line sent with CRLF was
// refused as longer than 4096 bytes and the connection closed.
func TestMaxLineWithCRLF(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	word := strings.Repeat("w", native.MaxLine-2) // "P <word>": MaxLine bytes
	for _, end := range []string{"", "\r"} {
		c := e.dial()
		c.send("P "+word+end, "P after")
		if got := c.read(); got != "P "+word+" OK" {
			t.Errorf("a line of MaxLine bytes ending %q: got %.60q…", end+"\n", got)
			continue
		}
		if got := c.read(); got != "P after OK" {
			t.Errorf("after a line of MaxLine bytes ending %q: got %q", end+"\n", got)
		}
	}
}

// Breaker N: an id= is the Idempotency-Key of HTTP "with the same rules",
// and HTTP trims the blanks around the header's value (RFC 9110 section
// 5.5). Natively they were kept: "R k force id=%20F" was not a repeat of
// "R k force id=F" and released the next holder, and a blank id was a
// waiter ID where HTTP refuses it.
func TestNativeIDBlanksTrimmedAsOverHTTP(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	c := e.dial()
	c.send("A k 30 -")
	grant(t, c.read(), "k")
	c.send("R k force id=F")
	if got := c.read(); got != "R k OK" {
		t.Fatalf("the force: %q", got)
	}
	c.send("A k 30 -")
	tok := grant(t, c.read(), "k")
	for _, id := range []string{"%20F", "F%09", "%20%09F%20"} {
		c.send("R k force id=" + id)
		if got := c.read(); got != "R k OK" {
			t.Fatalf("the force repeated under id=%s: %q", id, got)
		}
	}
	if li, _ := e.eng.Status("k"); li.Holder == nil || li.Holder.Token != tok {
		t.Fatalf("the force repeated under a blank-padded id released the next holder: %+v, want token %d", li.Holder, tok)
	}
	// The same waiter under its key with blanks around it: the grant that
	// stands, not a second place.
	c.send("A w 30 - id=K")
	wtok := grant(t, c.read(), "w")
	c.send("A w 30 - id=%20K%20")
	if got := grant(t, c.read(), "w"); got != wtok {
		t.Fatalf("a repeat under %q: token %d, want the grant %d", " K ", got, wtok)
	}
	for line, want := range map[string]string{
		"A b 30 - id=%20":    "A b E invalid_argument id: must be 1 to",
		"A b 30 - id=%09%20": "A b E invalid_argument id: must be 1 to",
		"R b force id=%20":   "R b E invalid_argument id: must be 1 to",
		"C b %20":            "C b E invalid_argument id: must be 1 to",
	} {
		c.send(line)
		if got := c.read(); !strings.HasPrefix(got, want) {
			t.Errorf("%q: got %q, want %q...", line, got, want)
		}
	}
	if li, _ := e.eng.Status("b"); li.Holder != nil || li.Waiters != 0 {
		t.Fatalf("a refused line changed b: %+v", li)
	}
}

// Breaker N: C names a lock, whatever the spelling of its key: a cancel
// of "caf%c3%a9" answered OK but left the acquire of "caf%C3%A9" (the
// same key) parked, to be granted later.
func TestCancelFindsTheKeyWhateverItsSpelling(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	holder := e.dial()
	holder.send("A café 10 -")
	tok := grant(t, holder.read(), "café")
	c := e.dial()
	c.send("A caf%C3%A9 10 3600 id=w1")
	waitFor(t, func() bool { li, _ := e.eng.Status("café"); return li.Waiters == 1 })
	c.send("C caf%c3%a9 w1")
	for _, want := range []string{"A caf%C3%A9 T", "C caf%c3%a9 OK"} {
		if got := c.read(); got != want {
			t.Fatalf("after the cancel under another spelling: %q, want %q", got, want)
		}
	}
	if li, _ := e.eng.Status("café"); li.Waiters != 0 {
		t.Fatalf("waiters after the cancel: %d", li.Waiters)
	}
	holder.send("R café " + strconv.FormatUint(tok, 10))
	if got := holder.read(); got != "R café OK" {
		t.Fatal(got)
	}
	if li, _ := e.eng.Status("café"); li.Holder != nil {
		t.Fatalf("the withdrawn acquire was granted: %+v", li.Holder)
	}
}
