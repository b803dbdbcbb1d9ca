package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// An acquire over baton:// whose ctx ends leaves the node's queue at
// once (the client sends "C <key> <id>"), as an HTTP acquire whose
// request is cancelled does: the waiter behind it is next, and is
// granted at the holder's release, within a hang bound far below the
// cancelled acquire's wait of an hour. Before, the node learned nothing:
// the cancelled waiter stayed queued (and counted toward the limits)
// until it was granted, and that grant, released by the client when it
// came, went before the next waiter's.
func TestNativeCancelLeavesTheQueue(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	hc := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	holder, err := hc.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nil, srv.Base("native"))
	actx, cancel := context.WithCancel(ctx)
	res := acquireAsync(actx, c, "k", api.WithWait(time.Hour))
	waitWaiters(t, hc, "k", 1)
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", r.err)
	}
	waitWaiters(t, hc, "k", 0)
	next := acquireAsync(ctx, c, "k", api.WithWait(time.Hour))
	waitWaiters(t, hc, "k", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The next waiter holds alone (eventually: the client's settling of
	// the withdrawn acquire, a repeat with a wait of 1 ms, can show as a
	// waiter for that moment on a loaded machine).
	heldAlone(t, hc, "k", get(t, next).Token)
}

// An acquire given up before its connection's first ping was answered
// is withdrawn (C) as soon as that answer comes: the answer tells that
// the node knows the op. It was left queued on the node, to be granted
// and released late: the client sent C only on a connection whose ping
// had been answered when the caller gave up, and the first ping of a
// new connection may still be on its way then.
func TestNativeCancelWaitsForTheFirstPing(t *testing.T) {
	f := newFakeNode(t)
	c := newClient(t, nil, f.Base())
	// The client's two connections to the node, read raw: pings are not
	// answered until the test says so.
	type rawLine struct {
		conn int
		line string
	}
	lines := make(chan rawLine, 16)
	conns := []*fakeConn{f.accept(t), f.accept(t)}
	for i, fc := range conns {
		go func() {
			for {
				l, err := fc.br.ReadString('\n')
				if err != nil {
					return
				}
				select {
				case lines <- rawLine{i, strings.TrimSuffix(l, "\n")}:
				case <-t.Context().Done():
					return
				}
			}
		}()
	}
	next := func(want string) rawLine {
		t.Helper()
		for {
			select {
			case l := <-lines:
				if strings.HasPrefix(l.line, want) {
					return l
				}
			case <-time.After(bound):
				t.Fatalf("no %q line", want)
			}
		}
	}
	pings := map[int]string{}
	for len(pings) < 2 {
		p := next("P ")
		pings[p.conn] = strings.TrimPrefix(p.line, "P ")
	}
	actx, cancel := context.WithCancel(t.Context())
	res := acquireAsync(actx, c, "k")
	a := next("A k ")
	_, id, ok := strings.Cut(a.line, " id=")
	if !ok {
		t.Fatalf("acquire line %q has no id", a.line)
	}
	id, _, _ = strings.Cut(id, " ")
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", r.err)
	}
	conns[a.conn].send(t, "P "+pings[a.conn]+" OK")
	if got := next("C "); got.conn != a.conn || got.line != "C k "+id {
		t.Fatalf("after the ping's answer: connection %d sent %q; want connection %d to send %q", got.conn, got.line, a.conn, "C k "+id)
	}
	conns[a.conn].send(t, "C k OK", "A k T")
}
