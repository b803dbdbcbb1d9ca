package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// rawLine reads one line of fc as it came (pings included), "" after d.
func rawLine(t *testing.T, fc *fakeConn, d time.Duration) string {
	t.Helper()
	_ = fc.nc.SetReadDeadline(time.Now().Add(d))
	line, err := fc.br.ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(line, "\n")
}

// A quiet native connection is pinged ("P <word>"); a ping left
// unanswered for PingTimeout ends it (errSilent: a paused node keeps its
// connections open), and the client dials again.
func TestNativeQuietConnectionIsPinged(t *testing.T) {
	f := newFakeNode(t)
	newClient(t, func(c *api.Config) {
		c.ConnsPerAddress = 1
		c.PingInterval, c.PingTimeout = 50*time.Millisecond, 200*time.Millisecond
		c.ReconnectInterval = 50 * time.Millisecond
	}, f.Base())
	fc := f.accept(t)
	p := rawLine(t, fc, bound)
	if !strings.HasPrefix(p, "P ") {
		t.Fatalf("first line on a quiet connection %q, want a ping", p)
	}
	fc.send(t, p+" OK")
	if p2 := rawLine(t, fc, bound); !strings.HasPrefix(p2, "P ") || p2 == p {
		t.Fatalf("next line %q, want another ping than %q", p2, p)
	}
	// Unanswered: the client ends the connection and dials again.
	if got := rawLine(t, fc, bound); got != "" {
		t.Fatalf("after an unanswered ping: %q, want the connection's end", got)
	}
	f.accept(t)
}

// A node of a version before the ping answers it "- - E
// invalid_argument op: ..." and closes the connection: the client dials
// again and pings that node no more (its connections rely on TCP
// keep-alive and the acquires' attempt limits, as before).
func TestNativeNodeWithoutPing(t *testing.T) {
	f := newFakeNode(t)
	c := newClient(t, func(c *api.Config) {
		c.ConnsPerAddress = 1
		c.PingInterval, c.PingTimeout = 50*time.Millisecond, time.Second
		c.ReconnectInterval = 50 * time.Millisecond
	}, f.Base())
	fc := f.accept(t)
	if p := rawLine(t, fc, bound); !strings.HasPrefix(p, "P ") {
		t.Fatalf("first line %q, want a ping", p)
	}
	fc.send(t, `- - E invalid_argument op: "P" is not an op (A, R, N, AUTH)`)
	fc.nc.Close()
	fc2 := f.accept(t)
	// Ten ping intervals of quiet: no ping comes.
	if l := rawLine(t, fc2, 500*time.Millisecond); l != "" {
		t.Fatalf("a line on the new connection of a node without the ping: %q", l)
	}
	got := acquireAsync(t.Context(), c, "k")
	if l := rawLine(t, fc2, bound); !strings.HasPrefix(l, "A k - - id=") {
		t.Fatalf("acquire line %q", l)
	}
	fc2.send(t, grantLine("k", 7))
	if r := <-got; r.err != nil || r.l.Token != 7 {
		t.Fatalf("acquire on the node without the ping: %+v", r)
	}
}
