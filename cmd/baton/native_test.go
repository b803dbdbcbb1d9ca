package main

import (
	"bufio"
	"crypto/tls"
	"github.com/baton-io/baton/internal/testproc"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nativeConn is a raw connection to a node's native protocol (SPEC 2b).
type nativeConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialNative(t *testing.T, addr string) *nativeConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &nativeConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *nativeConn) send(lines ...string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next answer line; the bound turns a hang into a failure.
func (c *nativeConn) read() string {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(bound))
	line, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("native read: %v (%q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// nativeToken checks that line grants key and returns its token.
func nativeToken(t *testing.T, line, key string) uint64 {
	t.Helper()
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "A" || f[1] != key || f[2] != "OK" {
		t.Fatalf("got %q, want a grant of %s", line, key)
	}
	tok, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestNativeServe: native_listen serves the native protocol beside HTTP,
// behind AUTH when auth_tokens is set, with the same state as HTTP sees,
// its answers in the metrics by protocol; SIGTERM answers a parked native
// acquire E unavailable.
func TestNativeServe(t *testing.T) {
	naddr := freeAddr(t)
	n := startServe(t, t.TempDir(), nil, "--native-listen", naddr, "--auth-tokens", "tok")
	c := dialNative(t, naddr)
	c.send("AUTH tok", "A jobs%2Fnightly 30 -")
	if line := c.read(); line != "AUTH OK" {
		t.Fatal(line)
	}
	tok := nativeToken(t, c.read(), "jobs%2Fnightly")
	res, body := get(t, "GET", n.url+"/locks/jobs%2Fnightly", "Authorization", "Bearer tok", "Accept", "text/plain")
	if res.StatusCode != 200 || body != strconv.FormatUint(tok, 10)+"\n" {
		t.Fatalf("HTTP sees %d %q, want the native grant %d", res.StatusCode, body, tok)
	}
	w := dialNative(t, naddr)
	w.send("AUTH tok", "A jobs%2Fnightly 30 -")
	if line := w.read(); line != "AUTH OK" {
		t.Fatal(line)
	}
	eventually(t, "the native waiter queued", func() string {
		_, body := get(t, "GET", n.url+"/locks/jobs%2Fnightly", "Authorization", "Bearer tok")
		if !strings.Contains(body, `"waiters":1`) {
			return body
		}
		return ""
	})
	_, metrics := get(t, "GET", n.url+"/metrics", "Authorization", "Bearer tok")
	for _, want := range []string{
		`baton_native_request_duration_seconds_count{op="A",outcome="OK"} 1`,
		`baton_native_request_duration_seconds_count{op="AUTH",outcome="OK"} 2`,
		`baton_enqueues_total 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	bad := dialNative(t, naddr)
	bad.send("AUTH nope", "A other 30 -")
	if line := bad.read(); !strings.HasPrefix(line, "AUTH E unauthorized ") {
		t.Fatalf("a wrong AUTH: %q", line)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if line := w.read(); !strings.HasPrefix(line, "A jobs%2Fnightly E unavailable ") {
		t.Fatalf("the parked native acquire at shutdown: %q", line)
	}
}

// TestNativeAdminForce: owner=, mode= and limit= reach the same state as
// HTTP shows, and admin_tokens reach the native server: with auth_tokens
// and admin_tokens set, "R <key> force" is E forbidden to a connection
// that AUTHed with an auth token and done for one that AUTHed with an
// admin token.
func TestNativeAdminForce(t *testing.T) {
	naddr := freeAddr(t)
	n := startServe(t, t.TempDir(), nil, "--native-listen", naddr, "--auth-tokens", "tok", "--admin-tokens", "ops")
	u := dialNative(t, naddr)
	u.send("AUTH tok", "A db 30 - owner=job%207 mode=shared limit=2")
	if line := u.read(); line != "AUTH OK" {
		t.Fatal(line)
	}
	tok := nativeToken(t, u.read(), "db")
	_, body := get(t, "GET", n.url+"/locks/db", "Authorization", "Bearer tok")
	for _, want := range []string{`"owner":"job 7"`, `"mode":"shared"`, `"limit":2`, `"token":` + strconv.FormatUint(tok, 10)} {
		if !strings.Contains(body, want) {
			t.Errorf("HTTP status of db lacks %s: %s", want, body)
		}
	}
	u.send("R db force")
	if line := u.read(); !strings.HasPrefix(line, "R db E forbidden ") {
		t.Fatalf("force with an auth token: %q", line)
	}
	a := dialNative(t, naddr)
	a.send("AUTH ops", "R db force")
	if line := a.read(); line != "AUTH OK" {
		t.Fatal(line)
	}
	if line := a.read(); line != "R db OK" {
		t.Fatalf("force with an admin token: %q", line)
	}
	u.send("R db " + strconv.FormatUint(tok, 10))
	if line := u.read(); !strings.HasPrefix(line, "R db E not_held ") {
		t.Fatalf("release after the forced release: %q", line)
	}
}

// TestNativeFailover: a standby answers M with the active's native
// address; native waiters parked on the active when it is killed (kill -9)
// repeat their acquires with the same id on the new active, as the Go
// client does, and are granted there in their original order.
func TestNativeFailover(t *testing.T) {
	needBinary(t)
	a1, a2 := freeAddr(t), freeAddr(t)
	na1, na2 := freeAddr(t), freeAddr(t)
	peers := "--peers=http://" + a1 + ",http://" + a2
	n1 := startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1, "--native-listen", na1)
	startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2, "--native-listen", na2)
	eventually(t, "node 1 active, node 2 synced", func() string {
		res, _ := get(t, "GET", n1.url+"/readyz")
		if res.StatusCode != 200 {
			return "node 1 not active"
		}
		res, _ = get(t, "GET", "http://"+a2+"/locks")
		if res.Header.Get("Baton-Replica-Lag") == "" {
			return "node 2 has no replica yet"
		}
		return ""
	})
	s := dialNative(t, na2)
	eventually(t, "M from the standby", func() string {
		s.send("A k 10 -")
		if line := s.read(); line != "A k M "+na1 {
			return line
		}
		return ""
	})

	h := dialNative(t, na1)
	h.send("A k 2 -")
	nativeToken(t, h.read(), "k")
	w1, w2 := dialNative(t, na1), dialNative(t, na1)
	w1.send("A k 30 - id=first")
	n1.waitWaiters("k", 1)
	w2.send("A k 30 - id=second")
	n1.waitWaiters("k", 2)
	// Wait until the standby's replica holds both waiters, then kill -9.
	eventually(t, "the waiters replicated", func() string {
		_, body := get(t, "GET", "http://"+a2+"/locks/k")
		if !strings.Contains(body, `"waiters":2`) {
			return body
		}
		return ""
	})
	if err := n1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n1.exited
	// The connections break; the waiters repeat on the new active, the
	// second first: the first keeps its place all the same.
	var r1, r2 *nativeConn
	eventually(t, "node 2 active", func() string {
		res, _ := get(t, "GET", "http://"+a2+"/readyz")
		if res.StatusCode != 200 {
			return res.Status
		}
		return ""
	})
	r2 = dialNative(t, na2)
	r2.send("A k 30 - id=second")
	r1 = dialNative(t, na2)
	r1.send("A k 30 - id=first")
	first := nativeToken(t, r1.read(), "k") // after the holder's 2 s lease
	r1.send("R k " + strconv.FormatUint(first, 10))
	if line := r1.read(); line != "R k OK" {
		t.Fatal(line)
	}
	if second := nativeToken(t, r2.read(), "k"); second <= first {
		t.Fatalf("second token %d after %d", second, first)
	}
}

// TestNativeTLS: with tls_cert, native_listen speaks TLS: a client that
// trusts the certificate is served, and a cleartext line gets no answer.
func TestNativeTLS(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	certFile, keyFile, pool := testproc.SelfSigned(t, dir)
	addr, naddr := freeAddr(t), freeAddr(t)
	startBare(t, nil, "--listen", addr, "--data-dir", t.TempDir(),
		"--tls-cert", certFile, "--tls-key", keyFile, "--native-listen", naddr)
	var tc *tls.Conn
	eventually(t, "the native TLS listener", func() string {
		c, err := tls.Dial("tcp", naddr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return err.Error()
		}
		tc = c
		return ""
	})
	defer tc.Close()
	c := &nativeConn{t: t, nc: tc, br: bufio.NewReader(tc)}
	c.send("A secure 10 -")
	nativeToken(t, c.read(), "secure")

	plain := dialNative(t, naddr)
	plain.send("A k 10 -")
	_ = plain.nc.SetReadDeadline(time.Now().Add(bound))
	if line, err := plain.br.ReadString('\n'); err == nil {
		t.Fatalf("a cleartext request was answered %q", line)
	}
}
